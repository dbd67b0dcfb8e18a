"""The embedded decision model: two encoders, one similarity, three kinds of answer.

Similarity of a subject text to a query text (the state)::

    s = DENSE * cosine(MiniLM(query), MiniLM(subject))
      + SPARSE * SPLADE(query) . SPLADE(subject) / |SPLADE(query)|

The SPLADE dot product is divided by the query vector's length so that long
and short queries give similarities on one scale; it depends on the query
alone, never on the other subjects of a call. Every constant below was chosen
on TREC DL19 by 2-fold cross-validation (the research log gives the figures):

- likelihood: ``sigmoid(SLOPE * s + OFFSET)``, a Platt fit to "judged grade 2 or
  more" over DL19's judged passages;
- choice: ``softmax(SHARPNESS * s)`` over the options, the sharpness that gives
  the relevant options the most probability;
- score: a binomial over the ordered levels whose mean is the likelihood of the
  question's subject, since level labels ("meets half of the criterion") carry
  no content a bi-encoder can match against the state.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ...decisions.answers import Answer, ChoiceAnswer, LikelihoodAnswer, ScoreAnswer
from ...decisions.questions import ChoiceQuestion, LikelihoodQuestion, Question, ScoreQuestion
from ._assets import find_assets
from ._cache import VectorCache, text_key
from ._encoders import DenseEncoder, SparseEncoder
from ._text import render_state, split_frame

__all__ = ["VARIANTS", "LocalModel", "Variant"]

#: Both models were trained on inputs of up to 256 tokens; longer texts are cut there.
MAX_TOKENS = 256
#: Encoder outputs kept in memory (MiniLM vectors, SPLADE token states, query expansions).
CACHE_BYTES = 64 * 1024 * 1024


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
    """Encoders, tokenizer and cache, loaded once per process and shared by every variant."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loaded = False
        self.cache = VectorCache(CACHE_BYTES)

    def load(self) -> None:
        with self._lock:
            if self._loaded:
                return
            from tokenizers import Tokenizer

            assets = find_assets()
            tokenizer = Tokenizer.from_file(str(assets.tokenizer_json))
            tokenizer.no_padding()  # the file pads to a fixed length, which costs time and quality
            tokenizer.enable_truncation(MAX_TOKENS)
            workers = max(1, min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, 8))
            pool = ThreadPoolExecutor(workers, thread_name_prefix="decirank-local")
            self.tokenizer = tokenizer
            self.dense = DenseEncoder(assets, pool, MAX_TOKENS)
            self.sparse = SparseEncoder(assets, pool, MAX_TOKENS)
            self._loaded = True

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


def _binomial(levels: int, p: float) -> tuple[float, ...]:
    """Ordered levels as a binomial whose mean is ``p`` of the way up."""
    n = levels - 1
    return tuple(math.comb(n, k) * p**k * (1.0 - p) ** (n - k) for k in range(levels))


class LocalModel:
    def __init__(self, variant: Variant):
        self.variant = variant

    @staticmethod
    def load() -> None:
        _runtime.load()

    def _plan(self, state_text: str, question: Question) -> _Plan:
        if isinstance(question, ChoiceQuestion):
            # The instructions ask something of the options; the state says what they are judged against.
            query = state_text or split_frame(question.instructions)[1]
            return _Plan(query, list(question.options.values()))
        return _Plan(state_text, [split_frame(question.instructions)[1]])

    def answer(self, state, questions: dict[str, Question], cancelled: threading.Event) -> tuple[dict[str, Answer], int, int]:
        """Answers by question id, tokens read, tokens served from the cache."""
        _runtime.load()
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
        # Likelihood and score questions all compare one subject with the state: one product for all.
        singles = [qid for qid, q in questions.items() if not isinstance(q, ChoiceQuestion)]
        if singles:
            for qid, similarity in zip(singles, similarities(state_text, [plans[qid].subjects[0] for qid in singles]), strict=True):
                answers[qid] = self._answer(questions[qid], np.array([similarity]))
        for qid, question in questions.items():
            if isinstance(question, ChoiceQuestion):
                answers[qid] = self._answer(question, similarities(plans[qid].query, plans[qid].subjects))
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
        return ScoreAnswer(_binomial(len(question.levels), likelihood))

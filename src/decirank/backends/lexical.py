"""``lexical``: answers decision questions with BM25, no model at all.

It is a baseline to measure models against, a fallback that cannot fail for
want of weights, and fast enough for speed tests of everything around it.

The texts of one call are its corpus: a choice's options, or the subjects of
a call's likelihood questions. So term weights, and with them likelihoods,
depend on what else the call carries; a model-backed backend does not have
this property.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

from .._jsonpath import to_text
from ..decisions.answers import ChoiceAnswer, DecisionResponse, LikelihoodAnswer, ScoreAnswer, Usage
from ..decisions.limits import ModelLimits
from ..decisions.questions import ChoiceQuestion, DecisionRequest, LikelihoodQuestion, ScoreQuestion
from .base import Backend

__all__ = ["LexicalBackend"]

_WORD = re.compile(r"\w+", re.UNICODE)
_STOPWORDS = frozenset(
    """a an and are as at be been but by can could did do does for from had has have how i if in into is it
    its me my no not of on or our she so than that the their them then there these they this those to
    was we were what when where which while who whom why will with would you your""".split()
)
K1 = 0.9
B = 0.4
# Likelihood = sigmoid(SLOPE * matched share + OFFSET); fitted once on TREC DL19, where
# a passage matching 40% of a query's best possible BM25 weight is relevant about half the time.
SLOPE = 7.0
OFFSET = -2.8
# A choice is a softmax over matched shares at this inverse temperature.
CHOICE_SHARPNESS = 12.0


def tokenize(text: str) -> list[str]:
    tokens = []
    for word in _WORD.findall(text.lower()):
        if word in _STOPWORDS:
            continue
        # A light plural strip, so "fleas" meets "flea"; stemming further buys little here.
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        tokens.append(word)
    return tokens


class _Corpus:
    """BM25 statistics over the texts of one call."""

    def __init__(self, documents: Sequence[list[str]]):
        self.documents = [Counter(doc) for doc in documents]
        self.lengths = [len(doc) for doc in documents]
        self.average_length = (sum(self.lengths) / len(self.lengths)) or 1.0
        document_frequency: Counter[str] = Counter()
        for counts in self.documents:
            document_frequency.update(counts.keys())
        size = len(documents)
        self.idf = {
            term: math.log(1.0 + (size - df + 0.5) / (df + 0.5)) for term, df in document_frequency.items()
        }
        self.unseen_idf = math.log(1.0 + (size + 0.5) / 0.5)

    def matched_share(self, query: list[str], index: int) -> float:
        """BM25 of document ``index`` over the best score any document could reach: in [0, 1)."""
        terms = set(query)
        if not terms:
            return 0.0
        counts, length = self.documents[index], self.lengths[index]
        norm = K1 * (1.0 - B + B * length / self.average_length)
        score = 0.0
        best = 0.0
        for term in terms:
            idf = self.idf.get(term, self.unseen_idf)
            best += idf * (K1 + 1.0)
            tf = counts.get(term, 0)
            if tf:
                score += idf * tf * (K1 + 1.0) / (tf + norm)
        return score / best if best else 0.0


def _likelihood(share: float) -> float:
    return 1.0 / (1.0 + math.exp(-(SLOPE * share + OFFSET)))


def _binomial(levels: int, p: float) -> tuple[float, ...]:
    """Ordered levels read as a binomial whose mean level is ``p`` of the way up."""
    n = levels - 1
    return tuple(math.comb(n, k) * p**k * (1.0 - p) ** (n - k) for k in range(levels))


def _question_text(question: LikelihoodQuestion) -> str:
    return " ".join(part for part in (question.instructions, question.true) if part)


class LexicalBackend(Backend):
    provider = "lexical"

    def __init__(self, model: str = "bm25") -> None:
        super().__init__(model)

    @property
    def limits(self) -> ModelLimits:
        # Large calls give BM25 more documents to learn term weights from.
        return ModelLimits(max_options=255, max_questions=1000, max_levels=10)

    async def decide(self, request: DecisionRequest) -> DecisionResponse:
        return self.decide_now(request)

    def decide_now(self, request: DecisionRequest) -> DecisionResponse:
        state_tokens = tokenize(to_text(request.state))
        answers: dict = {}
        token_count = len(state_tokens)

        likelihood_ids = [qid for qid, q in request.questions.items() if isinstance(q, LikelihoodQuestion)]
        if likelihood_ids:
            subjects = [tokenize(_question_text(request.questions[qid])) for qid in likelihood_ids]
            token_count += sum(map(len, subjects))
            corpus = _Corpus(subjects)
            for position, qid in enumerate(likelihood_ids):
                answers[qid] = LikelihoodAnswer(_likelihood(corpus.matched_share(state_tokens, position)))

        for qid, question in request.questions.items():
            if isinstance(question, ChoiceQuestion):
                keys = list(question.options)
                options = [tokenize(question.options[key]) for key in keys]
                query = state_tokens + tokenize(question.instructions)
                token_count += sum(map(len, options)) + len(query) - len(state_tokens)
                corpus = _Corpus(options)
                logits = [CHOICE_SHARPNESS * corpus.matched_share(query, i) for i in range(len(keys))]
                top = max(logits)
                weights = [math.exp(logit - top) for logit in logits]
                total = sum(weights)
                answers[qid] = ChoiceAnswer({key: w / total for key, w in zip(keys, weights, strict=True)})
            elif isinstance(question, ScoreQuestion):
                query = tokenize(question.instructions)
                token_count += len(query)
                share = _Corpus([state_tokens]).matched_share(query, 0)
                answers[qid] = ScoreAnswer(_binomial(len(question.levels), _likelihood(share)))

        return DecisionResponse(
            model=self.name, answers=answers, usage=Usage(input_tokens=token_count, cost=0.0, calls=1)
        )

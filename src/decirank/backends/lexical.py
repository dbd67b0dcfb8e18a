"""``lexical``: answers decision questions with BM25, no model at all.

It is a baseline to measure models against, a fallback that cannot fail for
want of weights, and fast enough for speed tests of everything around it.

The texts of one call are its corpus: a choice's options, or the subjects of
a call's likelihood questions. So term weights, and with them likelihoods,
depend on what else the call carries; a model-backed backend does not have
this property.

A question's labelled examples are ignored: BM25 has nothing to learn them
with, so a question answers the same with or without them.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import anyio
import anyio.lowlevel

from ..types.answers import Answer, ChoiceAnswer, DecisionResponse, LikelihoodAnswer, ScoreAnswer, Usage
from ..types.limits import ModelLimits
from ..types.questions import ChoiceQuestion, DecisionRequest, LikelihoodQuestion, ScoreQuestion
from .base import Backend, binomial_levels, render_state

__all__ = ["LexicalBackend"]

_WORD = re.compile(r"\w+", re.UNICODE)
_STOPWORDS = frozenset(
    """a an and are as at be been but by can could did do does for from had has have how i if in into is it
    its me my no not of on or our she so than that the their them then there these they this those to
    was we were what when where which while who whom why will with would you your""".split()
)
K1 = 0.9
B = 0.4
# A call's texts are often already retrieved for the same query, so every one of them
# holds the query's words and in-call document frequencies would weigh those words at
# nothing. The call is read as a sample of a larger collection: this many more
# documents that lack every term (rerank on TREC DL19: nDCG@10 0.383 without, 0.451 with).
PSEUDO_DOCUMENTS = 1000
# Likelihood = sigmoid(SLOPE * matched share + OFFSET): a logistic fit to TREC DL19's
# judged passages (grade 2+ relevant). It is weak by nature: inside BM25's
# own top 100 word overlap barely separates relevant passages (the two cross-validation
# folds disagree on the slope), so these likelihoods stay near the base rate.
SLOPE = 2.1
OFFSET = -1.4
INSTRUCTION_WEIGHT = 0.25
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
        size = len(documents) + PSEUDO_DOCUMENTS
        self.idf = {term: math.log(1.0 + (size - df + 0.5) / (df + 0.5)) for term, df in document_frequency.items()}
        self.unseen_idf = math.log(1.0 + (size + 0.5) / 0.5)

    def matched_share(self, query: dict[str, float], index: int) -> float:
        """BM25 of document ``index`` over the best score any document could reach: in [0, 1).

        ``query`` maps each term to its weight.
        """
        if not query:
            return 0.0
        counts, length = self.documents[index], self.lengths[index]
        norm = K1 * (1.0 - B + B * length / self.average_length)
        score = 0.0
        best = 0.0
        for term, weight in query.items():
            idf = weight * self.idf.get(term, self.unseen_idf)
            best += idf * (K1 + 1.0)
            tf = counts.get(term, 0)
            if tf:
                score += idf * tf * (K1 + 1.0) / (tf + norm)
        return score / best if best else 0.0


def query_terms(state_tokens: Sequence[str], instruction_tokens: Sequence[str] = ()) -> dict[str, float]:
    """The state's words at full weight, a question's framing words at a quarter.

    Instructions such as "Which passage best answers the question?" are mostly
    framing; at full weight they pull in passages that say "best" or "answer"
    (rank on TREC DL19: nDCG@10 0.338 at full weight, 0.427 at a quarter, 0.448 without).
    They keep a little weight because a question without a state has nothing else to match.
    """
    terms = dict.fromkeys(instruction_tokens, INSTRUCTION_WEIGHT)
    terms.update(dict.fromkeys(state_tokens, 1.0))
    return terms


def _likelihood(share: float) -> float:
    return 1.0 / (1.0 + math.exp(-(SLOPE * share + OFFSET)))


def _question_text(question: LikelihoodQuestion) -> str:
    return " ".join(part for part in (question.instructions, question.true) if part)


async def _checkpoint() -> None:
    """Where the time budget (and a cancel) may end a call that holds the event loop.

    A deadline that has already passed is waited into, so the budget's cancel scope ends the call
    here at once, rather than after an answer the budget no longer allows.
    """
    if anyio.current_time() >= anyio.current_effective_deadline():
        await anyio.sleep_forever()
    await anyio.lowlevel.checkpoint()


class LexicalBackend(Backend):
    provider = "lexical"

    def __init__(self, model: str = "bm25") -> None:
        super().__init__(model)

    @property
    def limits(self) -> ModelLimits:
        # Large calls give BM25 more documents to learn term weights from.
        return ModelLimits(max_options=255, max_questions=1000, max_levels=10)

    async def decide(self, request: DecisionRequest) -> DecisionResponse:
        # No I/O, and a full call (1000 passages) is some 40 ms of arithmetic: answered on the event loop,
        # which checks the call's time budget (and a cancel) before, between questions and after.
        await _checkpoint()
        state_tokens = tokenize(render_state(request.state))
        answers: dict[str, Answer] = {}
        token_count = len(state_tokens)

        likelihood_ids = [qid for qid, q in request.questions.items() if isinstance(q, LikelihoodQuestion)]
        if likelihood_ids:
            subjects = [tokenize(_question_text(request.questions[qid])) for qid in likelihood_ids]
            token_count += sum(map(len, subjects))
            corpus = _Corpus(subjects)
            await _checkpoint()
            query = query_terms(state_tokens)
            for position, qid in enumerate(likelihood_ids):
                answers[qid] = LikelihoodAnswer(_likelihood(corpus.matched_share(query, position)))

        for qid, question in request.questions.items():
            if not isinstance(question, LikelihoodQuestion):
                await _checkpoint()
            if isinstance(question, ChoiceQuestion):
                keys = list(question.options)
                options = [tokenize(question.options[key]) for key in keys]
                instruction_tokens = tokenize(question.instructions)
                query = query_terms(state_tokens, instruction_tokens)
                token_count += sum(map(len, options)) + len(instruction_tokens)
                corpus = _Corpus(options)
                logits = [CHOICE_SHARPNESS * corpus.matched_share(query, i) for i in range(len(keys))]
                top = max(logits)
                weights = [math.exp(logit - top) for logit in logits]
                total = sum(weights)
                answers[qid] = ChoiceAnswer({key: w / total for key, w in zip(keys, weights, strict=True)})
            elif isinstance(question, ScoreQuestion):
                instruction_tokens = tokenize(question.instructions)
                token_count += len(instruction_tokens)
                share = _Corpus([state_tokens]).matched_share(query_terms(instruction_tokens), 0)
                answers[qid] = ScoreAnswer(binomial_levels(len(question.levels), _likelihood(share)))

        await _checkpoint()
        return DecisionResponse(
            model=self.name, answers=answers, usage=Usage(input_tokens=token_count, cost=0.0, calls=1)
        )

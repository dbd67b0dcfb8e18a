"""The System One wire format, both ways, and the backends that speak it.

One request asks every question about one state::

    POST {base}/v1/systemone
    {"model": "jev-latest", "state": ..., "questions": {id: question}}
    -> {"model": ..., "answers": {id: answer}, "usage": {"input_tokens", "output_tokens", "cost"?}}

=============  ==========================================================  ==========================================
our question   wire question                                               wire answer
=============  ==========================================================  ==========================================
likelihood     ``{"type": "noul", "instructions", "criteria"?: {"true", "false"}}``   ``{"type": "noul", "noul": p}``
choice         ``{"type": "choice", "instructions", "criteria": {key: text}}``        ``{"choice", "confidence", "probabilities": {key: p}}``
score          ``{"type": "score", "instructions", "criteria": [level, ...]}``        ``{"score", "confidence", "legend", "probabilities": {"0": p, ...}}``
=============  ==========================================================  ==========================================

Labelled examples (:class:`~decirank.types.questions.Example`) have no
field in the format, and a hosted decision model reads instructions, so a
likelihood or choice question's examples are sent appended to its
instructions in one deterministic block (:mod:`decirank.backends._examples`)::

    <instructions>

    Labelled examples:
    - <state as compact JSON> -> <answer as JSON: true, false or "option key">

Decoding reads them back: a wire question's own ``examples`` list
(``[{"state", "answer"}]``, which ``decirank serve`` accepts), or else a
well-formed block at the end of its instructions, which is lifted out of the
instructions into the question's examples.

The codec functions below have no I/O: the backends here encode questions
and decode answers, and ``decirank serve`` decodes questions and encodes
answers with the same functions, so the format is written once.

Providers, each a preset of the one format (see ``decirank models``):

- ``systemone:<model>``: any System One server at ``base_url`` (default
  ``http://127.0.0.1:8000``, where ``decirank serve`` and ``sparrow-decider
  serve`` listen by default); key ``SYSTEMONE_API_KEY`` if the server wants one.
- ``typesafe:<model>``: TypeSafe, ``https://api.typesafe.ai``, key ``TYPESAFE_API_KEY``.
- ``openrouter:<model>``: OpenRouter's decisions endpoint, key ``OPENROUTER_API_KEY``;
  it reports each call's cost in ``usage.cost``.
- ``ollama:<model>`` (``http://127.0.0.1:11434``) and ``vllm:<model>``
  (``http://127.0.0.1:8000``, key ``VLLM_API_KEY`` if started with one).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InvalidAnswerError, InvalidInputError
from ..types.answers import Answer, ChoiceAnswer, DecisionResponse, LikelihoodAnswer, ScoreAnswer, Usage
from ..types.limits import ModelLimits
from ..types.questions import ChoiceQuestion, DecisionRequest, LikelihoodQuestion, Question, ScoreQuestion
from ._examples import decode_with_examples, with_examples
from ._http import HttpBackend, Price, priced_usage, request_id_suffix, wire_probability, wire_token_count

__all__ = [
    "OllamaBackend",
    "OpenRouterBackend",
    "SystemOneBackend",
    "TypeSafeBackend",
    "VllmBackend",
    "decode_answer",
    "decode_question",
    "encode_answer",
    "encode_question",
]

WIRE_TYPES = {"likelihood": "noul", "choice": "choice", "score": "score"}


# --- the codec ---------------------------------------------------------------------------


def encode_question(question: Question) -> dict[str, Any]:
    if isinstance(question, LikelihoodQuestion):
        instructions = with_examples(question.instructions, question.examples)
        wire: dict[str, Any] = {"type": "noul", "instructions": instructions}
        criteria = {name: text for name, text in (("true", question.true), ("false", question.false)) if text}
        if criteria:
            wire["criteria"] = criteria
        return wire
    if isinstance(question, ChoiceQuestion):
        instructions = with_examples(question.instructions, question.examples)
        return {"type": "choice", "instructions": instructions, "criteria": dict(question.options)}
    return {"type": "score", "instructions": question.instructions, "criteria": list(question.levels)}


def decode_question(wire: Mapping[str, Any], field_name: str) -> Question:
    """A wire question as ours; :class:`InvalidInputError` names ``field_name`` and what is wrong.

    A noul or choice question's examples are its ``examples`` list if it has one, else a
    well-formed examples block ending its instructions (see the module's docstring).
    """
    kind = wire.get("type")
    criteria = wire.get("criteria")
    instructions, examples = wire.get("instructions"), wire.get("examples")

    def build(build_question: Any) -> Question:
        return decode_with_examples(instructions, examples, build_question)

    try:
        if kind == "noul":
            if criteria is not None and not isinstance(criteria, Mapping):
                raise InvalidInputError("criteria", 'an object {"true": text, "false": text}', got=criteria)
            true, false = (criteria or {}).get("true"), (criteria or {}).get("false")
            return build(lambda text, given: LikelihoodQuestion(text, true=true, false=false, examples=given))
        if kind == "choice":
            if not isinstance(criteria, Mapping):
                raise InvalidInputError("criteria", "an object {key: description}", got=criteria)
            options = dict(criteria)
            return build(lambda text, given: ChoiceQuestion(text, options, examples=given))
        if kind == "score":
            if not isinstance(criteria, list):
                raise InvalidInputError("criteria", "a list of levels, lowest first", got=criteria)
            return ScoreQuestion(wire.get("instructions"), tuple(criteria))
    except InvalidInputError as error:
        # Our question classes name their own fields; the caller knows them by the wire's names.
        wire_field = error.field.removeprefix("question.").replace("options", "criteria").replace("levels", "criteria")
        raise InvalidInputError(f"{field_name}.{wire_field}", error.expected, detail=error.detail) from None
    raise InvalidInputError(f"{field_name}.type", "one of noul, choice, score", got=kind)


def encode_answer(answer: Answer, question: Question) -> dict[str, Any]:
    if isinstance(answer, LikelihoodAnswer):
        return {"type": "noul", "noul": answer.probability}
    if isinstance(answer, ChoiceAnswer):
        return {
            "type": "choice",
            "choice": answer.choice,
            "confidence": answer.confidence,
            "probabilities": dict(answer.probabilities),
        }
    assert isinstance(question, ScoreQuestion)
    return {
        "type": "score",
        "score": answer.score,
        "confidence": answer.confidence,
        "legend": {str(level): text for level, text in enumerate(question.levels)},
        "probabilities": {str(level): p for level, p in enumerate(answer.probabilities)},
    }


def decode_answer(wire: Any, question: Question, where: str) -> Answer:
    """A wire answer as ours."""
    expected = WIRE_TYPES[question.kind]
    if not isinstance(wire, Mapping):
        raise InvalidAnswerError(f"{where}: expected an answer object, got {wire!r}")
    if wire.get("type", expected) != expected:
        raise InvalidAnswerError(f"{where}: a {wire.get('type')!r} answer to a {expected} question")
    if isinstance(question, LikelihoodQuestion):
        return LikelihoodAnswer(wire_probability(wire.get("noul"), where))
    probabilities = wire.get("probabilities")
    if isinstance(question, ChoiceQuestion):
        if not isinstance(probabilities, Mapping):
            raise InvalidAnswerError(f"{where}: a choice answer needs probabilities {{key: p}}")
        return ChoiceAnswer({str(key): wire_probability(p, where) for key, p in probabilities.items()})
    return ScoreAnswer(_score_distribution(probabilities, question, where))


def _score_distribution(probabilities: Any, question: ScoreQuestion, where: str) -> tuple[float, ...]:
    """Levels keyed by index ("0", "1", ...) or by level text, or listed lowest first."""
    if isinstance(probabilities, list):
        return tuple(wire_probability(p, where) for p in probabilities)
    if not isinstance(probabilities, Mapping):
        raise InvalidAnswerError(f"{where}: a score answer needs probabilities per level")
    by_level: dict[int, float] = {}
    for key, p in probabilities.items():
        if str(key).isdigit():
            level = int(key)
        elif key in question.levels:
            level = question.levels.index(key)
        else:
            raise InvalidAnswerError(f"{where}: {key!r} is not a level of the question")
        by_level[level] = wire_probability(p, where)
    if sorted(by_level) != list(range(len(by_level))):
        raise InvalidAnswerError(f"{where}: levels {sorted(by_level)} are not 0 to {len(by_level) - 1}")
    return tuple(by_level[level] for level in range(len(by_level)))


def encode_usage(usage: Usage) -> dict[str, Any]:
    wire: dict[str, Any] = {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}
    if usage.cost is not None:
        wire["cost"] = usage.cost
    return wire


def decode_usage(wire: Any, price: Price | None) -> Usage:
    """The server's cost when it reports one (``usage.cost``), else the price table's, else unknown (None)."""
    wire = wire if isinstance(wire, Mapping) else {}
    return priced_usage(
        wire_token_count(wire.get("input_tokens")),
        wire_token_count(wire.get("output_tokens")),
        price,
        reported_cost=wire.get("cost"),
    )


# --- the backends ------------------------------------------------------------------------


class SystemOneBackend(HttpBackend):
    """Any server of the System One format at ``base_url``."""

    provider = "systemone"
    default_base_url = "http://127.0.0.1:8000"
    path = "/v1/systemone"
    key_variable = "SYSTEMONE_API_KEY"

    def request_body(self, request: DecisionRequest) -> dict[str, Any]:
        return {
            "model": self.model,
            "state": request.state,
            "questions": {qid: encode_question(question) for qid, question in request.questions.items()},
        }

    def read_reply(self, request: DecisionRequest, body: Any, request_id: str | None) -> DecisionResponse:
        suffix = request_id_suffix(request_id)
        answers = body.get("answers") if isinstance(body, Mapping) else None
        if not isinstance(answers, Mapping):
            raise InvalidAnswerError(f"{self.name}: the reply has no answers object{suffix}")
        decoded = {
            qid: decode_answer(answers[qid], question, f"{self.name}: answer {qid!r}{suffix}")
            for qid, question in request.questions.items()
            if qid in answers
        }
        return DecisionResponse(self.name, decoded, decode_usage(body.get("usage"), self.price), request_id)


class TypeSafeBackend(SystemOneBackend):
    provider = "typesafe"
    default_base_url = "https://api.typesafe.ai"
    key_variable = "TYPESAFE_API_KEY"
    key_required = True
    # TypeSafe refuses a 256th option and an 11th level: these limits are the host's own.
    declared_limits = ModelLimits(max_options=255, max_levels=10)


class OpenRouterBackend(SystemOneBackend):
    provider = "openrouter"
    # The base URL is the endpoint itself; the body is System One's, and usage.cost is reported.
    default_base_url = "https://openrouter.ai/api/alpha/decisions"
    path = ""
    key_variable = "OPENROUTER_API_KEY"
    key_required = True


class OllamaBackend(SystemOneBackend):
    provider = "ollama"
    default_base_url = "http://127.0.0.1:11434"
    key_variable = None
    self_hosted = True


class VllmBackend(SystemOneBackend):
    provider = "vllm"
    default_base_url = "http://127.0.0.1:8000"
    key_variable = "VLLM_API_KEY"
    self_hosted = True

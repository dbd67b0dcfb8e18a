"""OpenAI's Decisions shape, both ways, and the ``openai`` backend that speaks it.

::

    POST {base}/v1/decisions
    {"model", "input": text, "questions": [question, ...]}
    -> {"model", "answers": [answer, ...], "usage": {"input_tokens", "input_tokens_details": {"cached_tokens"}, ...}}

=============  =====================================================================  ============================================
our question   wire question                                                          wire answer
=============  =====================================================================  ============================================
likelihood     ``{"type": "predicate", "name", "instructions"}``                      ``{"type": "predicate", "name", "probability"}``
choice         ``{"type": "choice", "name", "instructions", "choices": [{"value", "description"}]}``  ``{"choice", "probabilities": [{"value", "probability"}], "confidence"}``
score          ``{"type": "score", "name", "instructions", "levels": [{"label", "description"}]}``     ``{"score", "probabilities": [{"value", "label", "probability"}], "confidence"}``
=============  =====================================================================  ============================================

Questions are a list and answers come back in the same order; our question
id travels as ``name``. Any answer may be ``{"type": "refusal"}``: that
question is refused, a :class:`~decirank.errors.RefusalError`. Input is text:
a string state is sent as it is, any other state as canonical JSON. A
predicate has no outcome descriptions, so a likelihood question's ``true``
and ``false`` texts are appended to its instructions.

Labelled examples (:class:`~decirank.types.questions.Example`) have no field
in the shape either, and a hosted decision model reads instructions, so a
predicate's or choice's examples are appended to its instructions (after any
outcome texts) in one deterministic block (:mod:`decirank.backends._examples`)::

    <instructions>

    Labelled examples:
    - <state as compact JSON> -> <answer as JSON: true, false or "option value">

Decoding lifts a well-formed block at the end of a question's instructions
back out into the question's examples.

As in :mod:`decirank.backends.systemone`, the codec is I/O-free and
``decirank serve`` uses it for its own ``/v1/decisions``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._jsonpath import to_text
from ..errors import InvalidAnswerError, InvalidInputError, RefusalError
from ..types.answers import Answer, ChoiceAnswer, DecisionResponse, LikelihoodAnswer, ScoreAnswer, Usage
from ..types.limits import ModelLimits
from ..types.questions import ChoiceQuestion, DecisionRequest, LikelihoodQuestion, Question, ScoreQuestion
from ._examples import decode_with_examples, with_examples
from ._http import HttpBackend, Price, priced_usage, request_id_suffix, wire_probability, wire_token_count

__all__ = [
    "OpenAIDecisionsBackend",
    "decode_answer",
    "decode_input",
    "decode_question",
    "decode_usage",
    "encode_answer",
    "encode_question",
    "encode_usage",
]

WIRE_TYPES = {"likelihood": "predicate", "choice": "choice", "score": "score"}


def encode_question(question: Question, name: str) -> dict[str, Any]:
    if isinstance(question, LikelihoodQuestion):
        outcomes = [f"{label}: {text}" for label, text in (("True", question.true), ("False", question.false)) if text]
        instructions = with_examples("\n".join([question.instructions, *outcomes]), question.examples)
        return {"type": "predicate", "name": name, "instructions": instructions}
    if isinstance(question, ChoiceQuestion):
        choices = [
            {"value": key, "description": description} if description else {"value": key}
            for key, description in question.options.items()
        ]
        instructions = with_examples(question.instructions, question.examples)
        return {"type": "choice", "name": name, "instructions": instructions, "choices": choices}
    levels = [{"label": level} for level in question.levels]
    return {"type": "score", "name": name, "instructions": question.instructions, "levels": levels}


def decode_question(wire: Mapping[str, Any], field_name: str) -> Question:
    """A wire question as ours; a choice without a description shows its value.

    A well-formed examples block ending a predicate's or choice's instructions becomes its examples.
    """
    kind = wire.get("type")
    instructions = wire.get("instructions")

    def build(build_question: Any) -> Question:
        return decode_with_examples(instructions, None, build_question)

    try:
        if kind == "predicate":
            return build(lambda text, given: LikelihoodQuestion(text, examples=given))
        if kind == "choice":
            choices = wire.get("choices") or []
            options = {c["value"]: c.get("description") or c["value"] for c in choices}
            if len(options) != len(choices):
                raise InvalidInputError("choices", "distinct values")
            return build(lambda text, given: ChoiceQuestion(text, options, examples=given))
        if kind == "score":
            levels = wire.get("levels") or []
            return ScoreQuestion(
                instructions,
                tuple(f"{lv['label']}: {lv['description']}" if lv.get("description") else lv["label"] for lv in levels),
            )
    except InvalidInputError as error:
        wire_field = error.field.removeprefix("question.").replace("options", "choices")
        raise InvalidInputError(f"{field_name}.{wire_field}", error.expected, detail=error.detail) from None
    raise InvalidInputError(f"{field_name}.type", "one of predicate, choice, score", got=kind)


def decode_input(wire: Any, field_name: str = "input") -> str:
    """The state a request's ``input`` gives: its text, messages' texts joined; images are refused."""
    if isinstance(wire, str):
        return wire
    texts = []
    for number, message in enumerate(wire):
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
            continue
        for part_number, part in enumerate(content):
            if part.get("type") != "input_text":
                where = f"{field_name}.{number}.content.{part_number}"
                raise InvalidInputError(where, "text (decision models here read no images)", got=part.get("type"))
            texts.append(part["text"])
    return "\n\n".join(texts)


def encode_answer(answer: Answer, question: Question, name: str | None) -> dict[str, Any]:
    if isinstance(answer, LikelihoodAnswer):
        return {"type": "predicate", "name": name, "probability": answer.probability}
    if isinstance(answer, ChoiceAnswer):
        return {
            "type": "choice",
            "name": name,
            "choice": answer.choice,
            "probabilities": [{"value": key, "probability": p} for key, p in answer.probabilities.items()],
            "confidence": answer.confidence,
        }
    assert isinstance(question, ScoreQuestion)
    return {
        "type": "score",
        "name": name,
        "score": answer.score,
        "probabilities": [
            {"value": level, "label": label, "probability": p}
            for level, (label, p) in enumerate(zip(question.levels, answer.probabilities, strict=True))
        ],
        "confidence": answer.confidence,
    }


def _entries(value: Any, where: str) -> list[Mapping[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(entry, Mapping) for entry in value):
        raise InvalidAnswerError(f"{where}: probabilities must be a list of objects")
    return value


def decode_answer(wire: Mapping[str, Any], question: Question, where: str) -> Answer:
    """A wire answer as ours (refusals are handled by the caller, which knows the request)."""
    expected = WIRE_TYPES[question.kind]
    if wire.get("type") != expected:
        raise InvalidAnswerError(f"{where}: a {wire.get('type')!r} answer to a {expected} question")
    if isinstance(question, LikelihoodQuestion):
        return LikelihoodAnswer(wire_probability(wire.get("probability"), where))
    entries = _entries(wire.get("probabilities"), where)
    if isinstance(question, ChoiceQuestion):
        return ChoiceAnswer({str(e.get("value")): wire_probability(e.get("probability"), where) for e in entries})
    by_level = {e.get("value"): wire_probability(e.get("probability"), where) for e in entries}
    if set(by_level) != set(range(len(by_level))):
        raise InvalidAnswerError(f"{where}: score levels must be numbered from 0, got {sorted(map(str, by_level))}")
    return ScoreAnswer(tuple(by_level[level] for level in range(len(by_level))))


def encode_usage(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens, "cache_write_tokens": 0},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }


def decode_usage(wire: Any, price: Price | None) -> Usage:
    """Tokens as reported, cached ones included; the API reports no cost, so the price table's (or unknown)."""
    wire = wire if isinstance(wire, Mapping) else {}
    details = wire.get("input_tokens_details")
    return priced_usage(
        wire_token_count(wire.get("input_tokens")),
        wire_token_count(wire.get("output_tokens")),
        price,
        cached_tokens=wire_token_count(details.get("cached_tokens")) if isinstance(details, Mapping) else 0,
    )


class OpenAIDecisionsBackend(HttpBackend):
    """OpenAI's Decisions API, or any server of its shape at ``base_url``."""

    provider = "openai"
    default_base_url = "https://api.openai.com"
    path = "/v1/decisions"
    key_variable = "OPENAI_API_KEY"
    key_required = True
    # The API's own choice and level limits; it declares no question or context limit to rely on.
    declared_limits = ModelLimits(max_options=255, max_levels=10)

    def request_body(self, request: DecisionRequest) -> dict[str, Any]:
        return {
            "model": self.model,
            "input": to_text(request.state),
            "questions": [encode_question(question, qid) for qid, question in request.questions.items()],
        }

    def read_reply(self, request: DecisionRequest, body: Any, request_id: str | None) -> DecisionResponse:
        suffix = request_id_suffix(request_id)
        answers = body.get("answers") if isinstance(body, Mapping) else None
        if not isinstance(answers, list):
            raise InvalidAnswerError(f"{self.name}: the reply has no answers list{suffix}")
        ids: Sequence[str] = list(request.questions)
        decoded: dict[str, Answer] = {}
        for position, wire in enumerate(answers):
            if not isinstance(wire, Mapping):
                raise InvalidAnswerError(f"{self.name}: answer {position} is not an object{suffix}")
            # Answers come in question order; a name, when given, says which question it answers.
            qid = wire.get("name") or (ids[position] if position < len(ids) else None)
            if qid not in request.questions:
                raise InvalidAnswerError(f"{self.name}: answer {position} is for no question asked ({qid!r}){suffix}")
            if wire.get("type") == "refusal":
                raise RefusalError(
                    f"the model refused to answer question {qid!r}",
                    question_id=qid,
                    model=self.name,
                    request_id=request_id,
                    body=body,
                )
            decoded[qid] = decode_answer(wire, request.questions[qid], f"{self.name}: answer {qid!r}{suffix}")
        return DecisionResponse(self.name, decoded, decode_usage(body.get("usage"), self.price), request_id)

"""The decision head: small trained models that read a yes/no question and a text together.

MiniLM gives the text, the question and what the question asks about (its
topic, or its true and false sides) one vector each. A similarity of two such
vectors ranks texts well but means different things in different domains:
0.3 to "sports" is a sure yes for a news story and a sure no for a tweet. The
head turns the vectors into a probability that carries over:

- **features** (:func:`yes_no_features`): eleven scalars (similarity to the
  topic and to the question; the topic against generic background topics as a
  z-score, log-probability and rank; the true-minus-false contrast; lengths),
  then the text, topic and contrast vectors;
- **a head per kind of question** (:func:`question_kind`): a topic question
  and a statement are answered by a logistic regression on the scalars; a
  question with two sides to contrast adds a low-rank bilinear term whose
  learned axes read attributes such as sentiment (:class:`DecisionHead`); a
  question about what the text is like ("Is this tweet ironic?") borrows the
  topic weights under a temperature of its own, measured on such questions.

They are trained by ``training/train.py`` on questions built from the
development sets (``training/corpus.py``), judged leave-one-domain-out; the
weights ship as ``assets/decision_head.npz`` with their hash in
:data:`~._assets.SHA256`.

A question is read before it is answered (:func:`read_yes_no`): a negated
question ("Is this not about pets?") is answered as its plain form and the
probability turned round, since no sentence vector tells "not X" from "X".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ._text import _AUXILIARY, asks_about_the_text, polar_contrast, question_topic

__all__ = [
    "KINDS",
    "DecisionHead",
    "YesNoReading",
    "asks_yes_or_no",
    "option_reading",
    "question_kind",
    "read_yes_no",
    "strip_negation",
    "yes_no_features",
]

# "Is this not about pets?", "Does the customer not want a refund?": the auxiliary, up to five
# words of subject, then "not". Further on, "not" belongs to a clause ("a phone that does not work").
_NOT_AFTER_SUBJECT = re.compile(rf"^(?P<head>\s*{_AUXILIARY}(?:\s+(?!not\b)[\w'-]+){{0,5}}?)\s+not\b", re.IGNORECASE)
# Auxiliaries negated by a plain "n't", and the negated words that are not ("can't" -> "can").
_CONTRACTS = r"is|are|was|were|does|do|did|could|would|should|has|have|had"
_IRREGULAR = {"can't": "can", "cannot": "can", "won't": "will", "can’t": "can", "won’t": "will"}
_IRREGULAR_WORD = "|".join(map(re.escape, _IRREGULAR))
_CONTRACTED = re.compile(rf"^(?P<space>\s*)(?P<aux>{_CONTRACTS})n[’']t\b", re.IGNORECASE)
_IRREGULAR_START = re.compile(rf"^(?P<space>\s*)(?P<word>{_IRREGULAR_WORD})\b", re.IGNORECASE)
_FALSE_THAT = re.compile(
    r"^\s*(?:is\s+it|it\s+is)\s+(?:false|not\s+true|untrue)\s+that\s+(?P<rest>\S.*)$", re.IGNORECASE | re.DOTALL
)

# "Is it true (that) the writer isn't asking for a refund?": the negation is in the clause, and the plain form is
# the clause asked directly, "Is the writer asking for a refund?". The clause's subject is a pronoun or starts with
# a determiner (and holds no relative clause), so a "not" further on ("Is it true that kangaroo means I don't
# know?", "... the plan that did not pass was revived?") is left alone.
_TRUE_THAT_NOT = re.compile(
    r"^(?P<space>\s*)is\s+it\s+true,?\s+(?:that\s+)?"
    r"(?P<subject>(?:the|this|these|those|a|an|my|our|your|their)(?:\s+(?!(?:that|which|who)\b)[\w'-]+){1,4}?"
    r"|it|this|they|he|she|we|you|i)\s+"
    rf"(?:(?P<aux>{_CONTRACTS})(?:n[’']t|\s+not)|(?P<word>{_IRREGULAR_WORD}))"
    r"\s+(?P<rest>\S.*)$",
    re.IGNORECASE | re.DOTALL,
)


def strip_negation(question: str) -> tuple[str, bool]:
    """``(plain question, whether it was negated)``: "Isn't this about pets?" -> ("Is this about pets?", True)."""
    false_that = _FALSE_THAT.match(question)
    if false_that is not None:
        rest = false_that["rest"]
        return rest[:1].upper() + rest[1:], True
    true_that_not = _TRUE_THAT_NOT.match(question)
    if true_that_not is not None:
        aux = true_that_not["aux"] or _IRREGULAR[true_that_not["word"].lower()]
        subject = true_that_not["subject"]
        return f"{true_that_not['space']}{aux.capitalize()} {subject} {true_that_not['rest']}", True
    contracted = _CONTRACTED.match(question)
    if contracted is not None:
        return question[: contracted.start("aux")] + contracted["aux"] + question[contracted.end() :], True
    irregular = _IRREGULAR_START.match(question)
    if irregular is not None:
        word = _IRREGULAR[irregular["word"].lower()]
        word = word.capitalize() if irregular["word"][0].isupper() else word
        return irregular["space"] + word + question[irregular.end() :], True
    negated = _NOT_AFTER_SUBJECT.match(question)
    if negated is not None:
        return negated["head"] + question[negated.end() :], True
    return question, False


# What someone wants done: "Does the user want to …", "Is the customer asking the assistant to …", "Is this a
# request to …".
_ASKS_FOR_AN_ACTION = re.compile(
    r"\b(?:want(?:s|ed)?|wish(?:es)?|request(?:s|ing)?|ask(?:s|ed|ing)?(?:\s+(?!to\b)\w+){0,2})\s+to\b", re.IGNORECASE
)

_YES_NO_START = re.compile(rf"^\s*{_AUXILIARY}\b", re.IGNORECASE)


def asks_yes_or_no(question: str) -> bool:
    """Whether a question is answered yes or no ("Is this about pets?", "Isn't it late?") rather than by a
    degree ("How urgent is this ticket?")."""
    return _YES_NO_START.match(strip_negation(question)[0]) is not None


@dataclass(frozen=True)
class YesNoReading:
    """What a yes/no question compares a text with."""

    #: the question without its negation
    question: str
    #: what it asks about ("pets"), or its true description when it has only that
    topic: str
    #: (true side, false side) wordings: the descriptions, and the question against its polar opposite
    contrasts: tuple[tuple[str, str], ...]
    #: the asked question is the plain one's negation: its probability is 1 - the plain one's
    negated: bool


def read_yes_no(question: str, true: str | None = None, false: str | None = None) -> YesNoReading:
    """How a yes/no question about a text is answered; descriptions are those of the question as asked."""
    plain, negated = strip_negation(question)
    if negated:  # the caller's "true" describes a yes to the negated question, a no to the plain one
        true, false = false, true
    contrasts: list[tuple[str, str]] = []
    if true and false:
        contrasts.append((true, false))
    # In "Does the user want to say what music they like?" the polar word is part of what is wanted.
    polar = None if _ASKS_FOR_AN_ACTION.search(plain) else polar_contrast(plain)
    if polar is not None:
        contrasts.append(polar)
    topic = true if true and not false else question_topic(plain)
    return YesNoReading(plain, topic, tuple(contrasts), negated)


def option_reading(description: str) -> YesNoReading:
    """An option of a choice, read as the yes/no question whether a text is about it."""
    return read_yes_no(f"Is this about {description.strip()}?")


#: Background topics within this cosine of the asked topic are its near-synonyms and left out of the contrast.
SYNONYM_COSINE = 0.6
#: Softmax temperature of the topic against the background topics.
TOPIC_TEMPERATURE = 10.0
DIMENSIONS = 384


def yes_no_features(
    texts: np.ndarray,
    topic: np.ndarray,
    question: np.ndarray,
    contrasts: list[tuple[np.ndarray, np.ndarray]],
    background: np.ndarray,
    topic_words: int,
    text_tokens: np.ndarray,
) -> np.ndarray:
    """The head's input for each text (rows of ``texts``, unit MiniLM vectors) against one question."""
    texts = np.asarray(texts, dtype=np.float64)
    topic = np.asarray(topic, dtype=np.float64)
    background = np.asarray(background, dtype=np.float64)
    background = background[background @ topic <= SYNONYM_COSINE]
    to_topic = texts @ topic
    to_question = texts @ np.asarray(question, dtype=np.float64)
    to_background = texts @ background.T
    mean, spread = to_background.mean(axis=1), to_background.std(axis=1) + 1e-6
    scaled = TOPIC_TEMPERATURE * to_background
    log_p = TOPIC_TEMPERATURE * to_topic - np.logaddexp(
        TOPIC_TEMPERATURE * to_topic, np.logaddexp.reduce(scaled, axis=1)
    )
    if contrasts:
        sides = np.mean([np.asarray(t, np.float64) - np.asarray(f, np.float64) for t, f in contrasts], axis=0)
        contrast = texts @ sides
    else:
        sides = np.zeros(DIMENSIONS)
        contrast = np.zeros(len(texts))
    scalars = np.column_stack(
        [
            to_topic,
            to_question,
            (to_topic - mean) / spread,
            log_p,
            (to_background < to_topic[:, None]).mean(axis=1),
            to_background.max(axis=1),
            contrast,
            np.full(len(texts), float(bool(contrasts))),
            np.full(len(texts), np.log1p(topic_words)),
            np.log1p(np.asarray(text_tokens, dtype=np.float64)),
            np.full(len(texts), float((background @ topic).max())),
        ]
    )
    n = len(texts)
    return np.hstack([scalars, texts, np.broadcast_to(topic, (n, DIMENSIONS)), np.broadcast_to(sides, (n, DIMENSIONS))])


SCALARS = 11
#: The scalar that is the true-minus-false similarity.
CONTRAST_COLUMN = 6
#: Columns of :func:`yes_no_features`: the scalars, then the text, the topic and the contrast (true - false) vectors.
FEATURES = SCALARS + 3 * DIMENSIONS


def swap_sides(features: np.ndarray) -> np.ndarray:
    """The features of the same question with its true and false sides swapped."""
    swapped = np.array(features, dtype=np.float64)
    swapped[:, CONTRAST_COLUMN] *= -1
    swapped[:, SCALARS + 2 * DIMENSIONS :] *= -1
    return swapped


#: The kinds of yes/no question, each answered by its own head: what carries over from one domain to
#: the next differs between them (a topic's similarity against the background; an attribute's
#: learned axes; for a whole statement, almost nothing a bi-encoder can read).
CONTRAST, TOPIC, QUALITY, STATEMENT = "contrast", "topic", "quality", "statement"
KINDS = (CONTRAST, TOPIC, QUALITY, STATEMENT)
#: A topic longer than this many words is a statement, whatever its wording.
STATEMENT_WORDS = 12
# A question that states a claim in a clause of its own ("Does this imply that the man is asleep?",
# "Is it true that ...?"): the clause is a statement to check, not a subject to compare with.
_CLAIM = re.compile(r"\b(?:that|whether)\s+\S+(?:\s+\S+){2,}", re.IGNORECASE)

# A question that names what the text is about or asks for ("Is this about pets?", "Does this post discuss
# hockey?", "Does the user want to book a flight?"), as against one that asks what the text is like
# ("Is this tweet ironic?", "Is this sentence subjective?", "Is this a complaint?").
# An action asked for (_ASKS_FOR_AN_ACTION) names one too.
_NAMES_A_SUBJECT = re.compile(
    r"\b(?:about|regarding|concern(?:s|ing)?|relat(?:ed|es?|ing)\s+to|discuss(?:es|ed|ing)?|mention(?:s|ed|ing)?"
    r"|refer(?:s|red|ring)?\s+to|deal(?:s|ing)?\s+with|belong(?:s|ing)?|categor(?:y|ies)|topic|subject"
    r"|want(?:s|ed)?|request\s+for|ask(?:s|ed|ing)?(?:\s+\w+){0,2}\s+for)\b",
    re.IGNORECASE,
)


def question_kind(reading: YesNoReading) -> str:
    """Which head answers a read yes/no question."""
    if reading.contrasts:
        return CONTRAST
    # "Does the user want to say that it does not matter?" asks for an action; its clause is not a claim.
    claim = _CLAIM.search(reading.question) and not _ASKS_FOR_AN_ACTION.search(reading.question)
    if len(reading.topic.split()) > STATEMENT_WORDS or claim:
        return STATEMENT
    # A question about the world ("Did greece qualify for the 2018 world cup?") rather than about its
    # text: the text's similarity to it says whether the text is on the subject, not what the answer is.
    if not asks_about_the_text(reading.question):
        return STATEMENT
    if _NAMES_A_SUBJECT.search(reading.question) or _ASKS_FOR_AN_ACTION.search(reading.question):
        return TOPIC
    return QUALITY


class DecisionHead:
    """A linear map of the standardised scalars, plus a low-rank bilinear term of the vectors.

    ``logit = w . scalars + b + sum_k (U text)_k * (V topic + W contrast)_k``: ``U`` projects
    the text onto a few learned axes (sentiment, subjectivity, subject areas), ``V`` and ``W``
    say which axes the question asks about and in which direction. Then a temperature and
    an offset fitted on domains the head was not trained on.
    """

    NAMES = ("mean", "scale", "w", "b", "U", "V", "W", "temperature", "offset", "odd")

    def __init__(self, weights: dict[str, np.ndarray]):
        self.weights = {name: np.asarray(weights[name], dtype=np.float64) for name in self.NAMES}

    @staticmethod
    def load_all(path) -> dict[str, DecisionHead]:
        """The heads of a weights file, by kind; each weight is saved as ``<kind>.<name>``."""
        with np.load(path) as archive:
            return {kind: DecisionHead({n: archive[f"{kind}.{n}"] for n in DecisionHead.NAMES}) for kind in KINDS}

    @staticmethod
    def save_all(path, heads: dict[str, DecisionHead]) -> None:
        arrays = {f"{kind}.{name}": value for kind, head in heads.items() for name, value in head.arrays().items()}
        with open(path, "wb") as file:
            np.savez(file, **arrays)

    def arrays(self) -> dict[str, np.ndarray]:
        return {name: value.astype(np.float32) for name, value in self.weights.items()}

    def raw_logits(self, features: np.ndarray) -> np.ndarray:
        if self.weights["odd"]:
            # A contrast's answer turns round when its sides swap: only the part odd in the sides counts.
            return 0.5 * (self._logits(features) - self._logits(swap_sides(features)))
        return self._logits(features)

    def _logits(self, features: np.ndarray) -> np.ndarray:
        w = self.weights
        scalars = (features[:, :SCALARS] - w["mean"]) / w["scale"]
        text, topic, sides = np.split(np.asarray(features[:, SCALARS:], np.float64), 3, axis=1)
        axes = text @ w["U"].T
        asked = topic @ w["V"].T + sides @ w["W"].T
        return scalars @ w["w"] + float(w["b"]) + (axes * asked).sum(axis=1)

    def logits(self, features: np.ndarray) -> np.ndarray:
        """Calibrated logits of "yes"."""
        return self.raw_logits(features) / float(self.weights["temperature"]) + float(self.weights["offset"])

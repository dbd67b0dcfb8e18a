"""How an English question is read: what it asks, about what, and how it is put to each model.

The embedded model answers a question as it is read here, and ``training/`` builds its examples with the
same functions, so that a question is read alike in training and in use:

- where a question's subject starts (:func:`split_frame`, :func:`split_question`);
- what a yes/no question asks about (:func:`question_topic`, :func:`refers_to_state`), whether it is negated
  (:func:`strip_negation`) or turns on one polar word (:func:`polar_contrast`), all of it one
  :class:`YesNoReading` (:func:`read_yes_no`), and which decision head answers it (:func:`question_kind`);
- which option of a choice says "none of these" (:func:`is_none_option`) or is a bare name (:func:`named_only`);
- how the reader is asked a yes/no question, one option of a choice and one level of a score
  (:func:`yes_no_asked`, :func:`option_asked`, :func:`level_asked`), and how its two readings of a negated
  question make one (:func:`negated_reading`).

A negated question ("Is this not about pets?") is answered as its plain form and the probability turned
round, since no sentence vector tells "not X" from "X".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

__all__ = [
    "AUXILIARY",
    "CONTRAST",
    "KINDS",
    "NEGATED_READS",
    "QUALITY",
    "STATEMENT",
    "TOPIC",
    "YesNoReading",
    "asks_about_the_text",
    "asks_yes_or_no",
    "is_none_option",
    "level_asked",
    "named_only",
    "negated_reading",
    "option_asked",
    "option_name",
    "option_reading",
    "option_texts",
    "polar_contrast",
    "question_kind",
    "question_topic",
    "read_yes_no",
    "reads_as_asked",
    "refers_to_state",
    "split_frame",
    "split_question",
    "strip_negation",
    "yes_no_asked",
]


# --- where the subject starts -------------------------------------------------------------------------


# A short leading clause ending in ": " is a frame ("This note bears on the request: ",
# "How well does the artifact meet this criterion: "); what follows is the subject.
_FRAME = re.compile(r"^\s*(?P<frame>[^:\n]{1,80}?):\s+(?P<subject>\S.*)$", re.DOTALL)
_FRAME_MAX_WORDS = 12


def split_frame(text: str) -> tuple[str, str]:
    """``(frame, subject)`` of a question's text; the frame is empty when there is none.

    A bi-encoder compares meanings, it does not follow instructions: the same
    frame glued to every document pulls all their vectors toward the frame and
    blurs the differences that matter, so the subject is encoded without it.
    The split looks at one question at a time, so a question's answer never
    depends on what else its call carries.
    """
    match = _FRAME.match(text)
    if match is None or len(match["frame"].split()) > _FRAME_MAX_WORDS:
        return "", text.strip()
    return match["frame"].strip(), match["subject"].strip()


# A question whose text ends in a block labelled as the thing asked about ("Is it about
# fleas?\nItem: <text>", the filter tool's shape) asks what comes before about that block.
_SUBJECT_BLOCK = re.compile(
    r"^(?P<instructions>.*?\S)\s*\n\s*(?:item|document|passage|text|note|artifact)\s*:\s*(?P<subject>\S.*)$",
    re.DOTALL | re.IGNORECASE,
)


def split_question(text: str) -> tuple[str, str]:
    """``(instructions, subject)`` of a likelihood or score question's text.

    A leading frame comes first (everything after it is the subject, whatever
    lines it holds); then a trailing labelled block; else the whole text is
    the subject.
    """
    frame, subject = split_frame(text)
    if frame:
        return frame, subject
    block = _SUBJECT_BLOCK.match(text)
    if block is not None:
        return block["instructions"].strip(), block["subject"].strip()
    return "", subject


# --- what a yes/no question asks about ----------------------------------------------------------------


#: The auxiliary verbs a yes/no question starts with ("Is …", "Does …", "Can …").
AUXILIARY = r"(?:is|are|was|were|does|do|did|can|could|will|would|should|has|have|had)"
_SUBJECT = (
    r"(?:(?:the|this|that|these|those)(?:\s+\w+)?\s+"
    r"(?:customer|user|text|review|message|item|document|passage|sentence|note|email|article|post|comment"
    r"|question|request|page|tweet|story|ticket|query|product|paper|sentiment|tone)"
    r"|it|this|that|these|those|there|they|he|she)"
)
# "Is the customer asking about card arrival?" -> "card arrival"; "Is this about pets?" -> "pets";
# "Does the customer want a refund?" -> "want a refund"; "Is this a complaint?" -> "a complaint".
_ABOUT = re.compile(r"\babout\s+(?P<topic>.+)$", re.IGNORECASE | re.DOTALL)
_LEADING = re.compile(
    rf"^{AUXILIARY}\s+(?:{_SUBJECT}\s+)?(?:(?:asking|talking|writing|speaking|concerned|related|relevant)\s+"
    rf"(?:about|to|with)\s+)?",
    re.IGNORECASE,
)
# A question that points at the state ("Does this answer the question?") asks about the state, not a topic.
_REFERS_TO_STATE = re.compile(
    r"\b(?:the|this|my|our|your|user's|customer's)\s+(?:question|query|request|context|search|task|goal|need)s?\b",
    re.IGNORECASE,
)


def question_topic(question: str) -> str:
    """What a yes/no question asks about, without the question's own frame words.

    A bi-encoder compares meanings: "Is the customer asking about card arrival?"
    is best compared as "card arrival", since the frame words ("is the customer
    asking") match every text alike. Falls back to the whole question.
    """
    text = question.strip().rstrip("?.!").strip()
    about = _ABOUT.search(text)
    if about is not None and about["topic"].strip():
        return about["topic"].strip()
    stripped = _LEADING.sub("", text, count=1).strip()
    return stripped or text


_NAMES_ITS_SUBJECT = re.compile(rf"^\s*{AUXILIARY}\s+{_SUBJECT}\b", re.IGNORECASE)


def asks_about_the_text(question: str) -> bool:
    """Whether a yes/no question asks something of the text it is put to ("Is this about pets?", "Does the
    customer want a refund?"), rather than about the world ("Did greece qualify for the 2018 world cup?")."""
    return _ABOUT.search(question) is not None or _NAMES_ITS_SUBJECT.match(question) is not None


def refers_to_state(question: str) -> bool:
    """Whether a yes/no question asks how an item bears on the state ("Is this relevant to the question?")."""
    return _REFERS_TO_STATE.search(question) is not None


# --- negation -----------------------------------------------------------------------------------------


# "Is this not about pets?", "Does the customer not want a refund?": the auxiliary, up to five
# words of subject, then "not". Further on, "not" belongs to a clause ("a phone that does not work").
_NOT_AFTER_SUBJECT = re.compile(rf"^(?P<head>\s*{AUXILIARY}(?:\s+(?!not\b)[\w'-]+){{0,5}}?)\s+not\b", re.IGNORECASE)
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

_YES_NO_START = re.compile(rf"^\s*{AUXILIARY}\b", re.IGNORECASE)


def asks_yes_or_no(question: str) -> bool:
    """Whether a question is answered yes or no ("Is this about pets?", "Isn't it late?") rather than by a
    degree ("How urgent is this ticket?")."""
    return _YES_NO_START.match(strip_negation(question)[0]) is not None


# --- a polar word and its opposite --------------------------------------------------------------------


# Polar words and their opposites. A bi-encoder cannot read "not", but it can tell which of two
# wordings a text is closer to: "Is this review positive?" is read as the contrast with
# "Is this review negative?" (SST-2: AUROC 0.76, against 0.48 for the topic "positive").
_POLAR_PAIRS = (
    ("positive", "negative"), ("good", "bad"), ("happy", "sad"), ("satisfied", "dissatisfied"),
    ("favorable", "unfavorable"), ("favourable", "unfavourable"), ("pleased", "displeased"),
    ("like", "dislike"), ("love", "hate"), ("correct", "incorrect"), ("helpful", "unhelpful"),
    ("polite", "rude"), ("safe", "unsafe"), ("legal", "illegal"), ("optimistic", "pessimistic"),
    ("friendly", "hostile"), ("calm", "angry"), ("praise", "criticism"), ("success", "failure"),
    ("agree", "disagree"), ("approve", "disapprove"), ("relevant", "irrelevant"),
)  # fmt: skip
_OPPOSITES = {a: b for pair in _POLAR_PAIRS for a, b in (pair, pair[::-1])}
_POLAR_WORD = re.compile(r"\b(" + "|".join(sorted(_OPPOSITES, key=len, reverse=True)) + r")\b", re.IGNORECASE)


def polar_contrast(question: str) -> tuple[str, str] | None:
    """``(question, its opposite)`` when the question turns on one polar word, else None."""
    words = _POLAR_WORD.findall(question)
    if len(words) != 1:
        return None

    def opposite(match: re.Match) -> str:
        word = _OPPOSITES[match[1].lower()]
        return word.capitalize() if match[1][0].isupper() else word

    return question, _POLAR_WORD.sub(opposite, question, count=1)


# --- the reading of a yes/no question -----------------------------------------------------------------


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


# --- which head answers it ----------------------------------------------------------------------------


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


# --- options of a choice ------------------------------------------------------------------------------


# The whole description must say "nothing fits": a passage that merely starts with "Other ..." is an option.
_NONE_OPTION = re.compile(
    r"^\s*(?:(?:none|nothing)(?:\s+of\s+(?:these|those|them|the\s+above|the\s+options|the\s+others))?"
    r"|no\s+(?:option|answer|match|label|category|item)|other|something\s+else|not\s+listed)"
    r"(?:\s+(?:fits?|applies|apply|matches|match|is\s+right))?\s*[.!]?\s*$",
    re.IGNORECASE,
)


def is_none_option(key: str, description: str) -> bool:
    """A "nothing fits" option: keyed ``none``, or described as none of the others."""
    return key.strip().lower() == "none" or _NONE_OPTION.match(description or "") is not None


def option_name(key: str) -> str:
    """An option's key as words ("tech_support" -> "tech support"), as the reader is asked it."""
    return key.replace("_", " ").strip()


def named_only(key: str, description: str) -> bool:
    """Whether an option is its name alone, as in a caller's list of labels ("billing", "shipping")."""
    description = (description or "").strip()
    return not description or description.lower() in (key.strip().lower(), option_name(key).lower())


def option_texts(key: str, description: str) -> tuple[str, ...]:
    """The texts whose MiniLM vectors stand for an option of a choice among labels (``_shapes.option_vector``):
    its name as words, then what its description says it covers.

    The name as well as the description, as the reader is asked them (:func:`option_asked`): leave-one-domain-out
    on the everyday choices, the bi-encoder 0.845 -> 0.885 and "none" recall 0.598 -> 0.664; a name alone as
    words ("tech support", not "tech_support") 0.709 -> 0.711 (docs/experiments.md, "An option's name beside
    its description"). A name that is a position (as rank keys its items) says nothing of the option.
    """
    name, description = option_name(key), (description or "").strip()
    if named_only(key, description):
        return (name or key,)
    if not name or name.isdigit():
        return (description,)
    return (name, description)


# --- how the reader is asked --------------------------------------------------------------------------


def yes_no_asked(question: str, true: str | None = None, false: str | None = None) -> str:
    """A yes/no question as the reader reads it, its descriptions (if any) after it."""
    question = question.strip()
    return f"{question} (yes: {true or '-'}; no: {false or '-'})" if true or false else question


def option_asked(question: str, key: str, description: str) -> str:
    """One option of a choice as a yes/no question: the question, the option's name and what it covers."""
    name, description = option_name(key), (description or "").strip()
    if named_only(key, description):
        return f"{question.strip()} {name}"
    if name.isdigit():  # a position, as rank keys its items: it says nothing of the option
        return f"{question.strip()} {description}"
    return f"{question.strip()} {name}: {description}"


def level_asked(question: str, level: str) -> str:
    """One level of a graded score question: "How urgent is this message? high"."""
    return f"{question.strip()} {level.strip()}"


#: How a negated question ("Is the laptop not working?") is read, as ``training/stack.py --negated-reads`` fitted
#: the blend: "both" forms, its plain form and as asked; or "one" of them (:func:`reads_as_asked`).
NEGATED_READS = ("both", "one")


def reads_as_asked(topic):
    """Of a negated question read once, whether it is read as asked (else in its plain form): unless it is
    more likely a topic question than not (``topic``, :meth:`._reader.Blend.topic`), as a reader's own reading of a
    negated topic ("Is this not about pets?") is near chance on domains it never saw (docs/experiments.md,
    "Negated questions read once")."""
    return np.asarray(topic) <= 0.5


def negated_reading(plain, negated, topic, reads: str = "both"):
    """The reader's evidence for the plain form of a negated question, from its logit of the plain form and
    of the negated question as asked (turned round), ``topic`` how likely the question is a topic question
    (:meth:`._reader.Blend.topic`).

    - ``reads="both"``: of "Is the laptop not working?" the two readings are averaged (each alone is right
      about as often on domains the reader never saw, together more often); of "Is this not about pets?"
      the plain form alone counts, weighted by ``topic``.
    - ``reads="one"``: the one form :func:`reads_as_asked` picks; the other is not read (NaN is fine).
    """
    if reads == "one":
        return np.where(reads_as_asked(topic), -np.asarray(negated), plain)
    asked = 0.5 * (1.0 - topic)
    return (1.0 - asked) * plain - asked * negated


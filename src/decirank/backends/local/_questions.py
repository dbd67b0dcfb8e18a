"""Splitting a question's text into what it asks and the subject the encoders compare."""

from __future__ import annotations

import re

__all__ = [
    "BACKGROUND_TOPICS",
    "asks_about_the_text",
    "is_none_option",
    "polar_contrast",
    "question_topic",
    "refers_to_state",
    "split_frame",
    "split_question",
]

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


_AUXILIARY = r"(?:is|are|was|were|does|do|did|can|could|will|would|should|has|have|had)"
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
    rf"^{_AUXILIARY}\s+(?:{_SUBJECT}\s+)?(?:(?:asking|talking|writing|speaking|concerned|related|relevant)\s+"
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


_NAMES_ITS_SUBJECT = re.compile(rf"^\s*{_AUXILIARY}\s+{_SUBJECT}\b", re.IGNORECASE)


def asks_about_the_text(question: str) -> bool:
    """Whether a yes/no question asks something of the text it is put to ("Is this about pets?", "Does the
    customer want a refund?"), rather than about the world ("Did greece qualify for the 2018 world cup?")."""
    return _ABOUT.search(question) is not None or _NAMES_ITS_SUBJECT.match(question) is not None


def refers_to_state(question: str) -> bool:
    """Whether a yes/no question asks how an item bears on the state ("Is this relevant to the question?")."""
    return _REFERS_TO_STATE.search(question) is not None


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


#: Generic topics a yes/no topic question is contrasted with: "is it about pets?" reads as "is it
#: closer to pets than to these?". Written as everyday subject areas, not taken from any data set.
BACKGROUND_TOPICS = (
    "sports", "politics and elections", "cooking and recipes", "weather", "health and medicine",
    "money and banking", "travel and holidays", "music", "movies and television", "computers and software",
    "science", "history", "education and school", "jobs and careers", "cars and driving", "animals and pets",
    "family and relationships", "shopping", "fashion and clothing", "housing and real estate", "law and crime",
    "religion", "art and design", "books and literature", "video games", "food and restaurants",
    "fitness and exercise", "nature and the environment", "business and companies", "technology and gadgets",
    "mathematics", "languages", "war and the military", "space and astronomy", "farming and gardening",
    "celebrities", "insurance", "taxes", "phones and telecommunications", "weddings", "children and parenting",
    "energy and electricity", "transport and public transit", "emotions and feelings", "philosophy",
    "social media", "hobbies and crafts", "the internet", "customer service", "delivery and shipping",
)  # fmt: skip


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

"""The training and evaluation questions of the decision head, built from the development sets alone.

Every labelled set in ``../shared/data/decisions`` becomes questions of the
shapes a user asks, each in several wordings, with a seeded draw, so the same
data gives the same questions on every machine:

- **topic** yes/no: "Is this post about ice hockey?", half asked about the
  text's own label and half about another one (the topic sets' own rows as
  they are);
- **attribute** yes/no: sentiment, subjectivity, irony, offence, hate,
  emotion and stance, with and without ``true``/``false`` descriptions, and
  asked the other way round ("Is this review negative?");
- **passage** yes/no: a question about a passage (BoolQ, PubMedQA, MultiRC),
  whether a hypothesis follows (SICK, RTE, CB, MNLI) or whether a sentence
  supports a claim (CLIMATE-FEVER);
- **choice** among labels with descriptions (intents, question types,
  newsgroups, emotions, stance, topics).

Each question carries its ``domain`` (the set it came from; the SNIPS and
newsgroup topic sets belong to their sets' domain), so a model can be trained
without a domain and measured on it.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ChoiceRow", "YesNoRow", "by_domain", "choice_rows", "yes_no_rows"]

TOPIC, ATTRIBUTE, PASSAGE = "topic", "attribute", "passage"
#: Questions drawn per domain and family, at most (more costs time, not quality, past this).
PER_DOMAIN = 1200


@dataclass(frozen=True)
class YesNoRow:
    domain: str
    family: str
    #: what is judged (the state of the question)
    text: str
    question: str
    label: int
    true: str | None = None
    false: str | None = None


@dataclass(frozen=True)
class ChoiceRow:
    domain: str
    text: str
    question: str
    #: option key -> description
    options: dict[str, str] = field(hash=False)
    label: str = ""


def _read(data: Path, name: str) -> list[dict]:
    with open(data / f"{name}.jsonl", encoding="utf-8") as file:
        return [json.loads(line) for line in file if line.strip()]


def _labels(data: Path, name: str):
    return json.loads((data / f"{name}.labels.json").read_text(encoding="utf-8"))


def _descriptions(data: Path, name: str) -> dict[str, str]:
    path = data / f"{name}.descriptions.json"
    if path.exists():
        return json.loads(path.read_text(encoding="utf-8"))
    labels = _labels(data, name)
    keys = labels if isinstance(labels, list) else list(labels)
    return {key: key.replace("_", " ") for key in keys}


def _sample(rows: list, n: int, rng: random.Random) -> list:
    return rows if len(rows) <= n else rng.sample(rows, n)


# --- topic ----------------------------------------------------------------------------------------------

# (domain, file, how a label reads as a topic, wordings with {topic})
_TOPIC_WORDINGS = {
    "banking77": (
        "Is the customer asking about {topic}?",
        "Is this message about {topic}?",
        "Is this about {topic}?",
        "Does this customer query concern {topic}?",
    ),
    "hwu64": (
        "Does the user want to {topic}?",
        "Is this request to {topic}?",
        "Is the user asking the assistant to {topic}?",
    ),
    "snips": (
        "Does the user want to {topic}?",
        "Is this request to {topic}?",
        "Is this a request to {topic}?",
    ),
    "newsgroups": (
        "Is this post about {topic}?",
        "Is this about {topic}?",
        "Is this message related to {topic}?",
        "Does this post discuss {topic}?",
    ),
    "yahoo": (
        "Is this question about {topic}?",
        "Is this about {topic}?",
        "Is this post related to {topic}?",
        "Does this belong in the {topic} category?",
    ),
    "tweet_stance": (
        "Is this tweet about {topic}?",
        "Does this tweet talk about {topic}?",
        "Is this about {topic}?",
    ),
}


def _own_or_other(rows, labels, topic_of, wordings, domain, rng, text_of=lambda row: row["text"]):
    """Half the rows asked about their own label, half about another label (a seeded draw)."""
    out = []
    for i, row in enumerate(_sample(rows, PER_DOMAIN, rng)):
        own = row["label"]
        asked = own if i % 2 == 0 else rng.choice([label for label in labels if label != own])
        question = rng.choice(wordings).format(topic=topic_of(asked))
        out.append(YesNoRow(domain, TOPIC, text_of(row), question, int(asked == own)))
    return out


def _topic_rows(data: Path, rng: random.Random) -> list[YesNoRow]:
    rows: list[YesNoRow] = []
    words = {label: label.replace("_", " ") for label in _labels(data, "banking77")}
    banking = _read(data, "banking77-train")
    rows += _own_or_other(banking, list(words), words.get, _TOPIC_WORDINGS["banking77"], "banking77", rng)
    for name in ("hwu64", "snips"):
        descriptions = _descriptions(data, name)
        rows += _own_or_other(_read(data, name), list(descriptions), descriptions.get, _TOPIC_WORDINGS[name], name, rng)
    # The topic sets' own questions, reworded: their rows already hold the asked topic and the truth.
    for name, domain in (("snips_topic", "snips"), ("yahoo_topic", "yahoo"), ("newsgroups_topic", "newsgroups")):
        wordings = _TOPIC_WORDINGS[domain if domain != "snips" else "newsgroups"]
        for row in _read(data, name):
            question = rng.choice(wordings).format(topic=row["topic"])
            rows.append(YesNoRow(domain, TOPIC, row["text"], question, int(row["label"])))
    groups = _descriptions(data, "newsgroups")
    rows += _own_or_other(
        _read(data, "newsgroups"), list(groups), groups.get, _TOPIC_WORDINGS["newsgroups"], "newsgroups", rng
    )
    stance = _read(data, "tweet_stance")
    targets = sorted({row["target"] for row in stance})
    rows += _own_or_other(
        [{**row, "label": row["target"]} for row in stance],
        targets,
        lambda target: target,
        _TOPIC_WORDINGS["tweet_stance"],
        "tweet_stance",
        rng,
    )
    return rows


# --- attributes -----------------------------------------------------------------------------------------

# Sentiment sets: (domain, file, what a text is called, which label is positive)
_SENTIMENT = (
    ("sst2", "sst2-train", "movie review", "positive"),
    ("cr", "cr", "product review", 1),
    ("mpqa", "mpqa", "phrase", 1),
    ("review_sentences", "review_sentences", "review", 1),
    ("yelp", "yelp", "review", 1),
    ("tweet_sentiment", "tweet_sentiment", "tweet", "positive"),
)
# (wording, does "yes" mean positive, true description, false description); {kind} is what a text is called
_SENTIMENT_WORDINGS = (
    ("Is this {kind} positive?", True, None, None),
    ("Is this {kind} negative?", False, None, None),
    ("Is the sentiment of this text positive?", True, None, None),
    ("Is this a positive {kind}?", True, "a positive {kind}", "a negative {kind}"),
    ("Is the writer happy with it?", True, None, None),
    ("Does the author like it?", True, None, None),
    ("Is this {kind} favourable?", True, None, None),
    ("Is this a complaint?", False, None, None),
    ("Is the tone negative?", False, "negative", "positive"),
    ("Is this {kind} praising something?", True, "praise", "criticism"),
    ("Is this positive?", True, "positive", "negative"),
    ("Does the writer feel good about it?", True, None, None),
    # a score question's reading: its top and bottom levels are the two sides
    ("How positive is this {kind}?", True, "very positive", "very negative"),
    ("How satisfied is the writer?", True, "very satisfied", "very dissatisfied"),
)

# Other attributes: (domain, file, which label is "yes", wordings as (question, yes means the label, true, false))
_ATTRIBUTES = (
    (
        "subj",
        "subj",
        1,
        (
            ("Is this sentence subjective?", True, None, None),
            ("Is this an opinion?", True, "an opinion", "a fact"),
            ("Is this sentence objective?", False, None, None),
            ("Does this state a fact rather than an opinion?", False, None, None),
            ("Is this a personal opinion?", True, "a personal opinion", "a neutral description of events"),
            ("Is this a statement of fact?", False, None, None),
        ),
    ),
    (
        "tweet_irony",
        "tweet_irony",
        1,
        (
            ("Is this tweet ironic?", True, None, None),
            ("Is this tweet sarcastic?", True, None, None),
            ("Is the writer being ironic?", True, "ironic", "sincere"),
            ("Is this tweet meant literally?", False, None, None),
        ),
    ),
    (
        "tweet_offensive",
        "tweet_offensive",
        1,
        (
            ("Is this tweet offensive?", True, None, None),
            ("Is this tweet rude?", True, None, None),
            ("Does this tweet contain insults or profanity?", True, "offensive", "inoffensive"),
            ("Is this tweet polite?", False, None, None),
        ),
    ),
    (
        "tweet_hate",
        "tweet_hate",
        1,
        (
            ("Is this tweet hate speech?", True, None, None),
            ("Is this tweet hateful towards immigrants or women?", True, None, None),
            ("Is this hateful?", True, "hate speech", "not hate speech"),
        ),
    ),
)

_EMOTION_WORDS = {"anger": "angry", "joy": "joyful", "optimism": "optimistic", "sadness": "sad"}
_EMOTION_WORDINGS = ("Does this tweet express {emotion}?", "Is the writer {adjective}?", "Is this tweet {adjective}?")
_STANCE_WORDINGS = (
    ("Is this tweet in favour of {target}?", "favor"),
    ("Does the writer support {target}?", "favor"),
    ("Is this tweet against {target}?", "against"),
    ("Does the writer oppose {target}?", "against"),
)


def _attribute_rows(data: Path, rng: random.Random) -> list[YesNoRow]:
    rows: list[YesNoRow] = []
    for domain, name, kind, positive in _SENTIMENT:
        texts = [row for row in _read(data, name) if row["label"] != "neutral"]
        for row in _sample(texts, PER_DOMAIN, rng):
            wording, yes_is_positive, true, false = rng.choice(_SENTIMENT_WORDINGS)
            is_positive = row["label"] == positive
            rows.append(
                YesNoRow(
                    domain,
                    ATTRIBUTE,
                    row["text"],
                    wording.format(kind=kind),
                    int(is_positive == yes_is_positive),
                    true.format(kind=kind) if true else None,
                    false.format(kind=kind) if false else None,
                )
            )
    for domain, name, yes_label, wordings in _ATTRIBUTES:
        for row in _sample(_read(data, name), PER_DOMAIN, rng):
            wording, yes_is_label, true, false = rng.choice(wordings)
            rows.append(
                YesNoRow(
                    domain,
                    ATTRIBUTE,
                    row["text"],
                    wording,
                    int((row["label"] == yes_label) == yes_is_label),
                    true,
                    false,
                )
            )
    emotions = _read(data, "tweet_emotion")
    for i, row in enumerate(_sample(emotions, PER_DOMAIN, rng)):
        asked = row["label"] if i % 2 == 0 else rng.choice([e for e in _EMOTION_WORDS if e != row["label"]])
        question = rng.choice(_EMOTION_WORDINGS).format(emotion=asked, adjective=_EMOTION_WORDS[asked])
        rows.append(YesNoRow("tweet_emotion", ATTRIBUTE, row["text"], question, int(asked == row["label"])))
    stance = [row for row in _read(data, "tweet_stance") if row["label"] != "none"]
    for row in _sample(stance, PER_DOMAIN, rng):
        wording, yes_label = rng.choice(_STANCE_WORDINGS)
        question = wording.format(target=row["target"])
        # The stance questions are their own domain: the topic questions over the same tweets are another shape.
        rows.append(YesNoRow("tweet_stance", ATTRIBUTE, row["text"], question, int(row["label"] == yes_label)))
    return rows


# --- passages -------------------------------------------------------------------------------------------

_INFERENCE_WORDINGS = (
    "Does this text imply that {h}?",
    "Does it follow from this that {h}?",
    "Is it true, according to this text, that {h}?",
)


def _sentence(text: str) -> str:
    text = text.strip().rstrip(".!?")
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text


def _passage_rows(data: Path, rng: random.Random) -> list[YesNoRow]:
    rows: list[YesNoRow] = []
    for name in ("boolq", "pubmedqa"):
        for row in _sample(_read(data, name), PER_DOMAIN, rng):
            rows.append(YesNoRow(name, PASSAGE, row["text"], row["question"], int(row["label"])))
    for row in _sample(_read(data, "multirc"), PER_DOMAIN, rng):
        question = f'{row["question"].rstrip("?")}? Is "{row["answer"]}" the right answer?'
        rows.append(YesNoRow("multirc", PASSAGE, row["text"], question, int(row["label"])))
    for name in ("sick", "rte", "cb", "mnli"):
        for row in _sample(_read(data, name), PER_DOMAIN, rng):
            question = rng.choice(_INFERENCE_WORDINGS).format(h=_sentence(row["hypothesis"]))
            rows.append(YesNoRow(name, PASSAGE, row["text"], question, int(row["label"])))
    for row in _sample(_read(data, "climate_fever"), PER_DOMAIN, rng):
        question = f"Does this support the claim that {_sentence(row['claim'])}?"
        rows.append(YesNoRow("climate_fever", PASSAGE, row["text"], question, int(row["label"])))
    return rows


def yes_no_rows(data: Path, seed: int = 0) -> list[YesNoRow]:
    """Every yes/no question of the corpus, in a fixed order for a given seed."""
    rng = random.Random(seed)
    return _topic_rows(data, rng) + _attribute_rows(data, rng) + _passage_rows(data, rng)


# --- choice ---------------------------------------------------------------------------------------------

_CHOICE_SETS = (
    # (domain, file, question); the options are the domain's labels and descriptions
    ("banking77", "banking77-train", "What does the customer want?"),
    ("hwu64", "hwu64", "What does the user want the assistant to do?"),
    ("snips", "snips", "What does the user want?"),
    ("trec6", "trec6-train", "What kind of answer does this question ask for?"),
    ("newsgroups", "newsgroups", "Which newsgroup is this post from?"),
    ("tweet_emotion", "tweet_emotion", "Which emotion does this tweet express?"),
    ("tweet_sentiment", "tweet_sentiment", "What is the sentiment of this tweet?"),
)


def choice_rows(data: Path, seed: int = 0, per_domain: int = 1000) -> list[ChoiceRow]:
    """Choice questions with described options, ``per_domain`` at most from each set."""
    rng = random.Random(seed)
    rows: list[ChoiceRow] = []
    for domain, name, question in _CHOICE_SETS:
        options = _descriptions(data, domain)
        texts = _read(data, name)
        for row in _sample(texts, per_domain, rng):
            rows.append(ChoiceRow(domain, row["text"], question, options, str(row["label"])))
    yahoo = _labels(data, "yahoo_topic")
    own = [row for row in _read(data, "yahoo_topic") if row["label"] == 1]
    for row in _sample(own, per_domain, rng):
        rows.append(ChoiceRow("yahoo", row["text"], "What is this question about?", yahoo, row["true_topic"]))
    return rows


def by_domain(rows) -> dict[str, list]:
    """Rows grouped by domain, in first-seen order."""
    grouped: dict[str, list] = defaultdict(list)
    for row in rows:
        grouped[row.domain].append(row)
    return grouped

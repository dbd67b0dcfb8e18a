"""Labelled rows for the calibration tests: small made-up ones for ``lexical``, made-up support messages for
the embedded model (built from seeded templates, so no data set ships with the tests), and real ones from the
shared data.

The made-up rows are about pets and things; ``lexical`` scores them by the words they share with the
state (filter) or the question (score), so its probabilities vary with the rows as a model's do, and a
few rows are labelled against their words, as real labels sometimes are. The real rows are SST-2's
(``../shared/data/decisions/sst2-train.jsonl``, as the Makefile's ``DECISIONS`` finds them); a test
that needs them skips, saying where they were looked for, when they are not there.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

PET_QUESTION = "Is this about a pet, such as a cat, dog, kitten, puppy, hamster or rabbit?"
#: What filter's items are judged against: lexical keeps those that share its words.
PET_STATE = "a pet: a cat, dog, kitten, puppy, hamster or rabbit"
PETS = ("cat", "dog", "kitten", "puppy", "hamster", "rabbit")
THINGS = ("car", "bus", "lamp", "desk", "phone", "kettle")
PLACES = ("in the garden", "by the door", "on the sofa", "at noon", "near the window")

#: classify's options, and the question its rows answer.
KIND_QUESTION = "What is this about?"
KINDS = {"pet": "a pet: a cat, dog, kitten, puppy, hamster or rabbit", "thing": "a car, bus, lamp, desk or phone"}

#: The labelled SST-2 rows, and the question they answer.
DECISIONS = Path(
    os.environ.get("DECIRANK_DECISIONS", Path(__file__).resolve().parents[1].parent / "shared/data/decisions")
)
SST2 = DECISIONS / "sst2-train.jsonl"
SST2_QUESTION = "Is this review positive?"


def pet_text(index: int) -> tuple[str, bool]:
    """The ``index``-th made-up text and whether it is about a pet (even indices are)."""
    pet = index % 2 == 0
    word = (PETS if pet else THINGS)[index // 2 % len(PETS)]
    return f"a {word} {PLACES[index % len(PLACES)]}", pet


def pet_rows(count: int = 40) -> list[dict[str, Any]]:
    """``count`` labelled rows, half about pets; every seventh is labelled against its words."""
    rows = []
    for index in range(count):
        text, pet = pet_text(index)
        rows.append({"item": text, "answer": pet if index % 7 else not pet})
    return rows


def kind_rows(count: int = 30) -> list[dict[str, Any]]:
    """classify's labelled rows over :data:`KINDS`; every seventh is labelled against its words."""
    rows = []
    for index in range(count):
        text, pet = pet_text(index)
        right = pet if index % 7 else not pet
        rows.append({"item": text, "answer": "pet" if right else "thing"})
    return rows


def sst2_rows(count: int, *, seed: int = 0) -> list[dict[str, Any]]:
    """``count`` SST-2 rows in a fixed shuffled order, as ``{"item", "answer"}``; skips the test without the data."""
    if not SST2.is_file():
        pytest.skip(f"no SST-2 rows at {SST2} (set DECIRANK_DECISIONS to the folder that holds sst2-train.jsonl)")
    with SST2.open(encoding="utf-8") as lines:
        data = [json.loads(line) for line in lines if line.strip()]
    random.Random(seed).shuffle(data)
    return [{"item": row["text"], "answer": row["label"] == "positive"} for row in data[:count]]


#: The question the support rows answer, and the teams their routing rows go to.
SUPPORT_QUESTION = "Is the customer reporting a problem?"

_THINGS = ["order", "parcel", "laptop", "kettle", "phone", "invoice", "app", "router", "jacket", "booking"]
_PROBLEMS = [
    "My {t} arrived broken and nobody answers my emails.",
    "The {t} stopped working after two days, please help.",
    "I was charged twice for the {t} and want it fixed.",
    "Still no sign of my {t}, it is a week late.",
    "The {t} you sent is the wrong one, this is the second time.",
    "Your {t} keeps crashing whenever I open it.",
    "I can't log in to see my {t}, it says my account is locked.",
    "The {t} is damaged and the box was soaked.",
]
_FINE = [
    "Thanks, the {t} arrived early and works perfectly.",
    "Could you tell me your opening hours for collecting a {t}?",
    "Just wanted to say the {t} is lovely, great service.",
    "Do you sell a {t} in blue as well?",
    "Please add a gift note to my {t}, it's a birthday present.",
    "Can I change the delivery address for my {t} before it ships?",
    "Happy with the {t}, I'll order another next month.",
    "What sizes does the {t} come in?",
]
TEAMS = {
    "billing": [
        "I was charged twice for my {t}.",
        "My invoice for the {t} shows the wrong amount.",
        "Where is my refund for the {t}?",
    ],
    "delivery": [
        "My {t} hasn't arrived yet.",
        "The courier left my {t} in the rain.",
        "Can you change where the {t} is delivered?",
    ],
    "technical": ["The {t} won't turn on.", "The {t} app crashes at start.", "The {t} keeps losing its connection."],
    "account": [
        "I can't log in to order a {t}.",
        "Please change the email on my account.",
        "How do I reset my password?",
    ],
}


def support_rows(n: int, seed: int) -> list[dict]:
    """``n`` made-up support messages, about half reporting a problem, from seeded templates."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        problem = rng.random() < 0.5
        template = rng.choice(_PROBLEMS if problem else _FINE)
        rows.append({"item": template.format(t=rng.choice(_THINGS)), "answer": problem})
    return rows


def team_rows(n: int, seed: int) -> list[dict]:
    """``n`` made-up messages labelled with the team of :data:`TEAMS` that handles each."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        team = rng.choice(sorted(TEAMS))
        rows.append({"item": rng.choice(TEAMS[team]).format(t=rng.choice(_THINGS)), "answer": team})
    return rows

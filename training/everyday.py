"""The everyday questions (``../shared/data/everyday``) and the folds that hold their domains out.

Three files of hand-written questions about short messages over 15 domains:
yes/no (with a ``kind``: topic, attribute, request, quality, negated),
choice among described options (some with a "none" answer), and graded
score questions over ordered levels. Each row keeps its line number, so
held-out predictions written by one run can be joined to the rows by
another.

Folds: the 15 everyday domains and the 25 domains of ``corpus.py`` are each
dealt round-robin (in sorted order) into :data:`FOLDS` folds, so every
domain of both is held out exactly once and one training run per fold
covers both leave-one-domain-out tables.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "FOLDS",
    "EverydayChoice",
    "EverydayScore",
    "EverydayYesNo",
    "fold_of",
    "load",
    "row_key",
]

FOLDS = 3
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "everyday"


@dataclass(frozen=True)
class EverydayYesNo:
    line: int
    domain: str
    kind: str
    question: str
    text: str
    label: int


@dataclass(frozen=True)
class EverydayChoice:
    line: int
    domain: str
    question: str
    text: str
    #: option key -> description, in the file's order
    options: dict[str, str] = field(hash=False)
    #: the "none" wording when the row offers it, else None
    none_text: str | None
    #: an option key, or "none"
    answer: str


@dataclass(frozen=True)
class EverydayScore:
    line: int
    domain: str
    question: str
    text: str
    levels: tuple[str, ...]
    #: index of the answer in ``levels``
    answer: int


def _lines(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as file:
        return [json.loads(line) for line in file if line.strip()]


def load(data: Path = DEFAULT_DATA) -> tuple[list[EverydayYesNo], list[EverydayChoice], list[EverydayScore]]:
    yes_no = [
        EverydayYesNo(i, r["domain"], r["kind"], r["question"], r["text"], int(bool(r["answer"])))
        for i, r in enumerate(_lines(data / "yesno.jsonl"))
    ]
    choices = [
        EverydayChoice(i, r["domain"], r["question"], r["text"], dict(r["options"]), r.get("none_text"), r["answer"])
        for i, r in enumerate(_lines(data / "choice.jsonl"))
    ]
    scores = [
        EverydayScore(i, r["domain"], r["question"], r["text"], tuple(r["levels"]), r["levels"].index(r["answer"]))
        for i, r in enumerate(_lines(data / "score.jsonl"))
    ]
    return yes_no, choices, scores


def fold_of(domains: list[str]) -> dict[str, int]:
    """Each domain's fold: dealt round-robin in sorted order, so the split is a function of the names."""
    return {domain: i % FOLDS for i, domain in enumerate(sorted(set(domains)))}


def row_key(*parts: str) -> str:
    """A short stable key of a row's question and text, to check a prediction file still matches the data."""
    return hashlib.blake2b("\x1f".join(parts).encode("utf-8"), digest_size=6).hexdigest()

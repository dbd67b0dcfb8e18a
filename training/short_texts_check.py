"""How the reader in ``assets/`` answers texts of a word or a few, alone and blended as the runtime answers.

The questions are those ``cross_encoder.py --short-texts`` adds to training: each option's name and
description, of the everyday label sets and the 28 sets' topic label sets, asked by name whether it is about
its own option (yes) and about four others of its set (no). A reader trained without them has never seen
them, so they show whether a text's shortness is what it reads badly (training/README.md, "A further
phase"). A trial goes in place first with ``try_reader.py EXPORT --blend BLEND --keep``; ``git checkout``
puts the shipped files back.

    python training/short_texts_check.py
"""

from __future__ import annotations

import argparse
import random
from collections import defaultdict
from pathlib import Path

import everyday
import numpy as np
from corpus import choice_rows, yes_no_rows
from cross_encoder import CORPUS_CHOICES, short_texts
from sklearn.metrics import roc_auc_score

import decirank
from decirank.backends.local._model import _runtime
from decirank.backends.local._reader import asked

#: Other options each text is asked about, as the phases of training/README.md drew them.
OTHERS = 4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/decisions")
    parser.add_argument("--everyday", type=Path, default=everyday.DEFAULT_DATA)
    parser.add_argument("--seed", default="short-texts-check", help="draws the other options asked")
    args = parser.parse_args()
    corpus_choices = choice_rows(args.data, 0, per_domain=CORPUS_CHOICES * 4)
    questions = short_texts(
        yes_no_rows(args.data, 0),
        everyday.load(args.everyday)[1],
        corpus_choices,
        set(),
        set(),
        OTHERS,
        random.Random(args.seed),
    )
    by_question: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for question, text, answer in questions:
        by_question[question].append((text, answer))
    answers, blended, read = [], [], []
    for question, rows in by_question.items():
        texts = [text for text, _ in rows]
        answers += [answer for _, answer in rows]
        blended += decirank.score(texts, question, model="local").probabilities
        read += list(_runtime.reader_logits([(asked(question), text) for text in texts], None)[0])
    y = np.array(answers)
    print(f"{len(y)} questions ({y.sum()} yes) of {len(by_question)} options")
    for name, yes, score in (("reader alone", np.array(read) > 0, read), ("blend", np.array(blended) > 0.5, blended)):
        print(
            f"{name}: accuracy {np.mean(yes == y):.3f} (yes rows {np.mean(yes[y == 1]):.3f}, "
            f"no rows {np.mean(~yes[y == 0]):.3f}), AUROC {roc_auc_score(y, score):.3f}"
        )


if __name__ == "__main__":
    main()

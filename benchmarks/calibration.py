"""Calibration on the user's labels, measured on every development set: ECE, recall promises, conformal coverage.

    python benchmarks/calibration.py [--model local --model lexical] [--rows 600] [--splits 100] [--recall-splits 1000]
                                     [--fit-rows 100]

For each set it asks the model once through the tool a user would call
(``score`` for a yes/no question about a text, ``classify`` for a choice),
then, over ``--splits`` seeded random splits, fits the calibration on 100
(``--fit-rows``) labelled rows with the library's own functions (:func:`choose_map`,
:func:`recall_cutoff`, :func:`conformal_sets`, the ones ``decirank
calibrate`` and the tools use) and measures on the other rows:

- ECE (ten bins) of the calibrated probabilities, beside the model's own and
  beside a floor: the ECE the same numbers would read if they were exactly
  right (labels drawn from them), which is what ten bins over the held-out
  rows measure even of a perfect map; and beside what the labelled rows allow
  at best: were the set's truth exactly its Platt map (fitted on every row)
  and labels drawn from it, the ECE of that very map with only its level
  fitted on the labelled rows (the shape given, not found), and of a Platt
  map fitted on them (a map of the truth's own family);
- ``target_recall=0.9`` at confidence 0.9: in how many splits the held-out
  recall is at least 0.9 (the promise says at least 90 of 100), and the
  held-out precision it costs, over ``--recall-splits`` splits (a cut-off is
  cheap, and 100 splits read a share of 0.9 only to about +-0.03);
- ``coverage=0.9`` for the choice sets: the held-out coverage and mean set size.

The sets: every domain of ``../shared/data/decisions`` as the training
corpus words its yes/no questions (``training/corpus.py``: topic, attribute
and passage questions, several wordings in one set), its choice sets, and the
everyday yes/no and choice files. A set's model answers are cached in
``benchmarks/.cache/`` by model, row count and the shipped weights, so a rerun only re-splits.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "training"))

import corpus
import everyday

import decirank
from decirank.backends.local._assets import SHA256
from decirank.calibration import choose_map, conformal_sets, recall_cutoff, reliability
from decirank.calibration._maps import _logit, _sigmoid, fit_map  # the maps' own, so the reference reads as they do

FIT_ROWS = 100
TARGET = 0.9
CONFIDENCE = 0.9
CACHE = ROOT / "benchmarks" / ".cache"
#: The shipped weights' digest, part of every cached answer file's name (``cached``).
WEIGHTS = hashlib.blake2b(json.dumps(SHA256, sort_keys=True).encode("utf-8"), digest_size=4).hexdigest()


def yes_no_sets(decisions: Path, everyday_data: Path, rows: int) -> dict[str, list[dict]]:
    """Each set's rows ``{question, text, true, false, label}``, at most ``rows`` each, in a seeded order."""
    rng = np.random.default_rng(0)
    sets: dict[str, list[dict]] = {}
    for domain, found in corpus.by_domain(corpus.yes_no_rows(decisions, seed=0)).items():
        picked = [found[i] for i in rng.permutation(len(found))[:rows]]
        sets[domain] = [
            {"question": r.question, "text": r.text, "true": r.true, "false": r.false, "label": int(r.label)}
            for r in picked
        ]
    yes_no, _, _ = everyday.load(everyday_data)
    picked = [yes_no[i] for i in rng.permutation(len(yes_no))]
    sets["everyday"] = [
        {"question": r.question, "text": r.text, "true": None, "false": None, "label": int(r.label)} for r in picked
    ]
    return sets


def choice_sets(decisions: Path, everyday_data: Path, rows: int) -> dict[str, list[dict]]:
    """Each choice set's rows ``{question, text, options, none, label}``."""
    sets: dict[str, list[dict]] = defaultdict(list)
    for r in corpus.choice_rows(decisions, seed=0, per_domain=rows):
        sets[r.domain].append(
            {"question": r.question, "text": r.text, "options": r.options, "none": None, "label": r.label}
        )
    _, choices, _ = everyday.load(everyday_data)
    for r in choices:
        label = r.none_text if r.answer == "none" else r.answer
        sets["everyday"].append(
            {"question": r.question, "text": r.text, "options": r.options, "none": r.none_text, "label": label}
        )
    return dict(sets)


def _groups(rows: list[dict], keys: tuple[str, ...]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = defaultdict(list)
    for index, row in enumerate(rows):
        grouped[json.dumps([row[key] for key in keys], sort_keys=True)].append(index)
    return grouped


def yes_no_answers(rows: list[dict], model: str) -> list[float]:
    """Each row's probability from the score tool, one call per distinct question."""
    probabilities = [0.0] * len(rows)
    for group in _groups(rows, ("question", "true", "false")).values():
        first = rows[group[0]]
        result = decirank.score(
            [rows[i]["text"] for i in group], first["question"], true=first["true"], false=first["false"], model=model
        )
        for i, p in zip(group, result.probabilities, strict=True):
            probabilities[i] = p
    return probabilities


def choice_answers(rows: list[dict], model: str) -> list[list[float]]:
    """Each row's probability of each option (the options' order, ``none`` last), from the classify tool."""
    answers: list[list[float]] = [[] for _ in rows]
    for group in _groups(rows, ("question", "options", "none")).values():
        first = rows[group[0]]
        result = decirank.classify(
            [rows[i]["text"] for i in group], first["question"], first["options"], none=first["none"], model=model
        )
        keys = list(first["options"]) + ([first["none"]] if first["none"] else [])
        for i, decision in zip(group, result.decisions, strict=True):
            answers[i] = [decision.probabilities[key] for key in keys]
    return answers


def cached(name: str, compute):
    """A set's model answers, kept under a name that also holds the shipped weights' digest: a retrained
    embedded model is asked again rather than judged by its predecessor's answers."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"{name}-{WEIGHTS}.json"
    if path.exists():
        return json.loads(path.read_text())
    found = compute()
    path.write_text(json.dumps(found))
    return found


def split_rows(rows: int, split: int, fit_rows: int = FIT_ROWS) -> tuple[np.ndarray, np.ndarray]:
    """Split ``split``'s seeded draw of ``fit_rows`` rows to fit on, and the rest to measure on."""
    order = np.random.default_rng(1000 + split).permutation(rows)
    return order[:fit_rows], order[fit_rows:]


def level_fitted(shape: np.ndarray, labels: np.ndarray) -> float:
    """The offset ``b`` of ``sigmoid(shape + b)`` of most likelihood on ``labels``: where its mean is their rate."""
    low, high, rate = -20.0, 20.0, float(labels.mean())
    for _ in range(60):  # the mean rises with b: bisect
        middle = (low + high) / 2
        low, high = (middle, high) if np.mean(_sigmoid(shape + middle)) < rate else (low, middle)
    return (low + high) / 2


def attainable(p: np.ndarray, y: np.ndarray, splits: int, fit_rows: int = FIT_ROWS) -> tuple[float, float]:
    """The mean ECE ``fit_rows`` labels allow at best on these rows, were the truth known: taken to be exactly
    the set's Platt map (fitted on every row) and each split's labels drawn from it, the ECE on the held-out
    rows of that map with only its level fitted on the labelled rows (its shape given, not found), and of a
    Platt map fitted on them. Short of knowing the shape beforehand, no map fitted on the labels alone can be
    expected to read below the first: the level it must still find is a rate read off the labelled rows."""
    truth = fit_map("platt", p, y)(p)
    shape = _logit(truth)
    given_shape, platt = [], []
    for split in range(splits):
        drawn = (np.random.default_rng(5000 + split).random(len(p)) < truth).astype(int)
        fit, rest = split_rows(len(p), split, fit_rows)
        level = level_fitted(shape[fit], drawn[fit])
        given_shape.append(reliability(_sigmoid(shape[rest] + level), drawn[rest]).ece)
        platt.append(reliability(fit_map("platt", p[fit], drawn[fit])(p[rest]), drawn[rest]).ece)
    return statistics.mean(given_shape), statistics.mean(platt)


def measure_yes_no(p: np.ndarray, y: np.ndarray, splits: int, recall_splits: int, fit_rows: int = FIT_ROWS) -> dict:
    eces, raw_eces, floors = [], [], []
    for split in range(splits):
        fit, rest = split_rows(len(p), split, fit_rows)
        fitted, _, _ = choose_map(p[fit], y[fit], seed=split)
        calibrated = fitted(p[rest])
        eces.append(reliability(calibrated, y[rest]).ece)
        raw_eces.append(reliability(p[rest], y[rest]).ece)
        # What ECE would read if these calibrated numbers were exactly right: labels drawn from them.
        drawn = (np.random.default_rng(3000 + split).random(len(rest)) < calibrated).astype(int)
        floors.append(reliability(calibrated, drawn).ece)
    # A promise made with confidence 0.9 and held exactly fails in one split of ten, so 100 splits read it
    # to about +-3 points; the cut-off is cheap, so it is judged over more of them.
    held, recalls, precisions, kept_all = [], [], [], 0
    for split in range(recall_splits):
        fit, rest = split_rows(len(p), split, fit_rows)
        cut = recall_cutoff(p[fit], y[fit], TARGET, CONFIDENCE, batch_size=len(rest))
        kept = np.ones(len(rest), bool) if cut.threshold is None else p[rest] >= cut.threshold
        kept_all += cut.threshold is None
        positives = y[rest] == 1
        recall = float((kept & positives).sum() / positives.sum()) if positives.any() else 1.0
        recalls.append(recall)
        held.append(recall >= TARGET)
        precisions.append(float(y[rest][kept].mean()) if kept.any() else float("nan"))
    given_shape, platt_of_truth = attainable(p, y, splits, fit_rows)
    return {
        "rows": len(p),
        "fit_rows": fit_rows,
        "base_rate": float(y.mean()),
        "ece_model": statistics.mean(raw_eces),
        "ece": statistics.mean(eces),
        "ece_floor": statistics.mean(floors),
        "ece_given_shape": given_shape,
        "ece_platt_of_truth": platt_of_truth,
        "recall_held": float(np.mean(held)),
        "recall_held_first_splits": float(np.mean(held[:splits])),  # the first --splits alone, as the ECE
        "recall_median": statistics.median(recalls),
        "precision": float(np.nanmean(precisions)),
        "kept_all": kept_all / recall_splits,
    }


def measure_choice(d: list[np.ndarray], truth: np.ndarray, splits: int, fit_rows: int = FIT_ROWS) -> dict:
    """``d`` holds each row's distribution (rows may offer different options); ``truth`` each right column."""
    true_p = np.array([row[t] for row, t in zip(d, truth, strict=True)])
    coverages, sizes = [], []
    for split in range(splits):
        order = np.random.default_rng(2000 + split).permutation(len(d))
        fit, rest = order[:fit_rows], order[fit_rows:]
        sets = conformal_sets(true_p[fit], TARGET, CONFIDENCE, batch_size=len(rest))
        members = [sets.members(d[i]) for i in rest]
        coverages.append(float(np.mean([truth[i] in m for i, m in zip(rest, members, strict=True)])))
        sizes.append(float(np.mean([len(m) for m in members])))
    return {
        "rows": len(d),
        "fit_rows": fit_rows,
        "options": max(len(row) for row in d),
        "accuracy": float(np.mean([int(np.argmax(row)) == t for row, t in zip(d, truth, strict=True)])),
        "coverage": statistics.mean(coverages),
        "coverage_min": min(coverages),
        "set_size": statistics.mean(sizes),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", help="models to measure (default: local and lexical)")
    parser.add_argument("--decisions", type=Path, default=ROOT.parent / "shared" / "data" / "decisions")
    parser.add_argument("--everyday", type=Path, default=ROOT.parent / "shared" / "data" / "everyday")
    parser.add_argument("--rows", type=int, default=600, help="rows per set at most")
    parser.add_argument("--splits", type=int, default=100)
    parser.add_argument(
        "--fit-rows",
        type=int,
        default=FIT_ROWS,
        help=f"labelled rows each split fits on, the rest measure (default {FIT_ROWS})",
    )
    parser.add_argument(
        "--recall-splits", type=int, default=1000, help="splits the recall promise is judged over (default 1000)"
    )
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    models = args.model or ["local", "lexical"]
    yes_no = yes_no_sets(args.decisions, args.everyday, args.rows)
    choices = choice_sets(args.decisions, args.everyday, args.rows)
    report: dict = {}
    for model in models:
        report[model] = {"yes_no": {}, "choice": {}}
        for name, rows in yes_no.items():
            started = time.perf_counter()
            p = cached(f"{model}-yesno-{name}-{args.rows}", lambda rows=rows, model=model: yes_no_answers(rows, model))
            y = np.array([row["label"] for row in rows])
            figures = measure_yes_no(np.array(p), y, args.splits, args.recall_splits, args.fit_rows)
            report[model]["yes_no"][name] = figures
            print(
                f"{model:8} {name:20} rows {figures['rows']:4}  ECE {figures['ece_model']:.3f} -> {figures['ece']:.3f} "
                f"(floor {figures['ece_floor']:.3f}; a known truth: its shape given {figures['ece_given_shape']:.3f}, "
                f"Platt {figures['ece_platt_of_truth']:.3f})  "
                f"recall>=0.9 in {figures['recall_held']:.1%} ({figures['recall_held_first_splits']:.0%} of the first "
                f"{args.splits}; median {figures['recall_median']:.3f}, "
                f"precision {figures['precision']:.3f}, base {figures['base_rate']:.2f})  "
                f"{time.perf_counter() - started:.0f} s",
                flush=True,
            )
        for name, rows in choices.items():
            started = time.perf_counter()
            d = cached(f"{model}-choice-{name}-{args.rows}", lambda rows=rows, model=model: choice_answers(rows, model))
            truth = np.array(
                [(list(row["options"]) + ([row["none"]] if row["none"] else [])).index(row["label"]) for row in rows]
            )
            figures = measure_choice([np.array(row) for row in d], truth, args.splits, args.fit_rows)
            report[model]["choice"][name] = figures
            print(
                f"{model:8} {name:20} rows {figures['rows']:4}  options {figures['options']:3}  "
                f"accuracy {figures['accuracy']:.3f}  coverage {figures['coverage']:.3f} (min {figures['coverage_min']:.3f})  "
                f"set size {figures['set_size']:.1f}  {time.perf_counter() - started:.0f} s",
                flush=True,
            )
        yes = report[model]["yes_no"].values()
        print(
            f"{model}: worst ECE {max(f['ece'] for f in yes):.3f}, mean {statistics.mean(f['ece'] for f in yes):.3f} "
            f"(floor {statistics.mean(f['ece_floor'] for f in yes):.3f}), {sum(f['ece'] <= 0.05 for f in yes)} sets <= 0.05; "
            f"a known truth, its shape given and its level fitted: mean {statistics.mean(f['ece_given_shape'] for f in yes):.3f}, "
            f"{sum(f['ece_given_shape'] <= 0.05 for f in yes)} sets <= 0.05; Platt fitted on labels drawn from it: "
            f"{statistics.mean(f['ece_platt_of_truth'] for f in yes):.3f}, {sum(f['ece_platt_of_truth'] <= 0.05 for f in yes)} sets; "
            f"recall promise held in >= 90% of splits on {sum(f['recall_held'] >= 0.9 for f in yes)}/{len(yes)} sets; "
            f"choice coverage worst {min(f['coverage'] for f in report[model]['choice'].values()):.3f}"
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

"""The everyday and the 28 sets' leave-one-domain-out tables, and the blend of the decision head with the reader.

    python training/stack.py [--no-write]

Reads the reader's held-out predictions (``fold-K.json`` in the folder
``--heldout`` names, by default the shipped reader's, as ``blend.json``
records it; written by ``cross_encoder.py --fold K``: each row answered by a
reader that never saw its domain) and answers the same rows with the
decision head (the shipped head for the everyday rows, which it never saw;
for the 28 sets, the head trained without the row's domain, as ``train.py``
judges it). Then:

- **yes/no**: ``p = sigmoid(a * head + b * reader + c)``, one (a, b, c) for
  every question, fitted by log loss;
- **choice**: ``softmax(a * reader_k + b * cosine_k)`` over the options, and
  "none" as ``sigmoid(c * max_k reader_k + d)`` (one threshold for every
  domain);
- **score** asked "how": ``softmax(reader_i / temperature)`` over the levels, the reader's logit of each
  level (shipped); beside it the head's binomial (its answer before) and the reader tilted by the
  head's contrast of the two ends, ``softmax(a * reader_i + b * position_i * head)``.

Every figure is cross-fitted: a fold's rows are answered with the blend
fitted on the other folds' rows, so no row is judged by a fit that saw its
own domain. The shipped blend is fitted on every fold and written to
``assets/blend.json`` (its sha256 goes in ``_assets.SHA256``). A fold whose
file is missing is left out of the tables (and they say so), so the tables
can be printed while the folds are still being trained; with one fold's
file alone, the blends are cross-fitted by domain within it.
``--second-reader DIR --no-write`` answers options named only and score
levels from another reader's folds (two readers, each for the shapes it
reads best: a trial the runtime cannot run yet, so nothing is written).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
from scipy.optimize import minimize
from sklearn.linear_model import LogisticRegression

sys.path.insert(0, str(Path(__file__).parent))
import everyday
import train
from _strings import negate, strings
from corpus import YesNoRow, yes_no_rows
from vectors import VectorStore

from decirank.backends.local.runtime import (
    NEGATED_READS,
    DecisionHead,
    asks_yes_or_no,
    find_blend,
    find_decision_head,
    negated_reading,
    option_texts,
    option_vector,
    read_yes_no,
    strip_negation,
)

HERE = Path(__file__).parent
ASSETS = HERE.parent / "src" / "decirank" / "backends" / "local" / "assets"
REPO = HERE.resolve().parent
LABEL_SHARPNESS = 16.5
KINDS = ("topic", "attribute", "request", "quality", "negated")
# The kind classifier's inverse regularisation. At 1.0 it read the everyday quality questions held out as
# attributes (6% right; rows 0.738 right in all); at 10 it reads 95% of them (0.927 in all), and the
# blend is as good or a little better (all 0.849 against 0.848). 100 reads no better.
KIND_C = 10.0


def load_folds(folder: Path) -> dict[int, dict]:
    folds = {}
    for k in range(everyday.FOLDS):
        path = folder / f"fold-{k}.json"
        if path.exists():
            folds[k] = json.loads(path.read_text(encoding="utf-8"))
    return folds


def _checked(entries: list[dict], rows: list, key_of, what: str) -> dict[int, dict]:
    """Entries by row, each checked against the row it names (a prediction file made from other data is refused)."""
    out = {}
    for entry in entries:
        at = entry["line"] if "line" in entry else entry["index"]
        if key_of(rows[at]) != entry["key"]:
            raise SystemExit(f"{what} row {at} does not match its held-out prediction: retrain that fold")
        out[at] = entry
    return out


def sigmoid(x):
    return train.sigmoid(np.asarray(x, dtype=np.float64))


def logit(p):
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


# --- the decision head's answers --------------------------------------------------------------------------


def head_logits(rows: list[YesNoRow], store: VectorStore, heads: dict[str, DecisionHead]) -> np.ndarray:
    """The shipped head's calibrated logit of each row, questions read as the runtime reads them."""
    x, flips, kinds = train.features(rows, store)
    out = np.zeros(len(rows))
    for kind, head in heads.items():
        mine = kinds == kind
        if mine.any():
            out[mine] = head.logits(x[mine])
    return np.where(flips, -out, out)


def everyday_strings(yes_no, choices, scores) -> list[str]:
    out = list(train.BACKGROUND_TOPICS)  # what the head's features compare every text with
    for row in [*yes_no, *score_rows_as_yes_no(scores)]:
        reading = read_yes_no(row.question, getattr(row, "true", None), getattr(row, "false", None))
        out += [row.text, reading.topic, reading.question, *(s for pair in reading.contrasts for s in pair)]
    for row in choices:
        # Each option as the runtime compares it (option_texts), described and named only.
        out.append(row.text)
        out += [text for key, description in row.options.items() for text in option_texts(key, description)]
        out += [text for key in row.options for text in option_texts(key, key)]
    return list(dict.fromkeys(out))


def score_rows_as_yes_no(scores) -> list[YesNoRow]:
    """Each score row as the head reads it today: a "how" question's top and bottom levels as its sides."""
    out = []
    for row in scores:
        if asks_yes_or_no(row.question):
            out.append(YesNoRow(row.domain, "score", row.text, row.question, 0))
        else:
            out.append(YesNoRow(row.domain, "score", row.text, row.question, 0, row.levels[-1], row.levels[0]))
    return out


# --- fitting ----------------------------------------------------------------------------------------------


def fit_yes_no(h: np.ndarray, r: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    model = LogisticRegression(C=10.0).fit(np.stack([h, r], axis=1), y)
    return float(model.coef_[0, 0]), float(model.coef_[0, 1]), float(model.intercept_[0])


def choice_distribution(reader: np.ndarray, cosine: np.ndarray, a: float, b: float) -> np.ndarray:
    z = a * reader + b * LABEL_SHARPNESS * cosine
    e = np.exp(z - z.max())
    return e / e.sum()


def fit_choice(rows: list[tuple[np.ndarray, np.ndarray, int]]) -> tuple[float, float]:
    """(a, b) of the options' softmax, by log loss of the answer over in-scope rows."""

    def loss(params):
        return -sum(np.log(choice_distribution(r, c, *params)[answer] + 1e-12) for r, c, answer in rows)

    return tuple(float(v) for v in minimize(loss, x0=[1.0, 0.5], method="Nelder-Mead").x)


def none_evidence(reader: np.ndarray, cosine: np.ndarray) -> np.ndarray:
    """What says no option fits: the best option's reader logit, and its similarity to the text."""
    return np.array([reader.max(), LABEL_SHARPNESS * cosine.max()])


def fit_none(evidence: np.ndarray, is_none: np.ndarray) -> tuple[list[float], float]:
    model = LogisticRegression(C=10.0).fit(evidence, is_none)
    return model.coef_[0].tolist(), float(model.intercept_[0])


def fit_temperature(rows: list[tuple[np.ndarray, int]]) -> float:
    def loss(params):
        t = np.exp(params[0])
        total = 0.0
        for r, answer in rows:
            z = r / t
            total -= z[answer] - z.max() - np.log(np.exp(z - z.max()).sum())
        return total

    return float(np.exp(minimize(loss, x0=[0.0], method="Nelder-Mead").x[0]))


def score_distribution(reader: np.ndarray, temperature: float) -> np.ndarray:
    z = reader / temperature
    e = np.exp(z - z.max())
    return e / e.sum()


# --- yes/no: the everyday rows and the 28 sets' together -----------------------------------------------------

#: What a question asks, as the kind classifier tells them apart (the everyday kinds and the 28 sets' families).
QUESTION_KINDS = ("topic", "attribute", "request", "quality", "passage")
SENTIMENT = ("sst2", "cr", "mpqa", "review_sentences", "yelp", "tweet_sentiment")


@dataclass
class YesNoTable:
    """Every held-out yes/no row of both sets: the head's and the reader's logits, and what judges them."""

    source: np.ndarray  # "everyday" or "corpus"
    # h and r are the head's and the reader's logits of the question's plain form (negation stripped)
    fold: np.ndarray
    domain: np.ndarray
    group: np.ndarray  # the everyday kind, or the corpus family
    question: list[str]  # the question without its negation, as the kind classifier reads it
    kind: np.ndarray  # the kind the question was written as (negated everyday questions: "negated")
    negated: np.ndarray  # whether the runtime reads the question as negated (``strip_negation``)
    h: np.ndarray
    r: np.ndarray
    y: np.ndarray
    #: whether the 28 sets' questions asked the other way round read as negated (False for everyday rows)
    negation_read: np.ndarray
    #: the reader's logit of a 28 sets' question asked the other way round (NaN for everyday rows)
    r_turned: np.ndarray
    #: the reader's logit of a negated everyday question as asked (NaN for the others)
    r_asked: np.ndarray
    vectors: np.ndarray
    #: how the runtime reads a negated question (``_questions.NEGATED_READS``): both forms, or one
    negated_reads: str

    def reading(self, rows: np.ndarray, pi: np.ndarray) -> np.ndarray:
        """The reader's evidence for the plain form of ``rows``, as the runtime makes it: a negated question's
        from both its readings or from one (``negated_reading``), ``pi`` the kind classifier's probabilities of
        ``rows``."""
        r, asked = self.r[rows], self.r_asked[rows]
        topic = pi[:, QUESTION_KINDS.index("topic")]
        return np.where(np.isnan(asked), r, negated_reading(r, np.nan_to_num(asked), topic, self.negated_reads))

    def fit(self, rows: np.ndarray) -> Blender:
        """The blend fitted on the plain form of ``rows`` (a negated question's answer turned round)."""
        kinds = KindClassifier.fit(self, rows)
        pi = kinds.probabilities(self.vectors[rows])
        y = np.where(self.negated[rows], 1 - self.y[rows], self.y[rows])
        return Blender.fit(kinds, pi, self.h[rows], self.reading(rows, pi), y)

    def cross_fitted(self) -> dict[str, np.ndarray]:
        """Each fold's rows answered by the blend fitted on the other folds, as the runtime answers them."""
        out = {
            name: np.full(len(self.y), np.nan) for name in ("blend", "global", "kind", "turned", "turned, plain only")
        }
        turn = np.where(self.negated, -1.0, 1.0)  # a negated question: its plain form's answer turned round
        for k in np.unique(self.fold):
            fit, test = self.fold != k, self.fold == k
            blender = self.fit(fit)
            pi = blender.kinds.probabilities(self.vectors[test])
            out["kind"][test] = pi.argmax(axis=1)  # the kind the classifier reads, for report_kinds
            plain = blender.probability(pi, self.h[test], self.reading(test, pi))
            out["blend"][test] = np.where(self.negated[test], 1 - plain, plain)
            y = np.where(self.negated[fit], 1 - self.y[fit], self.y[fit])
            a, b, c = fit_yes_no(self.h[fit], self.r[fit], y)
            plain = sigmoid(a * self.h[test] + b * self.r[test] + c)
            out["global"][test] = np.where(self.negated[test], 1 - plain, plain)
            # The 28 sets' questions asked the other way round, as the runtime answers them: the plain form's
            # blend turned round, its reader evidence from both readings or one (``negated_reading``).
            turned = test & (self.source == "corpus")
            if turned.any():
                kinds = pi[(self.source == "corpus")[test]]  # the test rows' kinds, of the turned ones
                topic = kinds[:, QUESTION_KINDS.index("topic")]
                reading = negated_reading(self.r[turned], self.r_turned[turned], topic, self.negated_reads)
                out["turned"][turned] = 1 - blender.probability(kinds, self.h[turned], reading)
                out["turned, plain only"][turned] = 1 - blender.probability(kinds, self.h[turned], self.r[turned])
        out["head"] = sigmoid(turn * self.h)
        out["reader"] = sigmoid(turn * self.r)
        return out


@dataclass
class KindClassifier:
    """A logistic regression over the MiniLM vector of a question (its negation stripped): which kind it is."""

    weights: np.ndarray
    bias: np.ndarray

    @classmethod
    def fit(cls, table: YesNoTable, rows: np.ndarray) -> KindClassifier:
        labelled = rows & (table.kind != "negated")
        questions: dict[str, tuple[np.ndarray, str]] = {}
        for i in np.flatnonzero(labelled):
            questions.setdefault(table.question[i], (table.vectors[i], table.kind[i]))
        x = np.stack([v for v, _ in questions.values()])
        labels = [QUESTION_KINDS.index(kind) for _, kind in questions.values()]
        model = LogisticRegression(C=KIND_C, max_iter=2000).fit(x, labels)
        weights = np.zeros((len(QUESTION_KINDS), x.shape[1]))
        bias = np.full(len(QUESTION_KINDS), -30.0)  # a kind never seen in training is never predicted
        weights[model.classes_] = (
            model.coef_ if len(model.classes_) > 2 else np.stack([-model.coef_[0], model.coef_[0]])
        )
        bias[model.classes_] = (
            model.intercept_ if len(model.classes_) > 2 else [-model.intercept_[0], model.intercept_[0]]
        )
        return cls(weights, bias)

    def probabilities(self, vectors: np.ndarray) -> np.ndarray:
        z = vectors @ self.weights.T + self.bias
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)


@dataclass
class Blender:
    """``logit = sum_k pi_k (a_k * head + b_k * reader + c_k)``, pi the kind classifier's probabilities.

    It answers plain questions; a negated one is its plain form's answer turned round, as the head reads it.
    """

    kinds: KindClassifier
    head: np.ndarray
    reader: np.ndarray
    offset: np.ndarray

    @staticmethod
    def _features(pi: np.ndarray, h: np.ndarray, r: np.ndarray) -> np.ndarray:
        return np.concatenate([pi * h[:, None], pi * r[:, None], pi], axis=1)

    @classmethod
    def fit(cls, kinds, pi, h, r, y) -> Blender:
        model = LogisticRegression(C=10.0, fit_intercept=False, max_iter=5000)
        coef = model.fit(cls._features(pi, h, r), y).coef_[0].reshape(3, pi.shape[1])
        return cls(kinds, coef[0], coef[1], coef[2])

    def probability(self, pi: np.ndarray, h: np.ndarray, r: np.ndarray) -> np.ndarray:
        return sigmoid(self._features(pi, h, r) @ np.concatenate([self.head, self.reader, self.offset]))

    def to_dict(self) -> dict:
        return {
            "kinds": list(QUESTION_KINDS),
            "kind_weights": np.round(self.kinds.weights, 6).tolist(),
            "kind_bias": np.round(self.kinds.bias, 6).tolist(),
            "head": np.round(self.head, 6).tolist(),
            "reader": np.round(self.reader, 6).tolist(),
            "offset": np.round(self.offset, 6).tolist(),
        }


def corpus_head(data: Path, store: VectorStore, rows) -> np.ndarray:
    """The head's calibrated logit of each corpus row, trained without the row's domain, as ``train.py`` judges it."""
    store.ensure(strings(rows, []))
    x, kinds, *_ = train.cached_features(rows, store, 0)
    y = np.array([row.label for row in rows])
    domains = np.array([row.domain for row in rows])
    families = np.array([row.family for row in rows])
    fold_heads = train.train_folds(x, y, kinds, families, domains, list(dict.fromkeys(domains)), 0)
    held = train.held_out_logits(fold_heads, x, kinds, domains)
    plain = np.zeros(len(rows))
    for name in dict.fromkeys(domains):
        test = domains == name
        plain[test] = train.calibrate(held, y, kinds, ~test & ~np.isnan(held), test, kinds[test])
    return logit(plain)


def _folds(rows, folds: dict[int, dict]) -> dict[str, int]:
    """Each domain's fold for the cross-fitting: its training fold, or its own where only one fold's file is read
    (a blend fitted on the other folds needs another fold; the reader is still held out of every row it answers)."""
    domains = [row.domain for row in rows]
    if len(folds) == 1:
        return {domain: i for i, domain in enumerate(sorted(set(domains)))}
    return everyday.fold_of(domains)


def yes_no_table(
    data: Path, yes_no, folds: dict[int, dict], store: VectorStore, heads, corpus: bool, negated_reads: str
) -> YesNoTable:
    columns: dict[str, list] = defaultdict(list)

    def add(
        source,
        fold,
        row_domain,
        group,
        negated,
        question,
        kind,
        h,
        r,
        y,
        negation_read=False,
        r_turned=np.nan,
        r_asked=np.nan,
    ):
        for name, value in (
            ("source", source),
            ("fold", fold),
            ("domain", row_domain),
            ("group", group),
            ("question", question),
            ("kind", kind),
            ("negated", negated),
            ("h", h),
            ("r", r),
            ("y", y),
            ("negation_read", negation_read),
            ("r_turned", r_turned),
            ("r_asked", r_asked),
        ):
            columns[name].append(value)

    fold_of = _folds(yes_no, folds)
    h = head_logits([YesNoRow(r.domain, r.kind, r.text, r.question, r.label) for r in yes_no], store, heads)
    entries = {}
    for record in folds.values():
        entries.update(_checked(record["yes_no"], yes_no, lambda r: everyday.row_key(r.question, r.text), "yes/no"))
    for i, row in enumerate(yes_no):
        if i in entries:
            plain, negated = strip_negation(row.question)
            # the plain form's logits: the head's turned back, the reader's asked of the plain question (and of a
            # negated one, its reading as asked beside it)
            entry = entries[i]
            h_plain, r_plain = (-h[i], entry["plain_logit"]) if negated else (h[i], entry["logit"])
            add(
                "everyday",
                fold_of[row.domain],
                row.domain,
                row.kind,
                negated,
                plain,
                row.kind,
                h_plain,
                r_plain,
                row.label,
                r_asked=entry["logit"] if negated else np.nan,
            )
    corpus_rows = yes_no_rows(data, 0)
    corpus_entries = {}
    for record in folds.values():
        corpus_entries.update(
            _checked(record["corpus"], corpus_rows, lambda r: everyday.row_key(r.question, r.text), "corpus")
        )
    if corpus_entries and corpus:
        corpus_fold = _folds(corpus_rows, folds)
        plain_h = corpus_head(data, store, corpus_rows)
        for i, entry in sorted(corpus_entries.items()):
            row = corpus_rows[i]
            kind = "topic" if row.family == "topic" else "passage" if row.family == "passage" else "attribute"
            question = read_yes_no(row.question, row.true, row.false).question
            add(
                "corpus",
                corpus_fold[row.domain],
                row.domain,
                row.family,
                False,
                question,
                kind,
                plain_h[i],
                entry["logits"][0],
                row.label,
                strip_negation(negate(row.question))[1],
                entry["logits"][1],
            )
    store.ensure(list(dict.fromkeys(columns["question"])))
    arrays = {name: np.array(values) for name, values in columns.items() if name != "question"}
    return YesNoTable(
        question=columns["question"], vectors=store.of(columns["question"]), negated_reads=negated_reads, **arrays
    )


def _shown(p: np.ndarray, y: np.ndarray) -> str:
    return "{accuracy:.3f} / {auroc:.3f} / {ece:.3f}".format(**train.metrics(p, y))


def report_everyday(table: YesNoTable, p: dict[str, np.ndarray]) -> None:
    mine = table.source == "everyday"
    print("\nEveryday yes/no, leave-one-domain-out (accuracy / AUROC / ECE at 0.5)")
    print(f"{'kind':12} {'rows':>5}  {'head':22} {'reader':22} {'one blend':22} {'blend by kind':22}")
    for name in (*KINDS, "all"):
        rows = mine & ((table.group == name) if name != "all" else True)
        shown = [_shown(q[rows], table.y[rows]) for q in (p["head"], p["reader"], p["global"], p["blend"])]
        print(f"{name:12} {rows.sum():5d}  " + " ".join(f"{v:22}" for v in shown))
    per_domain = []
    for d in dict.fromkeys(table.domain[mine]):
        rows = mine & (table.domain == d)
        per_domain.append(f"{d} {train.metrics(p['blend'][rows], table.y[rows])['accuracy']:.3f}")
    print("per domain (blend by kind, accuracy):", ", ".join(per_domain))


def report_kinds(table: YesNoTable, p: dict[str, np.ndarray]) -> None:
    """How often the kind classifier, fitted without the row's fold, reads the kind a question was written as.

    Negated everyday questions are left out: they are read as their plain form, whose kind is not labelled.
    """
    print("\nKind of question read by the classifier, leave-one-domain-out (share of rows, and of distinct questions)")
    labelled = table.kind != "negated"
    for source in ("everyday", "corpus"):
        mine = labelled & (table.source == source)
        if not mine.any():
            continue
        parts = []
        for name in QUESTION_KINDS:
            rows = mine & (table.kind == name)
            if rows.any():
                right = p["kind"][rows] == QUESTION_KINDS.index(name)
                parts.append(f"{name} {right.mean():.3f} ({rows.sum()})")
        right = p["kind"][mine] == np.array([QUESTION_KINDS.index(k) for k in table.kind[mine]])
        questions = {}
        for i, ok in zip(np.flatnonzero(mine), right, strict=True):
            questions[table.question[i]] = ok
        print(
            f"{source:9} rows {right.mean():.3f}, questions {np.mean(list(questions.values())):.3f}: "
            + ", ".join(parts)
        )


def report_corpus(table: YesNoTable, p: dict[str, np.ndarray]) -> None:
    mine = table.source == "corpus"
    if not mine.any():
        return
    print("\nThe 28 sets, leave-one-domain-out (accuracy / AUROC / ECE at 0.5; up to 300 rows a domain and family)")
    print(f"{'held out':28} {'rows':>5}  {'head':22} {'reader':22} {'blend by kind':22}")
    groups: dict[str, list[str]] = defaultdict(list)
    for d, f in dict.fromkeys(zip(table.domain[mine], table.group[mine], strict=True)):
        rows = mine & (table.domain == d) & (table.group == f)
        y = table.y[rows]
        acc = {name: train.metrics(p[name][rows], y)["accuracy"] for name in ("head", "blend")}
        shown = [_shown(p[name][rows], y) for name in ("head", "reader", "blend")]
        print(f"{d + ' (' + f + ')':28} {rows.sum():5d}  " + " ".join(f"{v:22}" for v in shown))
        family = (
            "topic" if f == "topic" else "sentiment" if d in SENTIMENT else "passage" if f == "passage" else "other"
        )
        groups[family].append((acc["head"], acc["blend"]))
    for family, pairs in groups.items():
        head, blend = np.mean(pairs, axis=0)
        print(f"  {family:10} mean accuracy over {len(pairs)} domains: head {head:.3f}, blend {blend:.3f}")
    print(
        f"  asked the other way round (_strings.negate): {table.negation_read[mine].mean():.1%} read as negated; "
        "the blend's accuracy / AUROC / ECE on the plain questions, and on the turned ones answered from both "
        "readings (1 - p of the plain question's blend in brackets):"
    )
    for family in ("topic", "attribute", "passage"):
        rows = mine & (table.group == family)
        if rows.any():
            plain, turned, only = (
                _shown(p[name][rows], y)
                for name, y in (
                    ("blend", table.y[rows]),
                    ("turned", 1 - table.y[rows]),
                    ("turned, plain only", 1 - table.y[rows]),
                )
            )
            print(f"    {family:10} {plain}, turned {turned} ({only})")


# --- choice and score -------------------------------------------------------------------------------------


def _choice_rows(choices, having: dict[int, dict], store: VectorStore, kind: str) -> list[tuple]:
    """(row, reader logits, cosines, answer index or -1 for none) of every choice row a fold file answers."""
    entries = {}
    for record in having.values():
        entries.update(_checked(record[kind], choices, lambda r: everyday.row_key(r.question, r.text), kind))
    rows = []
    for i, row in enumerate(choices):
        if i not in entries:
            continue
        keys = list(row.options)
        # Named only, an option is its name as the caller wrote it (classify's list of labels: each its own
        # description); else its name and its description, as the runtime compares them (option_texts).
        described = keys if kind == "choice_bare" else list(row.options.values())
        options = np.stack([option_vector(store.of(list(option_texts(k, d)))) for k, d in zip(keys, described)])
        cosine = store.of([row.text]) @ options.T
        answer = keys.index(row.answer) if row.answer in keys else -1
        rows.append((row, np.array(entries[i]["logits"]), cosine[0], answer))
    return rows


def _fit_choice_blend(subset) -> tuple[float, float, tuple[list[float], float]]:
    a, b = fit_choice([(r, c, y) for _, r, c, y in subset if y >= 0])
    # Fitted on every row with its answer in or out of scope, "none" offered or not: the evidence is the same.
    none = fit_none(np.stack([none_evidence(r, c) for _, r, c, _ in subset]), np.array([y < 0 for *_, y in subset]))
    return a, b, none


#: The most in-scope accuracy a "none" threshold may cost where the option is offered, on the rows it is set on.
NONE_LOSS = 0.04
NONE_SHIFTS = np.arange(-1.5, 1.01, 0.125)


def none_shift(rows, fitted) -> float:
    """The shift of the none map's logit that finds the most "none" rows of ``rows`` while in-scope accuracy
    where "none" is offered falls by at most ``NONE_LOSS``: the map is fitted by log loss, which sets no
    threshold for a reader's logits as they are."""
    a, b, (c, d) = fitted
    offered = [t for t in rows if t[0].none_text]
    # What does not move with the shift, once: each row's best option, its share, and the none map's logit.
    p = [choice_distribution(r, cosine, a, b) for _, r, cosine, _ in offered]
    best_share = np.array([q.max() for q in p])
    none_logit = np.array([np.dot(c, none_evidence(r, cosine)) + d for _, r, cosine, _ in offered])
    answer = np.array([t[3] for t in offered])
    right = np.array([int(np.argmax(q)) for q in p]) == answer
    best = (0.0, -1.0)
    for shift in NONE_SHIFTS:
        none = sigmoid(none_logit + shift)
        says_none = none > (1 - none) * best_share
        recall = says_none[answer < 0].mean()
        lost = right[answer >= 0].mean() - (right & ~says_none)[answer >= 0].mean()
        if lost <= NONE_LOSS and recall > best[1]:
            best = (float(shift), float(recall))
    return best[0]


def choice_table(
    choices, folds: dict[int, dict], store: VectorStore, bare: bool = False, none_threshold: bool = False
) -> dict:
    """Choice figures, cross-fitted by fold; returns the blend fitted on every fold.

    ``bare``: the options named only ("Which team? billing", as a caller who passes a list of labels asks),
    from the fold files' ``choice_bare`` logits, the bi-encoder comparing the text with each option's name;
    beside its own blend, the blend fitted on described options, as such a choice was answered before.
    Where only one fold has them, the blends are cross-fitted by domain within it instead (``_folds``).
    ``none_threshold``: the blend returned has its "none" map shifted by ``none_shift`` (the lines "…, its
    threshold set on the rest" judge that rule), for a reader whose log-loss map says "none" too readily.
    """
    kind = "choice_bare" if bare else "choice"
    having = {k: record for k, record in folds.items() if kind in record}
    if not having:
        return {}
    fold_of = _folds(choices, having)
    rows = _choice_rows(choices, having, store, kind)
    described = _choice_rows(choices, having, store, "choice") if bare else []
    correct = defaultdict(list)
    per_domain: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for k in sorted({fold_of[row.domain] for row, *_ in rows}):
        train_rows = [t for t in rows if fold_of[t[0].domain] != k] or rows
        fitted = _fit_choice_blend(train_rows)
        before = _fit_choice_blend([t for t in described if fold_of[t[0].domain] != k]) if bare else None
        a, b, (c, d) = fitted
        shifted, thresholded = (a, b, (c, d + none_shift(train_rows, fitted))), defaultdict(list)
        for row, r, cosine, answer in (t for t in rows if fold_of[t[0].domain] == k):
            _judge_choice(correct, r, cosine, answer, bool(row.none_text), *fitted)
            if row.none_text:
                _judge_choice(per_domain[row.domain], r, cosine, answer, True, *fitted)
                _judge_choice(thresholded, r, cosine, answer, True, *shifted)
            if before:
                _judge_choice(correct, r, cosine, answer, bool(row.none_text), *before, prefix="described fit: ")
        for name in ("in scope, none offered", "none recall"):
            correct[f"{name}, its threshold set on the rest"] += thresholded[name]
    print(f"\nEveryday choice{', options named only' if bare else ''}, leave-one-domain-out (accuracy)")
    for name, hits in correct.items():
        print(f"  {name:50} {np.mean(hits):.3f} ({len(hits)} rows)")
    report_none_by_domain(per_domain)
    fitted = _fit_choice_blend(rows)
    a, b, (c, d) = fitted
    # With none_threshold, shipped with its "none" threshold set as each fold's is above, on every fold's rows.
    shift = none_shift(rows, fitted) if none_threshold else 0.0
    return {"reader": a, "cosine": b, "none_best": c[0], "none_cosine": c[1], "none_offset": d + shift}


def report_none_by_domain(per_domain: dict[str, dict[str, list]]) -> None:
    """"None" offered, domain by domain, worst loss first: its recall, and the in-scope accuracy it costs (the
    in-scope rows right without "none" and sent to it). A mean hides a domain whose logits sit elsewhere."""
    if not per_domain:
        return
    print('  "none" offered, by held-out domain (worst first)      none recall   in scope lost')
    lines = []
    for domain, judged in per_domain.items():
        lost = np.mean(judged["in scope, none offered, without none"]) - np.mean(judged["in scope, none offered"])
        lines.append((lost, domain, np.mean(judged["none recall"]), len(judged["none recall"])))
    for lost, domain, recall, count in sorted(lines, reverse=True):
        print(f"    {domain:50} {recall:.3f} ({count:2}) {100 * lost:6.1f} points")


def _judge_choice(correct, r, cosine, answer, none_offered, a, b, none, prefix="") -> None:
    c, d = none
    best_bi = int(np.argmax(cosine))
    p = choice_distribution(r, cosine, a, b)
    if answer >= 0:
        correct[prefix + "bi-encoder in scope"].append(best_bi == answer)
        correct[prefix + "reader in scope"].append(int(np.argmax(r)) == answer)
        correct[prefix + "blend in scope"].append(int(np.argmax(p)) == answer)
    if none_offered:
        none = float(sigmoid(np.dot(c, none_evidence(r, cosine)) + d))
        says_none = none > (1 - none) * p.max()
        if answer < 0:
            correct[prefix + "none recall"].append(says_none)
        else:
            correct[prefix + "in scope, none offered"].append(not says_none and int(np.argmax(p)) == answer)
            correct[prefix + "in scope, none offered, without none"].append(int(np.argmax(p)) == answer)


def score_levels(reader: np.ndarray, head: float, a: float, b: float) -> np.ndarray:
    """A score question's distribution: ``softmax(a * reader_i + b * position_i * logit(head))``.

    ``position_i`` runs from -0.5 (the lowest level) to 0.5 (the highest): the head's contrast of the two
    ends tilts the reader's reading of each level towards the end it favours.
    """
    position = np.linspace(-0.5, 0.5, len(reader))
    z = a * reader + b * position * float(logit(head))
    e = np.exp(z - z.max())
    return e / e.sum()


def fit_score(rows: list[tuple[np.ndarray, float, int]]) -> tuple[float, float]:
    def loss(params):
        return -sum(np.log(score_levels(r, h, *params)[answer] + 1e-12) for r, h, answer in rows)

    return tuple(float(v) for v in minimize(loss, x0=[0.7, 1.0], method="Nelder-Mead").x)


def score_table(scores, folds: dict[int, dict], store: VectorStore, heads) -> None:
    fold_of = _folds(scores, folds)
    entries = {}
    for record in folds.values():
        entries.update(_checked(record["score"], scores, lambda r: everyday.row_key(r.question, r.text), "score"))
    known = [i for i in range(len(scores)) if i in entries]
    if not known:
        return {}
    head = dict(zip(known, sigmoid(head_logits(score_rows_as_yes_no([scores[i] for i in known]), store, heads))))
    rows = {i: (np.array(entries[i]["logits"]), head[i], scores[i].answer) for i in known}
    hits = defaultdict(list)
    for k in sorted({fold_of[scores[i].domain] for i in known}):
        mine = [i for i in known if fold_of[scores[i].domain] == k]
        fitted = [rows[i] for i in known if fold_of[scores[i].domain] != k] or [rows[i] for i in mine]
        a, b = fit_score(fitted)
        temperature = fit_temperature([(r, answer) for r, _, answer in fitted])
        for i in mine:
            r, h, answer = rows[i]
            levels = len(r)
            # the previous answer: a binomial over the levels whose mean is the head's likelihood
            binomial = np.array([math.comb(levels - 1, j) * h**j * (1 - h) ** (levels - 1 - j) for j in range(levels)])
            for name, q in (
                ("head (binomial)", binomial),
                ("reader", score_distribution(r, temperature)),
                ("reader and head", score_levels(r, h, a, b)),
            ):
                hits[f"{name} exact"].append(int(np.argmax(q)) == answer)
                hits[f"{name} within one"].append(abs(int(np.argmax(q)) - answer) <= 1)
                hits[f"{name} log loss"].append(-np.log(q[answer] + 1e-12))
                # What a caller reads: ScoreAnswer.score is the expected level, rounded here to the nearest one.
                expected = int(np.rint(np.dot(np.arange(levels), q)))
                hits[f"{name} expected level exact"].append(expected == answer)
                hits[f"{name} expected level within one"].append(abs(expected - answer) <= 1)
    print("\nEveryday score, leave-one-domain-out (the most likely level, and the expected level rounded)")
    for name, h in hits.items():
        print(f"  {name:40} {np.mean(h):.3f} ({len(h)} rows)")
    # Shipped: the reader alone. The head's tilt helps satisfaction and sentiment scales and turns urgency and
    # severity round (it reads a complaint as the bottom of every scale), for the same accuracy held out.
    return {"reader": 1.0 / fit_temperature([(r, answer) for r, _, answer in rows.values()])}


# --- the tables -------------------------------------------------------------------------------------------


def shipped_defaults(heldout: Path | None, negated_reads: str | None) -> tuple[Path, str]:
    """The held-out folder and the rule for negated questions, each the shipped blend's unless given: by
    default the tables and the blend are the shipped reader's."""
    shipped = json.loads(find_blend().read_text(encoding="utf-8"))
    return heldout or REPO / shipped["heldout"], negated_reads or shipped["yes_no"]["negated_reads"]


class Loaded(NamedTuple):
    """What every table reads: the fold files, the everyday rows, their MiniLM vectors and the shipped heads."""

    folds: dict[int, dict]
    everyday: tuple  # (yes/no, choice, score) rows
    store: VectorStore
    heads: dict[str, DecisionHead]


def load(heldout: Path, everyday_data: Path) -> Loaded:
    folds = load_folds(heldout)
    if not folds:
        raise SystemExit(f"no held-out predictions in {heldout}: run cross_encoder.py --fold K first")
    missing = sorted(set(range(everyday.FOLDS)) - set(folds))
    if missing:
        print(f"folds {missing} are not trained yet: their domains are left out of the tables below")
    rows = everyday.load(everyday_data)
    store = VectorStore(train.CACHE / "minilm.npz")
    store.ensure(everyday_strings(*rows))
    return Loaded(folds, rows, store, DecisionHead.load_all(find_decision_head()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=HERE.parents[1] / "shared/data/decisions")
    parser.add_argument("--everyday", type=Path, default=everyday.DEFAULT_DATA)
    parser.add_argument("--no-write", action="store_true", help="print the tables; leave assets/blend.json alone")
    parser.add_argument(
        "--blend-out",
        type=Path,
        default=ASSETS / "blend.json",
        help="where the blend goes (default the shipped assets/blend.json; elsewhere for a trial)",
    )
    parser.add_argument(
        "--heldout",
        type=Path,
        help="the folder of fold-K.json files the blend is fitted on (default: the shipped blend's, as blend.json "
        "records it)",
    )
    parser.add_argument(
        "--second-reader",
        type=Path,
        help="the fold files of a second reader that answers options named only and score levels in place of "
        "the first (a trial of two readers, each for the shapes it reads best; with --no-write only)",
    )
    parser.add_argument("--everyday-only", action="store_true", help="leave the 28 sets' rows out (a quick look)")
    parser.add_argument(
        "--none-threshold",
        action="store_true",
        help='ship the "none" map shifted to the most recall at <= NONE_LOSS lost in scope (none_shift)',
    )
    parser.add_argument(
        "--negated-reads",
        choices=NEGATED_READS,
        help='how the runtime reads a negated question: "both" its forms, or "one" of them (reads_as_asked: '
        "a reader that costs twice MiniLM's a read); default: as the shipped blend.json does",
    )
    args = parser.parse_args()
    if args.second_reader and not args.no_write:
        # The runtime reads every shape with one reader: a blend fitted on another's logits must not ship.
        parser.error("--second-reader prints the tables only: add --no-write")
    args.heldout, args.negated_reads = shipped_defaults(args.heldout, args.negated_reads)
    folds, (yes_no, choices, scores), store, heads = load(args.heldout, args.everyday)
    # The reader of options named only and of score levels: the first, unless a second is tried.
    names_and_levels = load_folds(args.second_reader) if args.second_reader else folds
    table = yes_no_table(args.data, yes_no, folds, store, heads, not args.everyday_only, args.negated_reads)
    p = table.cross_fitted()
    report_everyday(table, p)
    report_kinds(table, p)
    report_corpus(table, p)

    held = args.heldout.resolve()
    blend = {
        # Relative to the checkout, as shipped; a folder outside it (a trial's, read with --no-write) whole.
        "heldout": held.relative_to(REPO).as_posix() if held.is_relative_to(REPO) else str(held),
        "yes_no": {**table.fit(np.ones(len(table.y), bool)).to_dict(), "negated_reads": args.negated_reads},
    }
    blend["choice"] = choice_table(choices, folds, store, none_threshold=args.none_threshold)
    # Options named only (a caller's list of labels) have a blend of their own, from the folds that read them.
    bare = choice_table(choices, names_and_levels, store, bare=True, none_threshold=args.none_threshold)
    if bare:
        blend["choice_bare"] = bare
    blend["score"] = score_table(scores, names_and_levels, store, heads)
    print(f"\nshipped yes/no blend: {json.dumps(blend['yes_no'])[:300]}")
    print(f"shipped choice blend: {json.dumps(blend['choice'])}")
    print(f"shipped score blend: {json.dumps(blend['score'])}")
    if bare:
        print(f"shipped choice blend, options named only: {json.dumps(bare)}")
    if not args.no_write and not args.everyday_only:
        path = args.blend_out
        path.write_text(json.dumps(blend, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {path} (sha256 {hashlib.sha256(path.read_bytes()).hexdigest()})")


if __name__ == "__main__":
    main()

"""Train the decision head, judge it leave-one-domain-out, and write the shipped weights.

    python training/train.py [--data ../shared/data/decisions] [--out src/decirank/backends/local/assets]
                             [--folds all|none|DOMAIN,...] [--seed 0]

Top to bottom:

1. questions from the development sets (``corpus.py``), each with its domain;
2. MiniLM vectors of every string, from the runtime's own encoder, kept in
   ``training/.cache/`` so a second run (or a run after an interruption) only
   encodes what is new;
3. for every domain: the head trained on all the other domains, then its
   answers on the held-out one, calibrated by a temperature fitted on the
   other domains' held-out answers; the table of these figures is what the
   README quotes;
4. the shipped head: trained on every domain, its temperature fitted on the
   pooled held-out answers of step 3, written to ``decision_head.npz``.

Everything random is drawn from ``--seed``; the same data gives the same weights.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import sys
import time
import zlib
from collections import defaultdict
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

sys.path.insert(0, str(Path(__file__).parent))
from _strings import negate, strings
from corpus import ATTRIBUTE, PASSAGE, by_domain, choice_rows, yes_no_rows
from corpus import TOPIC as TOPIC_FAMILY
from vectors import VectorStore

from decirank.backends.local.runtime import (
    BACKGROUND_TOPICS,
    CONTRAST,
    FEATURES,
    KINDS,
    SCALARS,
    TOPIC,
    DecisionHead,
    option_reading,
    question_kind,
    read_yes_no,
    swap_sides,
    yes_no_features,
)
from decirank.evaluation.trec import calibration

# --- settings (plain variables, overridable from the command line) ---------------------------------------
FAMILIES = (TOPIC_FAMILY, ATTRIBUTE, PASSAGE)
#: Learned axes of each head's bilinear term: attributes are read along learned axes; for topics and
#: statements the axes learned on some domains did not carry over to others (leave-one-domain-out).
RANKS = {"contrast": 16, "topic": 0, "statement": 0}
#: Inverse L2 strength of the logistic heads: a statement's similarities say little that carries over
#: (entailment, reading comprehension), so its head stays near the base rate unless the data insist.
PENALTIES = {"statement": 0.01}
#: Families each head learns from, where not all: attribute questions with nothing to contrast
#: ("Is this tweet ironic?") pulled the topic map away from topics.
TRAINED_ON = {"topic": ("topic",)}
#: Kinds answered by another kind's weights with a temperature of their own. A question about what a text is
#: like ("Is this tweet ironic?", "Is this sentence subjective?") is read as a topic, which ranks a little; how
#: far it carries over is measured on such questions alone, and the temperature says: not far. A head of
#: their own, trained on attribute questions, did no better leave-one-domain-out.
BORROWS = {"quality": "topic"}
#: Kinds whose logits get a temperature fitted on other domains' held-out answers. A logistic
#: regression on a few scalars trained across topic domains is already as calibrated as that makes it;
#: the bilinear head fits its training domains too closely without it.
RECALIBRATED = {"contrast", "quality", "statement"}
#: Every row of a kind trains a logistic regression (cheap); the bilinear head samples this many a domain.
DECAY = 1e-3  # L2 penalty of the bilinear factors
INIT = 0.05
RATE = 3e-3
BATCH = 128
EPOCHS = 8
#: Training rows drawn per domain for each fold (a fold's training set is every other domain).
TRAIN_PER_DOMAIN = 600
SEED = 0
CACHE = Path(__file__).parent / ".cache"


def features(rows, store: VectorStore, negated: bool = False) -> np.ndarray:
    """The head's input for each row, questions read as the runtime reads them."""
    background = store.of(list(BACKGROUND_TOPICS))
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        if negated:
            groups[(negate(row.question), row.false, row.true)].append(i)
        else:
            groups[(row.question, row.true, row.false)].append(i)
    out = np.zeros((len(rows), FEATURES), np.float32)
    flips = np.zeros(len(rows), bool)
    kinds = np.empty(len(rows), dtype=object)
    for (question, true, false), index in groups.items():
        reading = read_yes_no(question, true, false)
        texts = [rows[i].text for i in index]
        pairs = [(store.of([t])[0], store.of([f])[0]) for t, f in reading.contrasts]
        out[index] = yes_no_features(
            store.of(texts),
            store.of([reading.topic])[0],
            store.of([reading.question])[0],
            pairs,
            background,
            len(reading.topic.split()),
            store.tokens_of(texts),
        )
        flips[index] = reading.negated
        kinds[index] = question_kind(reading)
    return out, flips, kinds.astype(str)


def cached_features(rows, store: VectorStore, seed: int):
    """Features of the plain and the negated questions, kept until the code that makes them changes."""
    code = [(Path(__file__).parent / name).read_text() for name in ("corpus.py", "_strings.py")]
    # the reading and the routing, then the features
    code += [Path(inspect.getfile(f)).read_text() for f in (read_yes_no, yes_no_features)]
    digest = hashlib.blake2b("".join(code).encode() + str(seed).encode(), digest_size=8)
    path = CACHE / f"features-{digest.hexdigest()}.npz"
    if path.exists():
        with np.load(path) as archive:
            return tuple(archive[name] for name in ("x", "kinds", "x_negated", "flipped", "kinds_negated"))
    x, _, kinds = features(rows, store)
    x_negated, flipped, kinds_negated = features(rows, store, negated=True)
    np.savez(path, x=x, kinds=kinds, x_negated=x_negated, flipped=flipped, kinds_negated=kinds_negated)
    return x, kinds, x_negated, flipped, kinds_negated


def fit_head(x: np.ndarray, y: np.ndarray, seed: int, rank: int, penalty: float = 1.0) -> DecisionHead:
    """Adam on the log loss, L2 on the bilinear factors; minibatches in a seeded order.

    With no bilinear term it is a plain L2 logistic regression on the scalars, solved exactly.
    """
    rng = np.random.default_rng(seed)
    scalars = x[:, :SCALARS].astype(np.float64)
    mean, scale = scalars.mean(axis=0), scalars.std(axis=0) + 1e-6
    s = (scalars - mean) / scale
    if rank == 0:
        model = LogisticRegression(C=penalty, max_iter=2000).fit(s, y)
        empty = np.zeros((0, 384))
        return DecisionHead(
            {
                "mean": mean,
                "scale": scale,
                "w": model.coef_[0],
                "b": model.intercept_[0],
                "U": empty,
                "V": empty,
                "W": empty,
                "temperature": 1.0,
                "offset": 0.0,
                "odd": 0.0,
            }
        )
    text, topic, sides = (np.asarray(v, np.float64) for v in np.split(x[:, SCALARS:], 3, axis=1))
    params = {
        "w": np.zeros(SCALARS),
        "b": np.zeros(1),
        "U": rng.normal(0, INIT, (rank, 384)),
        "V": rng.normal(0, INIT, (rank, 384)),
        "W": rng.normal(0, INIT, (rank, 384)),
    }
    moments = {k: (np.zeros_like(v), np.zeros_like(v)) for k, v in params.items()}
    step = 0
    for _ in range(EPOCHS):
        order = rng.permutation(len(y))
        for start in range(0, len(y), BATCH):
            batch = order[start : start + BATCH]
            axes = text[batch] @ params["U"].T
            asked = topic[batch] @ params["V"].T + sides[batch] @ params["W"].T
            z = s[batch] @ params["w"] + params["b"][0] + (axes * asked).sum(axis=1)
            g = (1.0 / (1.0 + np.exp(-z)) - y[batch]) / len(batch)
            grads = {
                "w": s[batch].T @ g,
                "b": np.array([g.sum()]),
                "U": (g[:, None] * asked).T @ text[batch] + DECAY * params["U"],
                "V": (g[:, None] * axes).T @ topic[batch] + DECAY * params["V"],
                "W": (g[:, None] * axes).T @ sides[batch] + DECAY * params["W"],
            }
            step += 1
            for k, grad in grads.items():
                m, v = moments[k]
                m *= 0.9
                m += 0.1 * grad
                v *= 0.999
                v += 0.001 * grad**2
                params[k] -= RATE * (m / (1 - 0.9**step)) / (np.sqrt(v / (1 - 0.999**step)) + 1e-8)
    return DecisionHead(
        {
            "mean": mean,
            "scale": scale,
            "w": params["w"],
            "b": params["b"][0],
            "U": params["U"],
            "V": params["V"],
            "W": params["W"],
            "temperature": 1.0,
            "offset": 0.0,
            "odd": 0.0,
        }
    )


def train_heads(x, y, kinds, families, domains, allowed, seed: int, fold: str) -> dict[str, DecisionHead]:
    """One head per kind of question, each on the allowed rows of its kind (at most TRAIN_PER_DOMAIN a domain),
    or a copy of the head it borrows."""
    heads = {}
    for kind in KINDS:
        if kind in BORROWS:
            continue
        rows = np.flatnonzero(allowed & (kinds == kind) & np.isin(families, TRAINED_ON.get(kind, FAMILIES)))
        # A draw of its own for each head and fold, so that a change to one kind's rows leaves the others' alone.
        rng = np.random.default_rng([seed, KINDS.index(kind), zlib.crc32(fold.encode())])
        train = sample(rows, domains, TRAIN_PER_DOMAIN, rng) if RANKS[kind] else rows
        if kind == CONTRAST:
            # Each contrast also with its sides swapped and its answer turned round: the head learns
            # what is odd in the sides, and answers through that part alone (DecisionHead.raw_logits).
            features = np.concatenate([x[train], swap_sides(x[train])])
            heads[kind] = fit_head(features, np.concatenate([y[train], 1 - y[train]]), seed, RANKS[kind])
            heads[kind].weights["odd"] = np.float64(1.0)
        else:
            heads[kind] = fit_head(x[train], y[train], seed, RANKS[kind], PENALTIES.get(kind, 1.0))
    for kind, lender in BORROWS.items():
        heads[kind] = DecisionHead(dict(heads[lender].weights))
    return heads


def train_folds(x, y, kinds, families, domains, names, seed: int) -> dict[str, dict[str, DecisionHead]]:
    """For each named domain, the heads trained on every other domain."""
    return {name: train_heads(x, y, kinds, families, domains, domains != name, seed, name) for name in names}


def held_out_logits(fold_heads: dict[str, dict[str, DecisionHead]], x, kinds, domains) -> np.ndarray:
    """Raw logits of each fold's domain, answered by the heads trained without it (NaN outside the folds)."""
    out = np.full(len(x), np.nan)
    for name, heads in fold_heads.items():
        test = np.flatnonzero(domains == name)
        out[test] = answer(heads, x[test], kinds[test])
    return out


def answer(heads: dict[str, DecisionHead], x: np.ndarray, kinds: np.ndarray) -> np.ndarray:
    """Raw logits, each row by the head of its kind."""
    out = np.zeros(len(x))
    for kind, head in heads.items():
        rows = kinds == kind
        if rows.any():
            out[rows] = head.raw_logits(x[rows])
    return out


def calibrate(logits, y, kinds, fit_rows, test, test_kinds, fit_logits=None) -> np.ndarray:
    """Probabilities of the test rows, each kind's temperature fitted on ``fit_rows`` of that kind."""
    fit_logits = logits if fit_logits is None else fit_logits
    out = np.zeros(int(test.sum()))
    for kind in KINDS:
        mine = test_kinds == kind
        pooled = fit_rows & (kinds == kind)
        recalibrate = kind in RECALIBRATED and pooled.sum() > 20
        temperature, offset = platt(fit_logits[pooled], y[pooled], kind != CONTRAST) if recalibrate else (1.0, 0.0)
        out[mine] = sigmoid(logits[test][mine] / temperature + offset)
    return out


def measure(held_out, held_out_negated, y, kinds, kinds_negated, flipped, others, test, family: str) -> dict:
    """Held-out figures of the ``test`` rows, calibrated as the shipped heads are: a temperature per kind,
    fitted on the ``others`` rows' held-out answers (other domains)."""
    p = calibrate(held_out, y, kinds, others, test, kinds[test])
    p_plain_of_negated = calibrate(held_out_negated, y, kinds, others, test, kinds_negated[test], held_out)
    # A negated question's answer: 1 - the plain reading's, when the reading found the negation.
    p_negated = np.where(flipped[test], 1 - p_plain_of_negated, p_plain_of_negated)
    return {
        "family": family,
        **metrics(p, y[test]),
        "negated_accuracy": float(((p_negated >= 0.5) == (1 - y[test])).mean()),
        "negation_consistent": float((np.abs(p_negated - (1 - p)) <= 0.1).mean()),
    }


def platt(logits: np.ndarray, y: np.ndarray, offset: bool = True) -> tuple[float, float]:
    """(temperature, offset) with p = sigmoid(logit / temperature + offset), by log loss."""
    model = LogisticRegression(C=1e4, fit_intercept=offset).fit(logits[:, None], y)
    return 1.0 / float(model.coef_[0, 0]), float(model.intercept_[0]) if offset else 0.0


def sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def ece(p: np.ndarray, y: np.ndarray) -> float:
    """Expected calibration error, as ``decirank eval`` measures it (10 equal-width bins)."""
    return calibration(zip(p.tolist(), (y > 0.5).tolist()))[1]


def metrics(p: np.ndarray, y: np.ndarray) -> dict[str, float]:
    auroc = roc_auc_score(y, p) if 0 < y.sum() < len(y) else float("nan")
    return {"accuracy": float(((p >= 0.5) == y).mean()), "auroc": float(auroc), "ece": ece(p, y), "rows": len(y)}


def sample(index: np.ndarray, domains: np.ndarray, per_domain: int, rng: np.random.Generator) -> np.ndarray:
    chosen = []
    for domain in np.unique(domains[index]):
        members = index[domains[index] == domain]
        chosen.append(rng.choice(members, min(per_domain, len(members)), replace=False))
    return np.concatenate(chosen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("../shared/data/decisions"))
    parser.add_argument("--out", type=Path, default=Path("src/decirank/backends/local/assets"))
    parser.add_argument(
        "--no-write", action="store_true", help="measure only; leave the shipped weights and lodo.json alone"
    )
    parser.add_argument("--folds", default="all")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--report", type=Path, default=Path("training/lodo.json"))
    args = parser.parse_args()
    started = time.monotonic()
    rows = yes_no_rows(args.data, args.seed)
    choices = choice_rows(args.data, args.seed)
    store = VectorStore(CACHE / "minilm.npz")
    store.ensure(strings(rows, choices))
    x, kinds, x_negated, flipped, kinds_negated = cached_features(rows, store, args.seed)
    y = np.array([row.label for row in rows])
    domains = np.array([row.domain for row in rows])
    families = np.array([row.family for row in rows])
    names = (
        list(dict.fromkeys(domains)) if args.folds == "all" else [] if args.folds == "none" else args.folds.split(",")
    )

    fold_heads = train_folds(x, y, kinds, families, domains, names, args.seed)
    held_out = held_out_logits(fold_heads, x, kinds, domains)
    held_out_negated = held_out_logits(fold_heads, x_negated, kinds_negated, domains)
    for name in names:
        raw = metrics(sigmoid(held_out[domains == name]), y[domains == name])
        print(f"fold {name}: uncalibrated accuracy {raw['accuracy']:.3f} AUROC {raw['auroc']:.3f}")
    print(f"{len(names)} folds: {time.monotonic() - started:.0f} s", flush=True)

    report = {}
    for name in names:
        held = domains == name
        others = ~held & ~np.isnan(held_out)
        # A domain that asks questions of two families (tweet stance: "Is this tweet about feminism?" and
        # "Is this tweet against feminism?") is held out whole, and each family is measured on its own.
        for family in dict.fromkeys(families[held]):
            test = held & (families == family)
            multiple = len(set(families[held])) > 1
            report[f"{name} ({family})" if multiple else name] = measure(
                held_out, held_out_negated, y, kinds, kinds_negated, flipped, others, test, family
            )
    if report:
        print_table(report)
    if args.folds == "all" and not args.no_write:  # the record of the shipped recipe: every domain held out
        args.report.write_text(json.dumps(report, indent=1) + "\n")

    final = train_heads(x, y, kinds, families, domains, np.ones(len(rows), bool), args.seed, "")
    known = ~np.isnan(held_out)
    for kind, head in final.items():
        pooled = known & (kinds == kind)
        if kind in RECALIBRATED and pooled.any():
            temperature, offset = platt(held_out[pooled], y[pooled], kind != CONTRAST)
            head.weights["temperature"], head.weights["offset"] = np.float64(temperature), np.float64(offset)
        print(
            f"shipped {kind} head: temperature {head.weights['temperature']:.3f}, offset {head.weights['offset']:.3f}"
        )
    if not args.no_write:
        path = args.out / "decision_head.npz"
        DecisionHead.save_all(path, final)
        print(f"wrote {path} (sha256 {hashlib.sha256(path.read_bytes()).hexdigest()})")
    if args.folds != "none":
        topic_heads = {name: heads[TOPIC] for name, heads in fold_heads.items()}
        choice, scored = choice_report(choices, store, topic_heads, final[TOPIC], args.seed)
        print(json.dumps(choice, indent=1))
        nones, none_map = none_report(scored, store, args.seed)
        print("none of these, leave-one-domain-out:", json.dumps(nones, indent=1))
        (top, margin, options), offset = none_map.coef_[0], none_map.intercept_[0]
        print(
            f"none map: none_top={top:.3f}, none_margin={margin:.3f}, none_options={options:.3f}, none_offset={offset:.3f}"
        )
    print(f"wall time {time.monotonic() - started:.0f} s")


# --- choice and none ----------------------------------------------------------------------------------------

#: Share of a choice set's labels held out of the options to measure "none of these".
HOLD_OUT = 0.25


def option_logits(rows, store: VectorStore, head: DecisionHead) -> np.ndarray:
    """The head's raw logit of each row (all of one domain, so sharing options) against every option."""
    background = store.of(list(BACKGROUND_TOPICS))
    texts = [row.text for row in rows]
    vectors, tokens = store.of(texts), store.tokens_of(texts)
    columns = []
    for description in rows[0].options.values():
        reading = option_reading(description)
        features = yes_no_features(
            vectors,
            store.of([reading.topic])[0],
            store.of([reading.question])[0],
            [],
            background,
            len(reading.topic.split()),
            tokens,
        )
        columns.append(head.raw_logits(features))
    return np.column_stack(columns)


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def choice_report(choices, store: VectorStore, fold_heads: dict, final: DecisionHead, seed: int):
    """Zero-shot choice per choice domain, each judged by a head that never saw the domain.

    Returns the report and, per domain, (rows, head logits, cosines) for the "none" measure.
    """
    report, scored = {}, {}
    for domain, rows in by_domain(choices).items():
        logits = option_logits(rows, store, fold_heads.get(domain, final))
        cosines = store.of([row.text for row in rows]) @ store.of(list(rows[0].options.values())).T
        truth = np.array([list(row.options).index(row.label) for row in rows])
        scored[domain] = (rows, logits, cosines, truth)
        report[domain] = {"cosine": float((cosines.argmax(axis=1) == truth).mean())}
        for weight in COSINE_WEIGHTS:
            combined = logits + weight * cosines
            report[domain][f"head+{weight}cos"] = float((combined.argmax(axis=1) == truth).mean())
    return report, scored


#: The label map's sharpness (``_shapes.MAPS.label_sharpness``): a choice among labels is softmax(16.5 cos).
LABEL_SHARPNESS = 16.5
#: Random splits of each choice domain's labels, a quarter held out each time, for the "none" map.
NONE_SPLITS = 3


#: Texts of other domains added to each split as out of scope, per row of the domain's own: a question's
#: "none" meets both a neighbouring intent and a text from elsewhere (a movie review among banking intents).
FOREIGN_SHARE = 0.1


def none_features(cosines: np.ndarray, truth: np.ndarray, foreign: np.ndarray, seed: int):
    """With a quarter of the labels held out, plus texts of other domains: the none map's features, which
    rows are out of scope, which in-scope rows the options get right, and the best option's probability.

    ``foreign`` holds other domains' texts' cosines to this domain's options."""
    rng = np.random.default_rng(seed)
    labels = cosines.shape[1]
    held = rng.choice(labels, max(1, round(HOLD_OUT * labels)), replace=False)
    kept = np.setdiff1d(np.arange(labels), held)
    strangers = foreign[rng.choice(len(foreign), round(FOREIGN_SHARE * len(cosines)), replace=False)]
    cosines = np.concatenate([cosines, strangers])
    truth = np.concatenate([truth, np.full(len(strangers), -1)])
    similarity = cosines[:, kept]
    top = np.sort(similarity, axis=1)[:, ::-1]
    features = np.column_stack([top[:, 0], top[:, 0] - top[:, 1], np.full(len(top), np.log(len(kept)))])
    options = np.exp(LABEL_SHARPNESS * (similarity - top[:, :1]))
    options /= options.sum(axis=1, keepdims=True)
    out_of_scope = np.isin(truth, held) | (truth < 0)
    return features, out_of_scope, kept[similarity.argmax(axis=1)] == truth, options.max(axis=1)


def none_report(scored: dict, store: VectorStore, seed: int) -> tuple[dict, LogisticRegression]:
    """The "none of these" map: logistic on the best label's similarity, its lead and the number of options,
    judged leave-one-domain-out (out-of-scope recall, in-scope accuracy lost), then fitted on every domain."""
    splits = {}
    for domain, (rows, _, cosines, truth) in scored.items():
        options = store.of(list(rows[0].options.values()))
        others = [row.text for d, (rs, *_) in scored.items() if d != domain for row in rs]
        foreign = store.of(others) @ options.T
        splits[domain] = [none_features(cosines, truth, foreign, seed + 100 + k) for k in range(NONE_SPLITS)]

    def fit(domains) -> LogisticRegression:
        features = np.concatenate([f for d in domains for f, *_ in splits[d]])
        out_of_scope = np.concatenate([o for d in domains for _, o, *_ in splits[d]])
        return LogisticRegression(C=1.0, max_iter=1000).fit(features, out_of_scope)

    report = {}
    for domain, held in splits.items():
        model = fit([d for d in splits if d != domain])
        recall, lost = [], []
        for features, out_of_scope, right, best in held:
            none = model.predict_proba(features)[:, 1]
            chose_none = none > (1 - none) * best
            recall.append(chose_none[out_of_scope].mean())
            lost.append(right[~out_of_scope].mean() - (right & ~chose_none)[~out_of_scope].mean())
        report[domain] = {"out_of_scope_recall": float(np.mean(recall)), "in_scope_lost": float(np.mean(lost))}
    return report, fit(list(splits))


#: Weights of the cosine (times 16.5, the label map's sharpness) added to the head's option logits.
COSINE_WEIGHTS = (0.0, 8.0, 16.5, 33.0)


def print_table(report: dict) -> None:
    print(f"{'domain':26} {'family':10} {'rows':>5} {'acc':>6} {'auroc':>6} {'ece':>6} {'neg acc':>8} {'neg ok':>7}")
    for name, r in report.items():
        print(
            f"{name:26} {r['family']:10} {r['rows']:5d} {r['accuracy']:6.3f} {r['auroc']:6.3f} {r['ece']:6.3f}"
            f" {r['negated_accuracy']:8.3f} {r['negation_consistent']:7.3f}"
        )
    for family in dict.fromkeys(r["family"] for r in report.values()):
        members = [r for r in report.values() if r["family"] == family]
        print(
            f"{'mean ' + family:37} {np.mean([m['accuracy'] for m in members]):6.3f}"
            f" {np.mean([m['auroc'] for m in members]):6.3f} {np.mean([m['ece'] for m in members]):6.3f}"
            f"  worst acc {min(m['accuracy'] for m in members):.3f} worst ece {max(m['ece'] for m in members):.3f}"
        )


if __name__ == "__main__":
    main()

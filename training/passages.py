"""A passage reader: the shipped reader fine-tuned on TREC DL19's graded judgments, judged by five folds of queries.

    pip install -e '.[train]'
    python training/passages.py --fold 0       # train on the other four fifths of the queries, rerank fold 0
    python training/passages.py --fold every   # the five folds in turn (minutes a fold on one GPU)
    python training/passages.py --report       # the five-fold table from the committed held-out logits

The reranker that ships reads a query and a passage with the fused encoders
(MiniLM cosine and SPLADE); the reader (``cross_encoder.py``) reads a
question and a text together, but was never trained on whether a passage
answers a search. Here the four-layer reader starts from its shipped weights
(``assets/reader.npz``) and is fine-tuned on DL19's 43 queries, each with
BM25's top 100 passages (judged 0 to 3; a passage nobody judged counts 0, as
nDCG counts it): a query's passage of grade g is one softmax group with
``NEGATIVES`` of the query's passages graded below g, so the reader learns the
order of the grades, not a threshold.

``--fold K`` trains on the queries of the other four folds (``FOLDS``, a fixed
draw over the sorted query ids) and writes the reader's logit of every
passage of fold K's queries to ``training/heldout/passages/fold-K.json`` with
the seed, the recipe and the commit; its checkpoint (``cross_encoder.optimise``,
every 200 steps) lets a run started again resume. No weights ship
until the folds say the reader wins, and they do not (the reader alone
0.5205 nDCG@10, no blend above the fused encoders' 0.7018;
docs/experiments.md, "Passages read by the reader").

``--report`` prints nDCG@10 over all 43 queries, each reranked by a model that
never saw it: the fused encoders alone (the shipped ``rerank``), the reader
alone, and the two blended (the reader's logit added to the fused score's,
weighted and on the fused top ``TOP`` only), the blend's weight chosen on the
other four folds' queries. torch is needed to train (the ``train`` extra);
``--report`` needs only the runtime and ir-measures.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
DL19 = HERE.parents[1] / "shared" / "data" / "trec-dl19"
HELD_OUT = HERE / "heldout" / "passages"
READER = HERE.parent / "src" / "decirank" / "backends" / "local" / "assets" / "reader.npz"

FOLDS = 5
#: Passages graded below the one a group is made for, drawn from the same query's BM25 top 100.
NEGATIVES = 5
GROUPS_PER_STEP = 2
EPOCHS = 1.0
#: Lower than the reader's first training: it starts from a trained reader, not from MiniLM.
RATE = 3e-5
WARMUP = 50
#: DL19's passages are 63 words on average (about 85 tokens); the runtime reads a pair to 256 tokens.
MAX_TOKENS = 128
SEED = 0
#: How many of the fused encoders' best passages a blend reads (at most; DL19 gives 100 a query).
TOP = (20, 30, 50, 100)
WEIGHTS = np.round(np.arange(0.0, 2.01, 0.1), 2)


# --- the data --------------------------------------------------------------------------------------------


def load(data: Path) -> tuple[list[dict], dict[str, dict[str, int]]]:
    """DL19's queries (``qid``, ``query``, ``hits`` of ``docid`` and ``content``) and its graded judgments."""
    queries = []
    for entry in json.loads((data / "bm25_top100.json").read_text(encoding="utf-8")):
        hits = [{"docid": str(hit["docid"]), "content": hit["content"]} for hit in entry["hits"]]
        queries.append({"qid": str(entry["hits"][0]["qid"]), "query": entry["query"], "hits": hits})
    qrels: dict[str, dict[str, int]] = {}
    for line in (data / "qrels.txt").read_text(encoding="utf-8").splitlines():
        if line.strip():
            qid, _, docid, grade = line.split()
            qrels.setdefault(qid, {})[docid] = int(grade)
    return queries, qrels


def fold_of(queries: list[dict]) -> dict[str, int]:
    """Each query's fold: the sorted query ids shuffled once with a fixed seed, then dealt out in turn."""
    qids = sorted(query["qid"] for query in queries)
    random.Random(SEED).shuffle(qids)
    return {qid: i % FOLDS for i, qid in enumerate(qids)}


def groups(queries: list[dict], qrels: dict[str, dict[str, int]], rng: random.Random) -> list[list[tuple]]:
    """One softmax group per judged passage of grade g > 0: it first, then ``NEGATIVES`` of its query's
    passages graded below g (fewer where the query has fewer)."""
    out = []
    for query in queries:
        graded = [(hit["content"], qrels.get(query["qid"], {}).get(hit["docid"], 0)) for hit in query["hits"]]
        for text, grade in graded:
            if grade <= 0:
                continue
            below = [other for other, g in graded if g < grade]
            if below:
                chosen = rng.sample(below, min(NEGATIVES, len(below)))
                out.append([(query["query"], text), *((query["query"], other) for other in chosen)])
    return out


# --- training (torch) ------------------------------------------------------------------------------------


def train_fold(fold: int, args) -> None:
    import torch
    from transformers import AutoTokenizer

    sys.path.insert(0, str(HERE))
    import cross_encoder
    from bases import base_path

    cross_encoder.MAX_TOKENS = MAX_TOKENS
    queries, qrels = load(args.data)
    folds = fold_of(queries)
    training = [q for q in queries if folds[q["qid"]] != fold]
    held = [q for q in queries if folds[q["qid"]] == fold]
    seed = SEED + fold
    torch.manual_seed(seed)
    rng = random.Random(seed)
    path = base_path("minilm")
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = cross_encoder.CrossEncoder(path, layers=4).to(args.device)
    cross_encoder.imported(model, args.reader)
    epochs = [groups(training, qrels, rng) for _ in range(int(np.ceil(EPOCHS)))]
    plan = [g for epoch in epochs for g in rng.sample(epoch, len(epoch))]
    plan = plan[: int(len(epochs[0]) * EPOCHS)]
    steps = [plan[i : i + GROUPS_PER_STEP] for i in range(0, len(plan), GROUPS_PER_STEP)]
    print(f"fold {fold}: {len(training)} queries, {len(epochs[0])} groups an epoch, {len(steps)} steps", flush=True)

    def loss_of(chosen: list[list[tuple[str, str]]]) -> torch.Tensor:
        pairs = [pair for group in chosen for pair in group]
        inputs = {k: v.to(args.device) for k, v in cross_encoder.encode(tokenizer, pairs).items()}
        logits, at, losses = model(inputs), 0, []
        for group in chosen:  # the passage the group is made for is its first
            mine = logits[at : at + len(group)]
            at += len(group)
            losses.append(torch.nn.functional.cross_entropy(mine[None], mine.new_zeros(1, dtype=torch.long)))
        return torch.stack(losses).mean()

    # Named by the recipe and the fold, so a run started again resumes its own checkpoint and no other's.
    recipe = repr((fold, seed, NEGATIVES, GROUPS_PER_STEP, EPOCHS, RATE, WARMUP, MAX_TOKENS, args.reader.name))
    digest = hashlib.blake2b(recipe.encode("utf-8"), digest_size=4).hexdigest()
    checkpoint = cross_encoder.CACHE / f"passages-fold-{fold}-{digest}.pt"
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    cross_encoder.optimise(model, steps, loss_of, checkpoint, args.device, RATE, WARMUP)
    pairs = [(q["query"], hit["content"]) for q in held for hit in q["hits"]]
    read = cross_encoder.logits(model, tokenizer, pairs, args.device)
    answers, at = {}, 0
    for query in held:
        answers[query["qid"]] = {hit["docid"]: round(float(x), 4) for hit, x in zip(query["hits"], read[at:])}
        at += len(query["hits"])
    record = {
        "fold": fold,
        "seed": seed,
        "commit": cross_encoder.commit(),
        "recipe": {"negatives": NEGATIVES, "groups_per_step": GROUPS_PER_STEP, "epochs": EPOCHS, "rate": RATE,
                   "max_tokens": MAX_TOKENS, "start": args.reader.name},
        "training_seconds": round(time.monotonic() - started),
        "device": args.device,
        "logits": answers,
    }
    HELD_OUT.mkdir(parents=True, exist_ok=True)
    out = HELD_OUT / f"fold-{fold}.json"
    out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}", flush=True)


# --- the five-fold table ---------------------------------------------------------------------------------


def fused_scores(queries: list[dict]) -> dict[str, dict[str, float]]:
    """The shipped rerank's relevance score of every passage (the fused encoders), computed afresh each time
    (under a minute), so the table never compares against another model's."""
    import decirank

    scores = {}
    for query in queries:
        documents = [{"id": hit["docid"], "text": hit["content"]} for hit in query["hits"]]
        result = decirank.rerank(query["query"], documents, model="local", timeout=None)
        scores[query["qid"]] = {entry.id: entry.relevance_score for entry in result.results}
    return scores


def ndcg(qrels, run: dict[str, dict[str, float]]) -> float:
    import ir_measures
    from ir_measures import nDCG

    return ir_measures.calc_aggregate([nDCG @ 10], {q: qrels[q] for q in run}, run)[nDCG @ 10]


def logits_of(scores: dict[str, float]) -> dict[str, float]:
    """Each relevance score (a probability) as a logit, the scale the reader's logits add to."""
    return {d: float(np.log(max(p, 1e-6) / max(1 - p, 1e-6))) for d, p in scores.items()}


def blended(logit: dict[str, float], reader: dict[str, float], weight: float, top: int) -> dict[str, float]:
    """The fused score's logit plus ``weight`` times the reader's, over the fused top ``top``; the rest keep
    the fused order below them."""
    best = sorted(logit, key=logit.get, reverse=True)[:top]
    out = {d: s - 1e3 for d, s in logit.items()}
    out.update({d: logit[d] + weight * reader[d] for d in best})
    return out


def report(args) -> None:
    queries, qrels = load(args.data)
    folds = fold_of(queries)
    reader: dict[str, dict[str, float]] = {}
    trained = []
    for k in range(FOLDS):
        path = HELD_OUT / f"fold-{k}.json"
        if path.exists():
            reader.update(json.loads(path.read_text(encoding="utf-8"))["logits"])
            trained.append(k)
    if not trained:
        print(f"\nDL19 passages: no held-out logits in {HELD_OUT} (passages.py --fold K writes them)")
        return
    fused = fused_scores(queries)
    fused_logits = {qid: logits_of(scores) for qid, scores in fused.items()}
    judged = [q["qid"] for q in queries if folds[q["qid"]] in trained]
    print(f"\nDL19 passages, {FOLDS} folds of queries (folds {trained}: {len(judged)} of {len(queries)} queries)")
    print(f"  {'fused encoders (shipped rerank)':44} nDCG@10 {ndcg(qrels, {q: fused[q] for q in judged}):.4f}")
    print(f"  {'reader alone':44} nDCG@10 {ndcg(qrels, {q: reader[q] for q in judged}):.4f}")
    for top in TOP:
        run, chosen = {}, []

        def run_of(qids: list[str], weight: float) -> dict[str, dict[str, float]]:
            return {q: blended(fused_logits[q], reader[q], weight, top) for q in qids}

        for k in trained:
            rest = [q for q in judged if folds[q] != k] or judged
            weight = max(WEIGHTS, key=lambda w: ndcg(qrels, run_of(rest, w)))
            chosen.append(float(weight))
            run.update(run_of([q for q in judged if folds[q] == k], weight))
        label = f"blend on the fused top {top} (weights {chosen})"
        print(f"  {label:44} nDCG@10 {ndcg(qrels, run):.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DL19)
    parser.add_argument("--fold", help="0 to 4, or every")
    parser.add_argument("--report", action="store_true", help="print the five-fold table and write nothing")
    parser.add_argument("--reader", type=Path, default=READER, help="the exported reader to start from")
    parser.add_argument("--device", default="cuda" if _has_cuda() else "cpu")
    args = parser.parse_args()
    if args.fold is not None:
        for fold in range(FOLDS) if args.fold == "every" else [int(args.fold)]:
            train_fold(fold, args)
    if args.report or args.fold is None:
        report(args)


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


if __name__ == "__main__":
    main()

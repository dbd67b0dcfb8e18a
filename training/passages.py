"""A passage reader: the shipped reader fine-tuned on TREC DL19's graded judgments, judged by five folds of queries.

    pip install -e '.[train]'
    python training/passages.py --fold 0       # train on the other four fifths of the queries, rerank fold 0
    python training/passages.py --fold every   # the five folds in turn (minutes a fold on one GPU)
    python training/passages.py --report       # the five-fold table from the committed held-out logits
    python training/passages.py --pretrain     # first read questions and their passages (boolq, multirc,
                                               # pubmedqa), then --fold K --from-pretrained starts there

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
0.5205 nDCG@10, 0.5738 pretrained as below, no blend above the fused
encoders' 0.7018; docs/experiments.md, "Passages read by the reader").

``--pretrain`` first trains the reader on the 28 sets' question-and-passage
sets (``QA_SETS``: a question and the passage it was asked about, against
``NEGATIVES`` other passages of the pool, most of them the nearest by words,
as BM25 draws DL19's), none of them DL19's. ``--zero-shot`` writes that
reader's logits of every DL19 query as five fold files (it never trained on
any), ``--fold K --from-pretrained`` fine-tunes it on the other folds' queries
as above; ``--heldout`` names the folder either writes and ``--report`` reads.

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
sys.path.insert(0, str(HERE))  # the training scripts beside it (cross_encoder, bases), imported where torch is needed
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
#: The blend weights a fold chooses among (the reader's logits spread about five times the fused score's).
WEIGHTS = np.round(np.concatenate([[0.0, 0.01, 0.02, 0.05], np.arange(0.1, 2.01, 0.1)]), 2)
#: The 28 sets whose rows are a question asked about a passage: the pretraining's pairs (``--pretrain``).
QA_SETS = ("boolq", "multirc", "pubmedqa")
DECISIONS = HERE.parents[1] / "shared" / "data" / "decisions"
#: Of a pretraining group's negatives, how many are among the passages nearest its question by words (TF-IDF,
#: as BM25 finds DL19's candidates); the rest are drawn from the whole pool.
NEAREST_NEGATIVES = 3
#: The nearest passages the lexical negatives are drawn from.
NEAREST_POOL = 10
#: The pool's passages are longer than DL19's (boolq 82 words, pubmedqa 201, multirc 274).
PRETRAIN_TOKENS = 160
PRETRAIN_RATE = 3e-5


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


def qa_pairs(data: Path) -> list[tuple[str, str, str]]:
    """(question, passage, source) of every distinct question of ``QA_SETS``, whatever its yes/no label: a
    question was asked about its passage either way. A boolq passage's source is its article's title (two
    passages of one article may both answer), the others' the passage itself."""
    seen, out = set(), []
    for name in QA_SETS:
        for line in (data / f"{name}.jsonl").read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            key = (row["question"], row["text"])
            if key not in seen:
                seen.add(key)
                out.append((row["question"], row["text"], row.get("title") or row["text"]))
    return out


def pretraining_groups(pairs: list[tuple[str, str, str]], rng: random.Random) -> list[list[tuple[str, str]]]:
    """One softmax group per question: its passage first, then ``NEAREST_NEGATIVES`` of the passages nearest
    it by words and the rest of ``NEGATIVES`` drawn at random, none from the question's own source."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    passages = sorted({(text, source) for _, text, source in pairs})
    vectorizer = TfidfVectorizer(sublinear_tf=True, stop_words="english").fit([text for text, _ in passages])
    similarity = vectorizer.transform([q for q, _, _ in pairs]) @ vectorizer.transform([t for t, _ in passages]).T
    out = []
    for row, (question, text, source) in enumerate(pairs):
        scores = similarity.getrow(row).toarray()[0]
        nearest = [i for i in np.argsort(-scores)[: NEAREST_POOL + 5] if passages[i][1] != source][:NEAREST_POOL]
        chosen = rng.sample(nearest, min(NEAREST_NEGATIVES, len(nearest)))
        while len(chosen) < NEGATIVES:
            i = rng.randrange(len(passages))
            if passages[i][1] != source and i not in chosen:
                chosen.append(i)
        out.append([(question, text), *((question, passages[i][0]) for i in chosen)])
    return out


# --- training (torch) ------------------------------------------------------------------------------------


def group_loss(model, tokenizer, chosen: list[list[tuple[str, str]]], device: str):
    """The mean softmax loss of groups whose first pair is the one to rank first."""
    import torch

    import cross_encoder

    pairs = [pair for group in chosen for pair in group]
    inputs = {k: v.to(device) for k, v in cross_encoder.encode(tokenizer, pairs).items()}
    logits, at, losses = model(inputs), 0, []
    for group in chosen:
        mine = logits[at : at + len(group)]
        at += len(group)
        losses.append(torch.nn.functional.cross_entropy(mine[None], mine.new_zeros(1, dtype=torch.long)))
    return torch.stack(losses).mean()


def reader_model(args, pretrained: bool):
    """The four-layer reader as shipped and its tokenizer; ``pretrained``: with the question-and-passage
    pretraining's weights (``--pretrain``) loaded over it."""
    import torch
    from transformers import AutoTokenizer

    import cross_encoder
    from bases import base_path

    path = base_path("minilm")
    model = cross_encoder.CrossEncoder(path, layers=4).to(args.device)
    cross_encoder.imported(model, args.reader)
    if pretrained:
        checkpoint = pretrained_checkpoint(args)
        if not checkpoint.exists():
            raise SystemExit(f"no pretrained reader at {checkpoint}: run passages.py --pretrain first")
        model.load_state_dict(torch.load(checkpoint, map_location=args.device)["model"])
    return model, AutoTokenizer.from_pretrained(path)


def checkpoint_of(name: str, recipe) -> Path:
    """A training run's checkpoint, named by what it trains and how (``recipe``), so a run started again resumes
    its own and a changed recipe never resumes another's."""
    import cross_encoder

    digest = hashlib.blake2b(repr(recipe).encode("utf-8"), digest_size=4).hexdigest()
    return cross_encoder.CACHE / f"passages-{name}-{digest}.pt"


def pretrained_checkpoint(args) -> Path:
    """Where ``--pretrain`` keeps its reader."""
    return checkpoint_of("pretrain", (SEED, WARMUP, pretraining_recipe(args)))


def pretrain(args) -> None:
    """One epoch over ``QA_SETS``' questions from the shipped reader; the weights stay in the cache
    (``pretrained_checkpoint``), where ``--from-pretrained`` and ``--zero-shot`` read them."""
    import torch

    import cross_encoder

    torch.manual_seed(SEED)
    rng = random.Random(SEED)
    model, tokenizer = reader_model(args, pretrained=False)
    cross_encoder.MAX_TOKENS = PRETRAIN_TOKENS
    plan = pretraining_groups(qa_pairs(args.decisions), rng)
    rng.shuffle(plan)
    steps = [plan[i : i + GROUPS_PER_STEP] for i in range(0, len(plan), GROUPS_PER_STEP)]
    checkpoint = pretrained_checkpoint(args)
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    print(f"pretraining: {len(plan)} questions and their passages, {len(steps)} steps -> {checkpoint}", flush=True)
    started = time.monotonic()
    cross_encoder.optimise(
        model, steps, lambda chosen: group_loss(model, tokenizer, chosen, args.device), checkpoint, args.device,
        PRETRAIN_RATE, WARMUP,
    )
    print(f"pretrained in {time.monotonic() - started:.0f} s", flush=True)


def write_fold(fold: int, held: list[dict], model, tokenizer, args, seed: int, recipe: dict, seconds: float) -> None:
    """The reader's logit of every passage of ``held``'s queries, as ``--report`` reads them."""
    import cross_encoder

    cross_encoder.MAX_TOKENS = MAX_TOKENS
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
        "recipe": recipe,
        "training_seconds": round(seconds),
        "device": args.device,
        "logits": answers,
    }
    folder = args.heldout[0]
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"fold-{fold}.json"
    out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}", flush=True)


def pretraining_recipe(args) -> dict:
    """How ``--pretrain`` trains, as its fold files record it (and its checkpoint is named)."""
    return {"sets": list(QA_SETS), "negatives": NEGATIVES, "nearest_negatives": NEAREST_NEGATIVES,
            "nearest_pool": NEAREST_POOL, "max_tokens": PRETRAIN_TOKENS, "rate": PRETRAIN_RATE,
            "groups_per_step": GROUPS_PER_STEP, "epochs": 1.0, "start": args.reader.name}


def zero_shot(args) -> None:
    """The pretrained reader's logits of every DL19 query, as five fold files: it never trained on any."""
    queries, _ = load(args.data)
    folds = fold_of(queries)
    model, tokenizer = reader_model(args, pretrained=True)
    for fold in range(FOLDS):
        held = [q for q in queries if folds[q["qid"]] == fold]
        write_fold(fold, held, model, tokenizer, args, SEED, {"pretraining": pretraining_recipe(args)}, 0)


def train_fold(fold: int, args) -> None:
    import torch

    import cross_encoder

    queries, qrels = load(args.data)
    folds = fold_of(queries)
    training = [q for q in queries if folds[q["qid"]] != fold]
    held = [q for q in queries if folds[q["qid"]] == fold]
    seed = SEED + fold
    torch.manual_seed(seed)
    rng = random.Random(seed)
    model, tokenizer = reader_model(args, args.from_pretrained)
    cross_encoder.MAX_TOKENS = MAX_TOKENS
    epochs = [groups(training, qrels, rng) for _ in range(int(np.ceil(EPOCHS)))]
    plan = [g for epoch in epochs for g in rng.sample(epoch, len(epoch))]
    plan = plan[: int(len(epochs[0]) * EPOCHS)]
    steps = [plan[i : i + GROUPS_PER_STEP] for i in range(0, len(plan), GROUPS_PER_STEP)]
    print(f"fold {fold}: {len(training)} queries, {len(epochs[0])} groups an epoch, {len(steps)} steps", flush=True)
    recipe = {"negatives": NEGATIVES, "groups_per_step": GROUPS_PER_STEP, "epochs": EPOCHS, "rate": RATE,
              "max_tokens": MAX_TOKENS, "start": args.reader.name}
    if args.from_pretrained:
        recipe["pretraining"] = pretraining_recipe(args)
    checkpoint = checkpoint_of(f"fold-{fold}", (fold, seed, WARMUP, recipe))
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    cross_encoder.optimise(
        model, steps, lambda chosen: group_loss(model, tokenizer, chosen, args.device), checkpoint, args.device,
        RATE, WARMUP,
    )
    write_fold(fold, held, model, tokenizer, args, seed, recipe, time.monotonic() - started)


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
    """The five-fold table of each folder of fold files in ``args.heldout`` (the fused scores computed once)."""
    queries, qrels = load(args.data)
    folds = fold_of(queries)
    fused = None
    for folder in args.heldout:
        reader: dict[str, dict[str, float]] = {}
        trained = []
        for k in range(FOLDS):
            path = folder / f"fold-{k}.json"
            if path.exists():
                reader.update(json.loads(path.read_text(encoding="utf-8"))["logits"])
                trained.append(k)
        if not trained:
            print(f"\nDL19 passages: no held-out logits in {folder} (passages.py --fold K writes them)")
            continue
        if fused is None:
            fused = fused_scores(queries)
            fused_logits = {qid: logits_of(scores) for qid, scores in fused.items()}
        judged = [q["qid"] for q in queries if folds[q["qid"]] in trained]
        at = folder.resolve()
        shown = at.relative_to(HERE.resolve()) if at.is_relative_to(HERE.resolve()) else folder
        print(f"\nDL19 passages, {FOLDS} folds of queries, the reader of {shown} (folds {trained}: {len(judged)} of "
              f"{len(queries)} queries)")
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
    parser.add_argument("--decisions", type=Path, default=DECISIONS, help="the 28 sets (--pretrain reads QA_SETS)")
    parser.add_argument("--pretrain", action="store_true", help="train on QA_SETS' questions and passages first")
    parser.add_argument(
        "--from-pretrained", action="store_true", help="--fold K starts from --pretrain's reader, not the shipped one"
    )
    parser.add_argument("--zero-shot", action="store_true", help="write the pretrained reader's logits of every query")
    parser.add_argument(
        "--heldout",
        type=Path,
        action="append",
        help="the fold files' folder (default heldout/passages); --report reads each one given",
    )
    parser.add_argument("--threads", type=int, help="torch's CPU threads (two folds at once on 2 cores: 1 each)")
    args = parser.parse_args()
    args.heldout = args.heldout or [HELD_OUT]
    if len(args.heldout) > 1 and (args.fold is not None or args.zero_shot):
        parser.error("--fold and --zero-shot write one folder: give --heldout once")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.pretrain:
        pretrain(args)
    if args.zero_shot:
        zero_shot(args)
    if args.fold is not None:
        for fold in range(FOLDS) if args.fold == "every" else [int(args.fold)]:
            train_fold(fold, args)
    if args.report or (args.fold is None and not args.pretrain and not args.zero_shot):
        report(args)


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


if __name__ == "__main__":
    main()

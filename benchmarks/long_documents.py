"""Reranking long documents: DL19 passages hidden among other queries' passages, read in windows or cut at 256 tokens.

    .venv/bin/python benchmarks/long_documents.py [--depth 30] [--queries 43] [--seed 0]

Each of a DL19 query's first ``--depth`` BM25 candidates becomes a long document: the
passage placed at a random position among 5 to 10 random passages of other queries
(seeded), so the passage's qrels grade is the document's. The documents are reranked by
the embedded model twice, reading each one whole in overlapping windows (the default)
and reading only its first window (the old 256-token cut), and nDCG@10 (ir-measures)
is printed for each with the BM25 order's, the documents' lengths and the seconds taken.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

import decirank
from decirank.backends.local import _runtime, runtime
from decirank.evaluation.trec import _ndcg_at_10, load_qrels, load_run

DATA = Path(__file__).parents[2] / "shared" / "data" / "trec-dl19"


def long_documents(queries, depth: int, seed: int) -> dict[str, list[tuple[str, str]]]:
    """Each query's first ``depth`` candidates, each hidden among 5-10 passages of other queries."""
    rng = random.Random(seed)
    pools = {query.qid: [text for _, text in query.passages] for query in queries}
    documents = {}
    for query in queries:
        others = [text for qid, texts in pools.items() if qid != query.qid for text in texts]
        made = []
        for docid, passage in query.passages[:depth]:
            filler = rng.sample(others, rng.randint(5, 10))
            filler.insert(rng.randint(0, len(filler)), passage)
            made.append((docid, " ".join(filler)))
        documents[query.qid] = made
    return documents


def rerank_all(queries, documents, max_windows: int) -> tuple[dict[str, dict[str, float]], float, int]:
    """The run (qid -> docid -> score) with passages read in at most ``max_windows`` windows; seconds; cut notes."""
    _runtime.MAX_WINDOWS = max_windows
    runtime.clear_cache()  # readings and vectors depend on the window cap
    run, cut, started = {}, 0, time.perf_counter()
    for query in queries:
        docs = documents[query.qid]
        result = decirank.rerank(query.query, [text for _, text in docs], model="local", timeout=None)
        run[query.qid] = {docs[r.id][0]: r.relevance_score for r in result.results}
        cut += sum(note.note.kind == "cut" for note in result.notes)
    return run, time.perf_counter() - started, cut


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--depth", type=int, default=30, help="candidates per query (BM25 order)")
    parser.add_argument("--queries", type=int, default=None, help="the first N queries (default: all 43)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    data = Path(args.data)
    queries = load_run(data / "bm25_top100.json")[: args.queries]
    qrels = load_qrels(data / "qrels.txt")
    documents = long_documents(queries, args.depth, args.seed)
    lengths = [len(text) for docs in documents.values() for _, text in docs]
    print(
        f"{len(queries)} queries x {args.depth} documents, seed {args.seed}; characters per document: "
        f"median {statistics.median(lengths):,.0f}, max {max(lengths):,}"
    )
    bm25 = {q.qid: {docid: -rank for rank, (docid, _) in enumerate(documents[q.qid])} for q in queries}
    print(f"BM25 order               nDCG@10 {_ndcg_at_10(qrels, bm25):.4f}")
    for label, windows in (("cut at 256 tokens", 1), (f"windows (up to {_runtime.MAX_WINDOWS})", _runtime.MAX_WINDOWS)):
        run, seconds, cut = rerank_all(queries, documents, windows)
        print(
            f"{label:24} nDCG@10 {_ndcg_at_10(qrels, run):.4f}  {seconds / len(queries):.2f} s/query  "
            f"{cut} documents noted as cut"
        )


if __name__ == "__main__":
    main()

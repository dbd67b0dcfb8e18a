"""Where to cut rerank's relevance scores: precision and recall of each ``min_relevance`` on DL19.

    .venv/bin/python benchmarks/rerank_thresholds.py [--model local] [--queries 43]

Reranks each DL19 query's BM25 top 100 and, over the judged passages, prints for each
cut-off the precision and recall of "kept = score >= cut-off" against "relevant = grade 2
or more" (the DL19 convention, as in ``decirank eval trec``), how many passages a query
keeps, and how many queries keep none of their relevant passages. Brier score and
calibration error (ECE) come with it, as ``decirank eval trec --tool rerank`` prints them.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import decirank
from decirank.evaluation.trec import RELEVANT_GRADE, calibration, load_qrels, load_run

DATA = Path(__file__).parents[2] / "shared" / "data" / "trec-dl19"
CUT_OFFS = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--model", default="local")
    parser.add_argument("--queries", type=int, default=None, help="the first N queries (default: all 43)")
    args = parser.parse_args()
    data = Path(args.data)
    queries = load_run(data / "bm25_top100.json")[: args.queries]
    qrels = load_qrels(data / "qrels.txt")
    # (score, grade) of every judged passage; every passage's score, for how many a query keeps.
    judged: dict[str, list[tuple[float, int]]] = {}
    scores: dict[str, list[float]] = {}
    for query in queries:
        documents = [{"id": docid, "text": text} for docid, text in query.passages]
        result = decirank.rerank(query.query, documents, model=args.model, timeout=None)
        grades = qrels.get(query.qid, {})
        judged[query.qid] = [(r.relevance_score, grades[r.id]) for r in result.results if r.id in grades]
        scores[query.qid] = [r.relevance_score for r in result.results]
    pairs = [(score, grade >= RELEVANT_GRADE) for rows in judged.values() for score, grade in rows]
    brier, ece, count = calibration(pairs)
    relevant = sum(is_relevant for _, is_relevant in pairs)
    print(f"{args.model} on {len(queries)} DL19 queries: {count} judged passages, {relevant} relevant (grade >= 2)")
    print(
        f"Brier {brier:.3f}, ECE {ece:.3f}; mean score of relevant {statistics.fmean(s for s, r in pairs if r):.3f}, "
        f"of the others {statistics.fmean(s for s, r in pairs if not r):.3f}"
    )
    print("cut-off  precision  recall  kept/query (of 100)  queries keeping no relevant passage")
    for cut in CUT_OFFS:
        kept = [is_relevant for score, is_relevant in pairs if score >= cut]
        precision = sum(kept) / len(kept) if kept else float("nan")
        recall = sum(kept) / relevant
        per_query = statistics.median(sum(s >= cut for s in values) for values in scores.values())
        missed = sum(
            1
            for rows in judged.values()
            if any(g >= RELEVANT_GRADE for _, g in rows) and not any(s >= cut and g >= RELEVANT_GRADE for s, g in rows)
        )
        print(f"{cut:7.2f}  {precision:9.2f}  {recall:6.2f}  {per_query:19.0f}  {missed:3d}")


if __name__ == "__main__":
    main()

"""Reranking evaluation on TREC-style data: nDCG@10, latency, memory, calibration.

The run file is a JSON list of ``{query, hits: [{qid, docid, content}]}`` (the
format of the DL19 set this project is tuned on); qrels are ``qid Q0 docid
grade`` lines. nDCG@10 uses trec_eval's linear gains, through ir-measures.
"""

from __future__ import annotations

import json
import os
import resource
import stat
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..decisions.decider import DEFAULT_ROLE
from ..errors import InvalidInputError, MissingAssetError
from ..tools.rank import rank
from ..tools.rerank import rerank

__all__ = ["EvalReport", "TrecQuery", "calibration", "evaluate", "load_qrels", "load_run"]

RANK_INSTRUCTIONS = "Which passage best answers the question?"
#: rank (the query in the state, under RANK_INSTRUCTIONS), rank-query (the query as the question, no state),
#: and rerank (a likelihood per passage).
TOOLS = ("rank", "rank-query", "rerank")
#: Judged grade from which a passage counts as relevant for calibration (DL19 convention).
RELEVANT_GRADE = 2
CALIBRATION_BINS = 10


@dataclass(frozen=True)
class TrecQuery:
    qid: str
    query: str
    #: ``(docid, text)`` in the first-stage order.
    passages: list[tuple[str, str]]


@dataclass
class EvalReport:
    tool: str
    model: str
    queries: int
    ndcg_at_10: float
    first_stage_ndcg_at_10: float
    seconds_per_query: list[float]
    warm_seconds_per_query: list[float] = field(default_factory=list)
    peak_memory_mb: float = 0.0
    brier: float | None = None
    ece: float | None = None
    calibration_pairs: int = 0

    def to_dict(self) -> dict[str, Any]:
        def median(values: list[float]) -> float | None:
            return statistics.median(values) if values else None

        return {
            "tool": self.tool,
            "model": self.model,
            "queries": self.queries,
            "ndcg@10": round(self.ndcg_at_10, 4),
            "first_stage_ndcg@10": round(self.first_stage_ndcg_at_10, 4),
            "seconds_per_query_median": median(self.seconds_per_query),
            "seconds_per_query_mean": statistics.fmean(self.seconds_per_query) if self.seconds_per_query else None,
            "warm_seconds_per_query_median": median(self.warm_seconds_per_query),
            "peak_memory_mb": round(self.peak_memory_mb, 1),
            "brier": None if self.brier is None else round(self.brier, 4),
            "ece": None if self.ece is None else round(self.ece, 4),
            "calibration_pairs": self.calibration_pairs,
        }


def _refuse_special_file(path: str | Path, field: str, expected: str) -> None:
    """Only regular files are read: opening a named pipe blocks until something writes to it
    (forever, if nothing does), and a device such as /dev/zero never ends."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return  # reading it says what is wrong
    if not stat.S_ISREG(mode):
        raise InvalidInputError(field, expected, detail=f"{str(path)!r} is not a regular file")


def load_run(path: str | Path) -> list[TrecQuery]:
    _refuse_special_file(path, "run", "a readable JSON file of queries with hits")
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as error:  # ValueError: not UTF-8, or not JSON
        raise InvalidInputError("run", "a readable JSON file of queries with hits", detail=str(error)) from None
    if not isinstance(data, list):
        raise InvalidInputError("run", "a JSON list of {query, hits}", got=type(data).__name__)
    queries = []
    for number, entry in enumerate(data):
        try:
            hits = entry["hits"]
            qid = str(hits[0]["qid"]) if hits else str(entry.get("qid", number))
            passages = [(str(hit["docid"]), str(hit["content"])) for hit in hits]
            queries.append(TrecQuery(qid, str(entry["query"]), passages))
        except (KeyError, TypeError, IndexError) as error:
            detail = f"missing {error}" if isinstance(error, KeyError) else str(error)
            raise InvalidInputError(f"run.{number}", "{query, hits: [{qid, docid, content}]}", detail=detail) from None
    return queries


def load_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    _refuse_special_file(path, "qrels", "a readable qrels file")
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise InvalidInputError("qrels", "a readable qrels file", detail=str(error)) from None
    for number, line in enumerate(lines, start=1):
        parts = line.split()
        if not parts:
            continue
        try:
            qid, _, docid, grade = parts
            qrels.setdefault(qid, {})[docid] = int(grade)
        except ValueError:  # not four fields, or a grade that is not an integer
            raise InvalidInputError(
                "qrels", "lines of 'qid Q0 docid grade' with an integer grade", detail=f"line {number}: {line!r}"
            ) from None
    return qrels


def _ndcg_at_10(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]) -> float:
    try:
        import ir_measures
    except ImportError as error:
        raise MissingAssetError("ir-measures (needed by evaluation)", "pip install 'decirank[eval]'") from error
    judged = {qid: docs for qid, docs in qrels.items() if qid in run}
    return float(ir_measures.calc_aggregate([ir_measures.nDCG @ 10], judged, run)[ir_measures.nDCG @ 10])


def calibration(pairs: Iterable[tuple[float, bool]], bins: int = CALIBRATION_BINS) -> tuple[float, float, int]:
    """Brier score and expected calibration error (equal-width bins) of ``(probability, relevant)``."""
    pairs = list(pairs)
    if not pairs:
        return 0.0, 0.0, 0
    brier = statistics.fmean((p - float(relevant)) ** 2 for p, relevant in pairs)
    buckets: list[list[tuple[float, bool]]] = [[] for _ in range(bins)]
    for p, relevant in pairs:
        buckets[min(int(p * bins), bins - 1)].append((p, relevant))
    ece = sum(
        len(bucket)
        / len(pairs)
        * abs(statistics.fmean(p for p, _ in bucket) - statistics.fmean(float(r) for _, r in bucket))
        for bucket in buckets
        if bucket
    )
    return brier, ece, len(pairs)


def _scores(tool: str, query: TrecQuery, model: str) -> dict[str, float]:
    documents = [{"id": docid, "text": text} for docid, text in query.passages]
    if tool == "rerank":
        result = rerank(query.query, documents, model=model, timeout=None)
        return {entry.id: entry.relevance_score for entry in result.results}
    if tool == "rank-query":  # the query itself as the question, with no state, as a newcomer first writes it
        result = rank(documents, query.query, describe="text", model=model)
    else:
        result = rank(documents, RANK_INSTRUCTIONS, {"question": query.query}, describe="text", model=model)
    # Items that missed a chunked final still get a score below every finalist, in their order.
    count = len(result.ranked)
    return {entry.item["id"]: (entry.probability if entry.probability is not None else -(i + 1) / count)
            for i, entry in enumerate(result.ranked)}


def evaluate(
    queries: list[TrecQuery],
    qrels: dict[str, dict[str, int]],
    *,
    tool: str = "rank",
    model: str = DEFAULT_ROLE,
    warm: bool = False,
    on_query: Callable[[], None] | None = None,
) -> EvalReport:
    """Rerank every query's passages with ``tool`` and measure the result."""
    if tool not in TOOLS:
        raise InvalidInputError("tool", " or ".join(TOOLS), got=tool)
    run: dict[str, dict[str, float]] = {}
    seconds: list[float] = []
    warm_seconds: list[float] = []
    for query in queries:
        started = time.perf_counter()
        run[query.qid] = _scores(tool, query, model)
        seconds.append(time.perf_counter() - started)
        if warm:
            started = time.perf_counter()
            _scores(tool, query, model)
            warm_seconds.append(time.perf_counter() - started)
        if on_query:
            on_query()
    first_stage = {
        query.qid: {docid: float(len(query.passages) - position) for position, (docid, _) in enumerate(query.passages)}
        for query in queries
    }
    report = EvalReport(
        tool=tool,
        model=model,
        queries=len(queries),
        ndcg_at_10=_ndcg_at_10(qrels, run),
        first_stage_ndcg_at_10=_ndcg_at_10(qrels, first_stage),
        seconds_per_query=seconds,
        warm_seconds_per_query=warm_seconds,
        peak_memory_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    )
    if tool == "rerank":
        pairs = [
            (score, qrels[qid][docid] >= RELEVANT_GRADE)
            for qid, scores in run.items()
            for docid, score in scores.items()
            if docid in qrels.get(qid, {})
        ]
        report.brier, report.ece, report.calibration_pairs = calibration(pairs)
    return report

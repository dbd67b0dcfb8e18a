"""decirank eval trec: nDCG@10 from ir-measures, latency, memory and calibration on a small set."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from decirank.errors import InvalidInputError
from decirank.evaluation.trec import calibration, evaluate, load_qrels, load_run

QUERIES = [
    (
        "1",
        "flea life cycle",
        [("d1", "bread and butter"), ("d2", "the flea life cycle has four stages"), ("d3", "cats")],
    ),
    ("2", "sourdough starter", [("e1", "a sourdough starter needs flour"), ("e2", "fleas"), ("e3", "stocks")]),
]


@pytest.fixture
def trec_files(tmp_path):
    run = [
        {"query": query, "hits": [{"qid": qid, "docid": docid, "content": text, "rank": n, "score": 0.0}
                                  for n, (docid, text) in enumerate(hits)]}
        for qid, query, hits in QUERIES
    ]
    run_path = tmp_path / "run.json"
    run_path.write_text(json.dumps(run))
    qrels_path = tmp_path / "qrels.txt"
    qrels_path.write_text("1 Q0 d2 3\n1 Q0 d1 0\n2 Q0 e1 2\n2 Q0 e3 0\n")
    return run_path, qrels_path


def test_reranking_the_relevant_passage_first_gives_perfect_ndcg(trec_files):
    """Putting each query's relevant passage first gives nDCG@10 of 1, with timings, memory and calibration reported."""
    queries, qrels = load_run(trec_files[0]), load_qrels(trec_files[1])
    report = evaluate(queries, qrels, tool="rerank", model="lexical", warm=True)
    assert report.ndcg_at_10 == pytest.approx(1.0)
    assert report.first_stage_ndcg_at_10 < 1.0
    assert len(report.seconds_per_query) == len(report.warm_seconds_per_query) == 2
    assert report.peak_memory_mb > 0
    assert report.calibration_pairs == 4 and 0.0 <= report.brier <= 1.0
    rank_report = evaluate(queries, qrels, tool="rank", model="lexical")
    assert rank_report.ndcg_at_10 == pytest.approx(1.0)


def test_calibration_of_perfect_and_constant_predictions():
    """Brier score and ECE are 0 for perfect predictions and measure the gap for constant ones."""
    assert calibration([(1.0, True), (0.0, False)])[:2] == (0.0, 0.0)
    brier, ece, count = calibration([(0.5, True), (0.5, False)])
    assert brier == pytest.approx(0.25) and ece == pytest.approx(0.0) and count == 2
    brier, ece, _ = calibration([(0.9, False), (0.9, False)])
    assert ece == pytest.approx(0.9)


def test_bad_files_are_typed_errors(tmp_path):
    """A malformed qrels line, a non-integer grade or an unreadable file is an InvalidInputError, not a crash."""
    bad = tmp_path / "bad.txt"
    bad.write_text("1 Q0 d1\n")
    with pytest.raises(InvalidInputError, match="line 1"):
        load_qrels(bad)
    bad.write_text("1 Q0 d1 3\n1 Q0 d2 high\n")
    with pytest.raises(InvalidInputError, match="line 2"):
        load_qrels(bad)
    bad.write_bytes(b"\xff\xfe not utf-8")
    with pytest.raises(InvalidInputError):
        load_qrels(bad)
    with pytest.raises(InvalidInputError):
        load_run(bad)
    with pytest.raises(InvalidInputError):
        load_run(tmp_path / "missing.json")


def test_cli_prints_a_json_report(trec_files):
    """'decirank eval trec --json' prints the report as JSON."""
    done = subprocess.run(
        [sys.executable, "-m", "decirank", "eval", "trec", str(trec_files[0]), str(trec_files[1]),
         "--model", "lexical", "--tool", "rerank", "--json"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ndcg@10"] == 1.0 and report["queries"] == 2

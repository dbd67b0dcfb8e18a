"""decirank.batch in this process and in worker processes: formats, tools, bad rows, stops and resumes, the run log.

The lexical model answers wherever quality does not matter; one test runs the
embedded model. Rows are few and chunks small, so a batch has several chunks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import decirank
from decirank.batching import BatchStopped
from decirank.errors import InvalidInputError, ModelConnectionError, UnknownModelError
from decirank.stores.runlog import current_runlog
from decirank.testing import ScriptedBackend, uniform_answers, use_backend
from decirank.types.answers import LikelihoodAnswer

from .conftest import Stop, interrupt_after, read_output, ticket_rows, write_rows

QUESTION = "Is this about a payment?"
QUEUES = {"billing": "payments and refunds", "pets": "dogs and cats", "tech": "apps and screens"}


def run_filter(tickets: Path, out: Path, **options):
    settings = {"question": QUESTION, "text": "text", "model": "lexical", "workers": 0, **options}
    return decirank.batch("filter", tickets, out, **settings)


# -- formats -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "target"),
    [
        ("jsonl", "jsonl"),
        ("csv", "csv"),
        ("parquet", "parquet"),
        ("jsonl", "parquet"),
        ("csv", "jsonl"),
        ("parquet", "csv"),
    ],
)
def test_output_is_the_input_rows_plus_answers_in_order(tmp_path, source, target):
    rows = ticket_rows(40)
    source_path = write_rows(tmp_path / f"in.{source}", rows)
    result = run_filter(source_path, tmp_path / f"out.{target}")
    assert (result.rows, result.answered, result.failed, result.errors) == (40, 40, 0, None)
    written = read_output(tmp_path / f"out.{target}")
    # One chunk holds the 40 rows, so the answers are the filter tool's on the same list.
    expected = decirank.filter([row["text"] for row in rows], QUESTION, {}, model="lexical")
    assert len(written) == 40
    for row, output, decision in zip(rows, written, expected.decisions, strict=True):
        assert list(output)[: len(row)] == list(row) and list(output)[len(row) :] == ["probability", "kept"]
        assert output["text"] == row["text"] and str(output["id"]) == str(row["id"])
        if target == "csv":
            assert output["probability"] == repr(decision.probability)
            assert output["kept"] == ("true" if decision.kept else "false")
        else:
            assert output["probability"] == decision.probability and output["kept"] == decision.kept
    assert not (tmp_path / f"out.{target}.progress").exists()


def test_the_same_batch_writes_the_same_bytes(tmp_path, tickets):
    run_filter(tickets, tmp_path / "a.jsonl", batch_size=16)
    run_filter(tickets, tmp_path / "b.jsonl", batch_size=16)
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()


def test_describe_shows_a_dot_path_and_no_option_shows_the_whole_row(tmp_path):
    rows = [{"meta": {"title": f"refund for order {i}"}, "n": i} for i in range(6)]
    source = write_rows(tmp_path / "in.jsonl", rows)
    by_path = decirank.batch(
        "score", source, tmp_path / "p.jsonl", question=QUESTION, describe="meta.title", model="lexical", workers=0
    )
    whole = decirank.batch("score", source, tmp_path / "w.jsonl", question=QUESTION, model="lexical", workers=0)
    assert by_path.answered == whole.answered == 6
    expected = decirank.tools.score.score([row["meta"]["title"] for row in rows], QUESTION, model="lexical")
    assert [row["probability"] for row in read_output(tmp_path / "p.jsonl")] == expected.probabilities


# -- the tools -----------------------------------------------------------------------------------


def test_classify_picks_one_option_per_row(tmp_path, tickets):
    result = decirank.batch(
        "classify",
        tickets,
        tmp_path / "out.jsonl",
        question="What is it about?",
        options=QUEUES,
        text="text",
        model="lexical",
        workers=0,
        batch_size=50,
    )
    assert result.answered == 120
    written = read_output(tmp_path / "out.jsonl")
    assert {row["choice"] for row in written} <= {"billing", "pets", "tech"}
    assert all(0 < row["probability"] <= 1 for row in written)
    texts = [row["text"] for row in written[:50]]
    direct = decirank.tools.classify.classify(texts, "What is it about?", QUEUES, model="lexical")
    assert [row["choice"] for row in written[:50]] == [d.choice for d in direct.decisions]


def test_score_asks_about_each_row(tmp_path, tickets):
    result = decirank.batch(
        "score",
        tickets,
        tmp_path / "out.csv",
        question="Is this about a pet?",
        true="a pet",
        false="not a pet",
        text="text",
        model="lexical",
        workers=0,
    )
    assert result.answered == 120
    assert all(0 <= float(row["probability"]) <= 1 for row in read_output(tmp_path / "out.csv"))


def test_rerank_ranks_within_each_query_group(tmp_path):
    rows = []
    for number, row in enumerate(ticket_rows(30)):
        rows.append({**row, "q": ["refund for my card", "my dog"][number % 2]})
    source = write_rows(tmp_path / "in.jsonl", rows)
    result = decirank.batch(
        "rerank", source, tmp_path / "out.jsonl", query_field="q", text="text", model="lexical", workers=0, batch_size=7
    )
    assert result.answered == 30
    written = read_output(tmp_path / "out.jsonl")
    for query in ("refund for my card", "my dog"):
        group = [row for row in written if row["q"] == query]
        ordered = sorted(group, key=lambda row: (-row["relevance_score"], row["id"]))
        assert [row["rank"] for row in ordered] == list(range(1, len(group) + 1))
    one_query = decirank.batch(
        "rerank", source, tmp_path / "one.jsonl", query="refund", text="text", model="lexical", workers=0
    )
    assert sorted(row["rank"] for row in read_output(tmp_path / "one.jsonl")) == list(range(1, 31))
    assert one_query.failed == 0


# -- bad rows --------------------------------------------------------------------------------------


def test_a_bad_row_is_reported_and_the_rest_answered(tmp_path):
    lines = [json.dumps(row) for row in ticket_rows(10)]
    lines[2] = json.dumps({"id": 2, "body": "no text here"})
    lines[4] = "{not json"
    lines[6] = '"a string, not an object"'
    lines[7] = '{"id": 7, "text": "\\ud800 lone surrogate"}'
    lines[8] = json.dumps({"id": 8, "text": None})
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(lines) + "\n\n", encoding="utf-8")
    result = run_filter(source, tmp_path / "out.jsonl", batch_size=3)
    assert (result.rows, result.answered, result.failed) == (10, 5, 5)
    assert result.errors == os.fspath(tmp_path / "out.errors.jsonl")
    errors = [json.loads(line) for line in (tmp_path / "out.errors.jsonl").read_text().splitlines()]
    assert [error["row"] for error in errors] == [2, 4, 6, 7, 8]
    reasons = {error["row"]: (error["error"], error["message"]) for error in errors}
    assert reasons[2] == ("MissingField", "the row has no column 'text'")
    assert reasons[4][0] == "UnreadableRow" and "line 5: not JSON" in reasons[4][1]
    assert reasons[6][0] == "UnreadableRow" and "expected a JSON object" in reasons[6][1]
    assert "U+D800" in reasons[7][1]
    assert reasons[8][0] == "MissingField"
    assert errors[0]["input"] == {"id": 2, "body": "no text here"} and errors[1]["input"] == "{not json"
    written = read_output(tmp_path / "out.jsonl")
    # Rows that could be read are all there, in order; the failed ones with empty answers, never a made-up score.
    assert [row["id"] for row in written] == [0, 1, 2, 3, 5, 8, 9]
    assert [row["probability"] is None for row in written] == [False, False, True, False, False, True, False]
    assert all(row["kept"] is None for row in written if row["probability"] is None)


def test_a_row_the_model_fails_on_is_isolated(tmp_path, tickets):
    def answer(request):
        # A model that leaves out its answer to one ticket: that ticket's call fails as a whole.
        return {
            qid: LikelihoodAnswer(0.5)
            for qid, question in request.questions.items()
            if "(ticket 37)" not in question.instructions
        }

    backend = ScriptedBackend(answer=answer)
    with use_backend(backend) as model:
        result = run_filter(tickets, tmp_path / "out.jsonl", model=model, batch_size=40)
    assert (result.answered, result.failed) == (119, 1)
    (error,) = [json.loads(line) for line in (tmp_path / "out.errors.jsonl").read_text().splitlines()]
    assert error["row"] == 37 and error["error"] in ("InvalidAnswerError", "AllModelsFailedError")
    written = read_output(tmp_path / "out.jsonl")
    assert written[37]["probability"] is None
    assert all(row["probability"] == 0.5 for index, row in enumerate(written) if index != 37)
    # The failing chunk was split in halves down to the one row: a few calls, not one per row.
    assert len(backend.requests) < 20


def test_fail_fast_stops_at_the_first_bad_row_and_a_rerun_resumes(tmp_path):
    rows = ticket_rows(30)
    rows[12] = {"id": 12}
    source = write_rows(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    with pytest.raises(BatchStopped, match=r"row 12 .*MissingField.*fail-fast"):
        run_filter(source, out, batch_size=10, fail_fast=True)
    assert not out.exists() and (tmp_path / "out.jsonl.progress").is_dir()
    result = run_filter(source, out, batch_size=10)
    assert (result.resumed, result.answered, result.failed) == (10, 29, 1)


def test_a_model_that_is_down_stops_the_batch_and_the_rerun_resumes(tmp_path, tickets):
    state = {"down": False, "calls": 0}

    def answer(request):
        state["calls"] += 1
        if state["down"]:
            raise ModelConnectionError("connection refused", model="scripted:default")
        if state["calls"] == 2:
            state["down"] = True
        return uniform_answers(request)

    with use_backend(ScriptedBackend(answer=answer)) as model:
        with pytest.raises(BatchStopped, match=r"rows 40-59: ModelConnectionError.*40 rows done.*resume"):
            run_filter(tickets, tmp_path / "out.jsonl", model=model, batch_size=20)
        assert not (tmp_path / "out.jsonl").exists()
        state["down"] = False
        result = run_filter(tickets, tmp_path / "out.jsonl", model=model, batch_size=20)
        run_filter(tickets, tmp_path / "whole.jsonl", model=model, batch_size=20)
    assert (result.resumed, result.answered, result.failed) == (40, 120, 0)
    assert (tmp_path / "out.jsonl").read_bytes() == (tmp_path / "whole.jsonl").read_bytes()
    run = current_runlog().run(result.run_id)
    assert (run["status"], run["error_type"], run["error"]) == ("success", None, None), "the old error is gone"


# -- resuming ------------------------------------------------------------------------------------------


def test_an_interrupted_batch_resumes_to_the_same_bytes_and_stays_one_run(tmp_path, tickets):
    out = tmp_path / "out.parquet"
    with pytest.raises(Stop):
        run_filter(tickets, out, batch_size=25, on_progress=interrupt_after(2))
    journal = tmp_path / "out.parquet.progress" / "done.jsonl"
    assert journal.read_bytes().count(b"\n") == 2
    # A kill while a chunk was being written leaves part of a line: it is dropped, that chunk asked again.
    with open(journal, "ab") as file:
        file.write(b'{"chunk": 2, "answers": {"0": {"probab')
    result = run_filter(tickets, out, batch_size=25)
    run_filter(tickets, tmp_path / "whole.parquet", batch_size=25)
    assert (result.resumed, result.answered) == (50, 120)
    assert out.read_bytes() == (tmp_path / "whole.parquet").read_bytes()
    assert not (tmp_path / "out.parquet.progress").exists()

    runlog = current_runlog()
    batches = runlog.runs(tool="batch", limit=None)
    assert len(batches) == 2  # this batch (interrupted, then resumed: one run) and the whole one
    run = runlog.run(result.run_id)
    assert run["status"] == "success" and run["outputs"]["answered"] == 120 and run["outputs"]["resumed"] == 50
    chunk_runs = [child for child in run["children"] if child["tool"] == "filter"]
    assert len(chunk_runs) == 5 and {child["status"] for child in chunk_runs} == {"success"}
    assert run["calls"] == sum(child["calls"] for child in chunk_runs)
    assert run["outputs"]["models"]["lexical:bm25"]["calls"] == run["calls"]


def test_resuming_with_other_options_or_input_is_refused(tmp_path, tickets):
    out = tmp_path / "out.jsonl"
    with pytest.raises(Stop):
        run_filter(tickets, out, batch_size=25, on_progress=interrupt_after(1))
    with pytest.raises(InvalidInputError, match="differs in the question, options and calibration"):
        run_filter(tickets, out, question="Is this about a dog?")
    with pytest.raises(InvalidInputError, match="differs in the rows per batch"):
        run_filter(tickets, out, batch_size=30)
    with open(tickets, "a", encoding="utf-8") as file:
        file.write(json.dumps({"id": 999, "text": "one more"}) + "\n")
    with pytest.raises(InvalidInputError, match="differs in the input file"):
        run_filter(tickets, out)
    assert run_filter(tickets, out, overwrite=True).resumed == 0


def test_a_finished_output_is_not_replaced_without_overwrite(tmp_path, tickets):
    out = tmp_path / "out.jsonl"
    out.write_text("keep me\n")
    with pytest.raises(InvalidInputError, match="exists; give --overwrite"):
        run_filter(tickets, out)
    assert out.read_text() == "keep me\n"
    assert run_filter(tickets, out, overwrite=True).answered == 120


# -- engines -----------------------------------------------------------------------------------------------


def test_worker_processes_write_what_this_process_writes(tmp_path, tickets):
    inline = run_filter(tickets, tmp_path / "inline.jsonl", batch_size=16)
    pooled = run_filter(tickets, tmp_path / "pooled.jsonl", batch_size=16, workers=2)
    assert (pooled.engine, pooled.workers, inline.engine) == ("local", 2, "inline")
    assert (tmp_path / "pooled.jsonl").read_bytes() == (tmp_path / "inline.jsonl").read_bytes()
    run = current_runlog().run(pooled.run_id)
    assert len([child for child in run["children"] if child["tool"] == "filter"]) == 8  # written by the workers


def test_the_embedded_model_in_a_worker_answers_as_the_filter_tool(tmp_path):
    rows = ticket_rows(60)
    source = write_rows(tmp_path / "in.csv", rows)
    result = decirank.batch(
        "filter",
        source,
        tmp_path / "out.jsonl",
        question="Is this about a pet?",
        state={"site": "a pet shop"},
        text="text",
        model="local",
        workers=1,
    )
    assert (result.answered, list(result.models)) == (60, ["local:default"])
    expected = decirank.filter(
        [row["text"] for row in rows], "Is this about a pet?", {"site": "a pet shop"}, model="local"
    )
    written = read_output(tmp_path / "out.jsonl")
    assert [row["probability"] for row in written] == [d.probability for d in expected.decisions]
    assert [row["kept"] for row in written] == [d.kept for d in expected.decisions]


# -- bad options -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "options", "field", "words"),
    [
        ("sort", {}, "tool", "one of filter, classify, rerank, score"),
        ("filter", {}, "question", "a non-empty string"),
        ("classify", {"question": "Which?"}, "options", "the labels"),
        ("classify", {"question": "Which?", "options": ["one"]}, "options", "1 options"),
        ("classify", {"question": "Which?", "options": ["a", "b"], "state": "x"}, "state", "for filter, not classify"),
        ("rerank", {}, "query", "either query"),
        ("rerank", {"query": "q", "query_field": "q"}, "query", "either query"),
        ("score", {"question": "Why?", "text": "a", "describe": "b"}, "text", "not both"),
        ("filter", {"question": "Q", "min_confidence": 2}, "min_confidence", ""),
        ("filter", {"question": "Q", "engine": "spark"}, "engine", "one of local, ray"),
        ("filter", {"question": "Q", "address": "ray://x:1"}, "address", "only with engine ray"),
        ("filter", {"question": "Q", "workers": -1}, "workers", "from 0 to 4096"),
        ("filter", {"question": "Q", "workers": 10**30}, "workers", "from 0 to 4096"),
        ("filter", {"question": "Q", "batch_size": 0}, "batch_size", "at least 1"),
        ("filter", {"question": "Q", "text": "body"}, "text", "no column 'body'"),
    ],
)
def test_bad_options_name_the_option(tmp_path, tool, options, field, words):
    source = write_rows(tmp_path / "in.csv", ticket_rows(3))
    with pytest.raises(InvalidInputError) as raised:
        decirank.batch(tool, source, tmp_path / "out.jsonl", model="lexical", **options)
    assert raised.value.field == field and words in str(raised.value)
    assert not (tmp_path / "out.jsonl").exists() and not (tmp_path / "out.jsonl.progress").exists()


def test_bad_files_and_models_are_refused_before_any_work(tmp_path, tickets):
    with pytest.raises(InvalidInputError, match="input: expected a .jsonl, .csv or .parquet file"):
        run_filter(tmp_path / "in.txt", tmp_path / "out.jsonl")
    with pytest.raises(InvalidInputError, match="does not exist"):
        run_filter(tmp_path / "missing.jsonl", tmp_path / "out.jsonl")
    with pytest.raises(InvalidInputError, match="no folder"):
        run_filter(tickets, tmp_path / "nowhere" / "out.jsonl")
    with pytest.raises(InvalidInputError, match="other than the input"):
        run_filter(tickets, tickets, overwrite=True)
    with pytest.raises(UnknownModelError):
        run_filter(tickets, tmp_path / "out.jsonl", model="nosuch:model")
    clash = write_rows(tmp_path / "clash.csv", [{"text": "a", "probability": "1"}])
    with pytest.raises(InvalidInputError, match="already has 'probability'"):
        run_filter(clash, tmp_path / "out.jsonl")
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(InvalidInputError, match="input: expected a parquet file"):
        run_filter(tmp_path / "bad.parquet", tmp_path / "out.jsonl")
    assert not list(tmp_path.glob("out*"))


def test_abatch_runs_the_batch_off_the_event_loop(tmp_path, tickets):
    import anyio

    async def main():
        return await decirank.abatch(
            "score", tickets, tmp_path / "out.jsonl", question=QUESTION, text="text", model="lexical", workers=0
        )

    result = anyio.run(main)
    assert isinstance(result, decirank.BatchResult) and result.answered == 120


def test_a_batch_that_fails_before_any_chunk_is_done_leaves_no_progress_folder(tmp_path, tickets):
    """A model down from the first call stops the batch with nothing done, and no OUTPUT.progress/ is left."""
    down = ScriptedBackend(error=ModelConnectionError("connection refused", model="scripted:default"))
    with use_backend(down) as model, pytest.raises(BatchStopped):
        run_filter(tickets, tmp_path / "out.jsonl", model=model, batch_size=20)
    assert not (tmp_path / "out.jsonl.progress").exists() and not (tmp_path / "out.jsonl").exists()


def test_a_ray_batch_without_ray_installed_leaves_no_progress_folder(tmp_path, tickets):
    """engine="ray" where Ray cannot be imported is refused, naming the extra, before OUTPUT.progress/ exists."""
    script = (
        "import sys; sys.modules['ray'] = None\n"  # as if Ray were not installed
        "import decirank\n"
        "from decirank.errors import MissingAssetError\n"
        "try:\n"
        f"    decirank.batch('filter', {str(tickets)!r}, {str(tmp_path / 'out.jsonl')!r}, question='q', text='text',"
        " model='lexical', engine='ray')\n"
        "except MissingAssetError as error:\n"
        "    print(error)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "pip install 'decirank[ray]'" in done.stdout
    assert not (tmp_path / "out.jsonl.progress").exists()


def test_a_batch_stopped_after_its_last_chunk_resumes_without_starting_an_engine(tmp_path, tickets):
    """Every chunk done but the output unwritten (stopped as its engine shut down): the rerun only writes it,
    even with engine="ray", whose Ray is never started."""
    out = tmp_path / "out.jsonl"
    with pytest.raises(Stop):
        run_filter(tickets, out, batch_size=40, on_progress=interrupt_after(3))  # 120 rows: 3 chunks
    assert (tmp_path / "out.jsonl.progress" / "done.jsonl").read_bytes().count(b"\n") == 3 and not out.exists()
    result = run_filter(tickets, out, batch_size=40, engine="ray", workers=None)
    whole = run_filter(tickets, tmp_path / "whole.jsonl", batch_size=40)
    assert (result.resumed, result.answered, result.engine, result.workers) == (120, 120, "ray", 0), "no actor ran"
    assert out.read_bytes() == (tmp_path / "whole.jsonl").read_bytes() and whole.answered == 120

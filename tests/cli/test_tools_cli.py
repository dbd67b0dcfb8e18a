"""The tools on the command line, run as real subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def decirank(*args, input=None):
    return subprocess.run(
        [sys.executable, "-m", "decirank", *args], capture_output=True, text=True, input=input, timeout=120
    )


@pytest.fixture
def items_file(tmp_path):
    path = tmp_path / "items.json"
    path.write_text(json.dumps([
        {"title": "fleas and their life cycle", "url": "a"},
        {"title": "bread baking", "url": "b"},
        {"title": "stock markets", "url": "c"},
    ]))
    return path


def test_rank_prints_a_table(items_file):
    done = decirank("rank", str(items_file), "--instructions", "Which is about fleas?", "--state",
                    '{"question": "flea life"}', "--describe", "title", "--model", "lexical")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any("fleas and their life cycle" in line and line.lstrip().startswith("1") for line in lines)
    assert "lexical:bm25" in done.stdout


def test_rank_json_from_stdin_jsonl():
    jsonl = "\n".join(json.dumps(x) for x in ["apples", "flea facts", "cars"])
    done = decirank("rank", "-", "-i", "Which?", "-s", "fleas", "--model", "lexical", "--json", "--top-k", "2", input=jsonl)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["items"][0] == "flea facts" and len(data["ranked"]) == 2
    assert data["ranked"][0]["index"] == 1


def test_rerank_and_filter_json(items_file):
    done = decirank("rerank", str(items_file), "--query", "flea", "--model", "lexical", "--json")
    assert done.returncode == 2  # objects need a "text" field
    assert "documents.0" in done.stderr
    docs = items_file.parent / "docs.json"
    docs.write_text(json.dumps(["fleas bite", "bread", {"id": "x", "text": "flea eggs hatch"}]))
    done = decirank("rerank", str(docs), "--query", "flea", "--model", "lexical", "--json")
    assert done.returncode == 0, done.stderr
    assert {r["id"] for r in json.loads(done.stdout)["results"][:2]} == {0, "x"}
    done = decirank("filter", str(docs), "--question", "Is it about fleas?", "--state", "fleas", "--model", "lexical", "--json")
    assert done.returncode == 0, done.stderr
    assert set(json.loads(done.stdout)) >= {"items", "count", "dropped", "dropped_count"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["rank", "ITEMS", "-i", "", "-s", "{}", "--model", "lexical"], "instructions"),
        (["rank", "ITEMS", "-i", "Which?", "-s", "{}", "--model", "lexicon"], "did you mean 'lexical'"),
        (["rank", "ITEMS", "-i", "Which?", "-s", "{}", "--model", "lexical", "--top-k", "0"], "top_k"),
        (["rank", "ITEMS", "-i", "Which?", "-s", "{}", "--model", "lexical", "--describe", "nope"], "item 0"),
        (["rank", "missing.json", "-i", "Which?", "-s", "{}", "--model", "lexical"], "items"),
    ],
)
def test_bad_input_is_one_line_on_stderr_and_exit_2(items_file, args, message):
    args = [str(items_file) if arg == "ITEMS" else arg for arg in args]
    done = decirank(*args)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_items_that_are_not_a_list(tmp_path):
    path = tmp_path / "obj.json"
    path.write_text("[1, 2")
    done = decirank("rank", str(path), "-i", "Which?", "-s", "{}", "--model", "lexical")
    assert done.returncode == 2 and "items" in done.stderr and "Traceback" not in done.stderr

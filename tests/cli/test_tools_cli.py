"""The tools on the command line, run as real subprocesses."""

from __future__ import annotations

import json

import pytest

from tests.cli._run import decirank


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
    """The human table puts the best item first, shown by its describe path, and names the model."""
    done = decirank("rank", str(items_file), "--instructions", "Which is about fleas?", "--state",
                    '{"question": "flea life"}', "--describe", "title", "--model", "lexical")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any("fleas and their life cycle" in line and line.lstrip().startswith("1") for line in lines)
    assert "lexical:bm25" in done.stdout


def test_rank_json_from_stdin_jsonl():
    """JSON Lines on stdin are the items; --json prints the tool's shape, cut to --top-k."""
    jsonl = "\n".join(json.dumps(x) for x in ["apples", "flea facts", "cars"])
    done = decirank(
        "rank", "-", "-i", "Which?", "-s", "fleas", "--model", "lexical", "--json", "--top-k", "2", input=jsonl
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["items"][0] == "flea facts" and len(data["ranked"]) == 2
    assert data["ranked"][0]["index"] == 1


def test_rerank_and_filter_json(items_file):
    """rerank wants strings or objects with text, keeps each document's id; filter prints its JSON shape."""
    done = decirank("rerank", str(items_file), "--query", "flea", "--model", "lexical", "--json")
    assert done.returncode == 2  # objects need a "text" field
    assert "documents.0" in done.stderr
    docs = items_file.parent / "docs.json"
    docs.write_text(json.dumps(["fleas bite", "bread", {"id": "x", "text": "flea eggs hatch"}]))
    done = decirank("rerank", str(docs), "--query", "flea", "--model", "lexical", "--json")
    assert done.returncode == 0, done.stderr
    assert {r["id"] for r in json.loads(done.stdout)["results"][:2]} == {0, "x"}
    done = decirank(
        "filter", str(docs), "--question", "Is it about fleas?", "--state", "fleas", "--model", "lexical", "--json"
    )
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
    """Input the tool refuses prints one line naming what was wrong, and exits with 2."""
    args = [str(items_file) if arg == "ITEMS" else arg for arg in args]
    done = decirank(*args)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_an_items_file_that_is_not_json_is_one_line_naming_items(tmp_path):
    """A broken JSON array is refused as bad input for items, without a traceback."""
    path = tmp_path / "obj.json"
    path.write_text("[1, 2")
    done = decirank("rank", str(path), "-i", "Which?", "-s", "{}", "--model", "lexical")
    assert done.returncode == 2 and "items" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["rank", "ITEMS", "-i", "Which?", "-s", "{}", "--top-k", "many"], "Invalid value for '--top-k'"),
        (["rerank", "ITEMS", "-q", "fleas", "--timeout", "soon"], "Invalid value for '--timeout'"),
        (["filter", "ITEMS", "-s", "{}"], "Missing option '--question'"),
        (["rank", "-i", "Which?", "-s", "{}"], "Missing argument 'ITEMS'"),
        (["rank", "ITEMS", "-i", "Which?", "-s", "{}", "--jsn"], "No such option: --jsn"),
        (["sort", "ITEMS"], "No such command 'sort'"),
    ],
)
def test_command_line_mistakes_are_one_line_on_stderr_and_exit_2(items_file, args, message):
    """What the command-line parser refuses (a bad number, a missing argument) is one line too, with where to look."""
    done = decirank(*[str(items_file) if arg == "ITEMS" else arg for arg in args])
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and message in done.stderr
    assert "--help" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_items_that_look_like_markup_are_printed_as_they_are():
    """An item such as "[/path]" is text in the table, not a closing tag that breaks it."""
    done = decirank("rank", "-", "-i", "Which?", "-s", "fleas", "-m", "lexical", input='["see [/path]", "[bold]fleas"]')
    assert done.returncode == 0, done.stderr
    assert "see [/path]" in done.stdout and "[bold]fleas" in done.stdout


def test_an_items_file_that_is_not_utf8_is_one_line_naming_items(tmp_path):
    """Bytes that are not UTF-8 are bad input for items, not a decoding traceback."""
    path = tmp_path / "items.json"
    path.write_bytes(b'\xff\xfe["a"]')
    done = decirank("rank", str(path), "-i", "Which?", "-s", "{}", "--model", "lexical")
    assert done.returncode == 2
    assert done.stderr.strip() == "error: items: expected UTF-8 text (byte 0 is not UTF-8)"

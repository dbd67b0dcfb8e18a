"""The tools on the command line, run as real subprocesses."""

from __future__ import annotations

import json
import os

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
    assert "DOCUMENTS.0" in done.stderr
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
        (
            ["rank", "ITEMS", "-i", "Which?", "-s", "{}", "--model", "lexical", "--top-k", "0"],
            "--top-k: expected an integer of at least 1",
        ),
        (["rank", "ITEMS", "-i", "Which?", "-s", "{}", "--model", "lexical", "--describe", "nope"], "item 0"),
        (
            ["rank", "missing.json", "-i", "Which?", "-s", "{}", "--model", "lexical"],
            "ITEMS: expected a JSON or JSON Lines file",
        ),
        # what the user gave is quoted as given, though it reads like an option's Python name
        (["rank", "top_k.json", "-i", "Which?", "-s", "{}", "--model", "lexical"], "(no file 'top_k.json')"),
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
    """Bytes that are not UTF-8 are bad input for ITEMS, not a decoding traceback."""
    path = tmp_path / "items.json"
    path.write_bytes(b'\xff\xfe["a"]')
    done = decirank("rank", str(path), "-i", "Which?", "-s", "{}", "--model", "lexical")
    assert done.returncode == 2
    assert done.stderr.strip() == "error: ITEMS: expected UTF-8 text (byte 0 is not UTF-8)"


def test_rank_and_filter_need_no_state(items_file):
    """--state is optional for rank and filter, as it is for decirank batch."""
    done = decirank("rank", str(items_file), "-i", "Which is about fleas?", "-d", "title", "-m", "lexical", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["items"][0]["title"] == "fleas and their life cycle"
    done = decirank("filter", str(items_file), "-q", "Is this about fleas?", "-d", "title", "-m", "local", "--json")
    assert done.returncode == 0, done.stderr
    assert [item["title"] for item in json.loads(done.stdout)["items"]] == ["fleas and their life cycle"]


def test_classify_takes_options_none_and_examples_and_prints_a_table(tmp_path):
    """decirank classify: --options as a,b or JSON, --none, --examples; a row per text with its choice."""
    texts = tmp_path / "texts.json"
    texts.write_text(json.dumps(["my dog has fleas", "bake bread at home", "the stock market fell"]))
    examples = tmp_path / "examples.jsonl"
    examples.write_text(json.dumps({"state": "cats get fleas", "answer": "pets"}) + "\n")
    done = decirank(
        "classify", str(texts), "-q", "Which topic?", "--options", "pets,food", "--none", "money and markets",
        "--examples", str(examples), "-m", "local", "--json",
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    choices = [d["choice"] for d in data["decisions"]]
    options = {"pets", "food", "money and markets"}  # none as the caller wrote it
    assert choices[0] == "pets" and choices[2] == "money and markets" and set(choices) <= options
    assert set(data["decisions"][0]["probabilities"]) == options
    done = decirank(
        "classify", "-", "-q", "Which topic?", "--options", '{"pets": "animals", "food": "cooking"}', "-m",
        "lexical", input=json.dumps(["my dog has fleas"]),
    )
    assert done.returncode == 0, done.stderr
    assert any("pets" in line and "my dog has fleas" in line for line in done.stdout.splitlines())
    assert "lexical:bm25" in done.stdout


def test_score_takes_true_false_and_stored_examples(tmp_path):
    """decirank score: a probability per text, with --true/--false and a stored example set."""
    examples = tmp_path / "reviews.jsonl"
    examples.write_text(
        "\n".join(json.dumps(e) for e in [
            {"state": "a warm, funny film", "answer": True}, {"state": "a dull mess", "answer": False},
        ])
    )
    assert decirank("examples", "add", "reviews", str(examples)).returncode == 0
    texts = tmp_path / "texts.jsonl"
    texts.write_text('"a wonderful film, I loved it"\n"my parcel has not arrived"\n')
    done = decirank(
        "score", str(texts), "-q", "Is this a positive film review?", "--true", "a positive film review",
        "--false", "anything else", "--examples", "reviews", "-m", "local", "--json",
    )
    assert done.returncode == 0, done.stderr
    first, second = json.loads(done.stdout)["probabilities"]
    assert first > second
    done = decirank("score", str(texts), "-q", "Is this a positive film review?", "-m", "local")
    assert done.returncode == 0, done.stderr
    assert any("my parcel has not arrived" in line for line in done.stdout.splitlines())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["classify", "TEXTS", "-q", "Which?", "--options", "only", "-m", "lexical"], "options"),
        (["classify", "TEXTS", "-q", "Which?", "-m", "lexical"], "Missing option '--options'"),
        (["score", "TEXTS", "-q", " ", "-m", "lexical"], "question"),
        (["score", "TEXTS", "-q", "Is it?", "--examples", "no-such-set", "-m", "lexical"], "--examples"),
    ],
)
def test_classify_and_score_refuse_bad_input_in_one_line(tmp_path, args, message):
    """A bad option of classify or score is one line on stderr naming it, and exit 2."""
    texts = tmp_path / "texts.json"
    texts.write_text('["a", "b"]')
    done = decirank(*[str(texts) if arg == "TEXTS" else arg for arg in args])
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_role_link_without_its_key_is_skipped_and_said_on_stderr(items_file):
    """A role whose first model lacks its API key answers with the next one, and says so in one warning line."""
    env = {key: value for key, value in os.environ.items() if key != "TYPESAFE_API_KEY"}
    env["DECIRANK_ROLE_DECIDER"] = "typesafe:jev-latest,lexical"
    done = decirank("rank", str(items_file), "-i", "Which is about fleas?", "-d", "title", "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["model"] == "lexical:bm25"
    (warning,) = done.stderr.strip().splitlines()
    assert warning.startswith("warning: decider: typesafe:jev-latest skipped") and "TYPESAFE_API_KEY" in warning
    assert warning.endswith("trying lexical:bm25")


def test_score_prints_the_models_notes_under_its_table(tmp_path):
    """A text that does not look English is named under the table, not refused."""
    texts = tmp_path / "texts.json"
    german = "Der Hund spielt im Garten mit dem Ball und die Kinder schauen zu, weil es ein schöner Tag ist."
    texts.write_text(json.dumps([german, "my cat sleeps all day"]))
    done = decirank("score", str(texts), "--question", "Is this about pets?", "-m", "local")
    assert done.returncode == 0, done.stderr
    assert "note: text 0: non_english" in done.stdout
    assert "note: text 1" not in done.stdout

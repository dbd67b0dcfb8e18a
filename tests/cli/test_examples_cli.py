"""``decirank examples`` and ``decirank filter --examples FILE|NAME``, run as real subprocesses."""

from __future__ import annotations

import json

import pytest

from decirank.stores.examples import ExampleStore
from decirank.stores.runlog import current_runlog
from tests.cli._run import decirank
from tests.tools.test_filter_examples import EXAMPLES, ITEMS, PETS

SET = [{"state": "I love my dog", "answer": True}, {"state": "ünïcode\ncar", "answer": False}]


def test_add_ls_show_rm_round_trip(tmp_path, isolated_user_dir):
    """A set goes in from a JSON Lines file or a JSON array on stdin, lists, shows back exactly, and is removed."""
    source = tmp_path / "pets.jsonl"
    source.write_text("".join(json.dumps(example) + "\n" for example in SET), encoding="utf-8")
    added = decirank("examples", "add", "pets", str(source))
    assert added.returncode == 0, added.stderr
    assert "stored 2 example(s) as pets" in added.stderr
    assert decirank("examples", "add", "cars", "-", input=json.dumps(SET[1:])).returncode == 0
    assert (isolated_user_dir / "examples" / "pets.jsonl").is_file()

    listed = json.loads(decirank("examples", "ls", "--json").stdout)
    assert [(entry["name"], entry["count"]) for entry in listed] == [("cars", 1), ("pets", 2)]
    table = decirank("examples", "ls")
    assert table.returncode == 0 and "pets" in table.stdout and "2 set(s)" in table.stdout

    shown = decirank("examples", "show", "pets")
    assert [json.loads(line) for line in shown.stdout.splitlines()] == SET
    assert json.loads(decirank("examples", "show", "pets", "--json").stdout) == SET
    copy = tmp_path / "copy.jsonl"
    copy.write_text(shown.stdout, encoding="utf-8")
    assert decirank("examples", "add", "copy", str(copy)).returncode == 0
    assert ExampleStore().get("copy") == SET

    assert decirank("examples", "rm", "pets").returncode == 0
    gone = decirank("examples", "show", "pets")
    assert gone.returncode == 2
    assert gone.stderr == "error: name: expected a stored example set (no example set 'pets'; known sets: cars, copy)\n"
    assert decirank("examples", "rm", "pets").returncode == 2


@pytest.mark.parametrize(
    ("args", "stdin", "start"),
    [
        (("examples", "add", "../up", "-"), "[]", "error: name: expected an example set name"),
        (("examples", "add", "s", "-"), '[{"state": "x", "answer": 2}]', "error: examples.0.answer: expected true"),
        (("examples", "add", "s", "-"), '[{"text": "x", "answer": true}]', "error: examples.0: expected an object"),
        (("examples", "add", "s", "-"), "[]", "error: examples: expected at least one example"),
        (("examples", "add", "s", "-"), "[{]", "error: examples: expected a JSON array"),
        (("examples", "add", "s", "no-such-file.jsonl"), None, "error: examples: expected a JSON or JSON Lines file"),
        (("examples", "show", "a b"), None, "error: name: expected an example set name"),
    ],
)
def test_bad_input_is_one_line_on_stderr_and_exit_2(args, stdin, start):
    """Each bad name, example or file is one line naming the field; nothing is stored."""
    done = decirank(*args, input=stdin)
    assert done.returncode == 2
    assert done.stderr.startswith(start), done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert ExampleStore().names() == []


def test_filter_reads_examples_from_a_file(tmp_path):
    """--examples FILE takes {"item", "answer"} lines; the run log records what the model was taught."""
    items = tmp_path / "items.json"
    items.write_text(json.dumps([{"title": "cat"}, {"title": "bus"}]), encoding="utf-8")
    examples = tmp_path / "examples.jsonl"
    examples.write_text('{"item": {"title": "dog"}, "answer": true}\n{"state": "car", "answer": false}\n')
    done = decirank("filter", str(items), "-q", "Pet?", "-s", "", "-d", "title", "--examples", str(examples),
                    "--model", "lexical", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    inputs = current_runlog().run(json.loads(done.stdout)["run_id"])["inputs"]
    assert inputs["examples"] == [{"state": "dog", "answer": True}, {"state": "car", "answer": False}]


def test_filter_uses_a_stored_set_by_name_and_it_teaches_the_local_model(tmp_path):
    """--examples NAME is a set added with decirank examples add; with it the embedded model keeps the pets."""
    stored = [{"state": example["item"], "answer": example["answer"]} for example in EXAMPLES]
    assert decirank("examples", "add", "pets", "-", input=json.dumps(stored)).returncode == 0
    items = tmp_path / "items.json"
    items.write_text(json.dumps(ITEMS), encoding="utf-8")
    done = decirank("filter", str(items), "-q", "Does it match?", "-s", "", "--examples", "pets", "--json")
    assert done.returncode == 0, done.stderr
    assert [decision["kept"] for decision in json.loads(done.stdout)["decisions"]] == PETS


def test_filter_names_a_missing_file_or_set(tmp_path):
    """An --examples value that is neither a file nor a stored set is one line naming the option and the known sets."""
    ExampleStore().put("pets", SET)
    items = tmp_path / "items.json"
    items.write_text('["cat"]', encoding="utf-8")
    done = decirank("filter", str(items), "-q", "Pet?", "-s", "", "--examples", "dogs", "--model", "lexical")
    assert done.returncode == 2
    assert done.stderr.startswith("error: --examples: expected a JSON or JSON Lines file of examples")
    assert "no file or example set 'dogs'; known sets: pets" in done.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('[{"item": "dog", "answer": "yes"}]', encoding="utf-8")
    wrong = decirank("filter", str(items), "-q", "Pet?", "-s", "", "--examples", str(bad), "--model", "lexical")
    assert wrong.returncode == 2 and wrong.stderr.startswith("error: --examples.0.answer: expected true or false")


def test_filter_needs_no_state(tmp_path):
    """decirank filter without --state asks about an empty state ({}), as the README's example-set command does."""
    ExampleStore().put("pets", SET)
    items = tmp_path / "items.json"
    items.write_text('["my cat sleeps", "rates rose"]', encoding="utf-8")
    done = decirank("filter", str(items), "-q", "Is this about pets?", "--examples", "pets", "-m", "lexical", "--json")
    assert done.returncode == 0, done.stderr
    run = current_runlog().run(json.loads(done.stdout)["run_id"])
    assert run["inputs"]["state"] == {} and len(json.loads(done.stdout)["decisions"]) == 2


ITEM_ROWS = [{"item": "I loved every minute of it", "answer": True}, {"item": "Two hours lost", "answer": False}]


@pytest.mark.parametrize("tool", ["score", "classify", "filter"])
def test_every_tool_takes_the_item_rows_examples_add_stores(tmp_path, tool):
    """The {"item", "answer"} rows filter --examples and examples add take work for score and classify too."""
    labels = [{**row, "answer": "yes" if row["answer"] else "no"} for row in ITEM_ROWS]
    rows = labels if tool == "classify" else ITEM_ROWS
    examples = tmp_path / "labelled.jsonl"
    examples.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    texts = tmp_path / "reviews.jsonl"
    texts.write_text('"A moving film."\n"A dull mess."\n', encoding="utf-8")
    extra = ("--options", "yes,no") if tool == "classify" else ()
    question = ("--question", "Is this review positive?", *extra)
    ran = decirank(tool, str(texts), *question, "--examples", str(examples), "--model", "lexical", "--json")
    assert ran.returncode == 0, ran.stderr
    stored = decirank("examples", "add", f"rows-{tool}", str(examples))
    assert stored.returncode == 0, stored.stderr


def test_an_example_of_other_keys_says_it_is_an_object_and_which_keys(tmp_path):
    """A row of other keys is named as an object with its keys, never as a list, for every tool."""
    examples = tmp_path / "labelled.jsonl"
    examples.write_text('{"text": "I loved it", "answer": true}\n', encoding="utf-8")
    for tool in ("score", "filter"):
        question = ("--question", "Is it positive?")
        ran = decirank(tool, "-", *question, "--examples", str(examples), "--model", "lexical", input='["a film"]')
        assert ran.returncode == 2
        assert ran.stderr == (
            'error: --examples.0: expected an object {"item" or "state", "answer"} '
            "(it is an object with the keys 'text', 'answer')\n"
        ), tool

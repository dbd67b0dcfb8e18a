"""The tool commands made from the tools' definitions, and what they print.

The options, their help and defaults are read off each tool's signature, so these check
the commands against the definitions rather than against a list written here. Each tool
command runs in this process through :func:`decirank.cli.main`, the console script's entry
point, with its streams captured (a pipe, as far as the output knows); the terminal's layout
runs a real subprocess.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import Annotated, Any, Literal

import pytest
import typer
from pydantic import BaseModel, Field
from typer.testing import CliRunner

from decirank.cli import app, main
from decirank.cli._commands import READERS, flags, option_type, tool_arguments, tool_command
from decirank.cli._output import cost_text
from decirank.tools._definition import Cli, ToolDefinition
from decirank.tools._params import StateParam
from decirank.tools.registry import definitions

TOOL_COMMANDS = {d.name: d for d in definitions() if d.name in {"rank", "rerank", "filter", "classify", "score"}}
#: A text longer than any table cut, with a word at its end to look for.
LONG = "a cat " + "that sleeps on the warm windowsill all afternoon " * 8 + "THE-END"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def texts(tmp_path):
    path = tmp_path / "texts.json"
    path.write_text(json.dumps(["a car", LONG, "a stock market"]))
    return str(path)


# -- the options are the definition's ------------------------------------------------------------


@pytest.mark.parametrize("name", TOOL_COMMANDS)
def test_each_parameter_is_an_option_with_its_flags_help_and_default(name):
    definition = TOOL_COMMANDS[name]
    command = typer.main.get_command(app).commands[definition.command]  # type: ignore[attr-defined]
    params = {param.name: param for param in command.params}
    for parameter in definition.offered("cli"):
        param = params[parameter.name]
        if parameter.cli.argument:
            assert param.param_type_name == "argument" and param.required
            assert param.metavar == (parameter.cli.metavar or parameter.name.upper())
            continue
        assert set(flags(parameter)) <= set(param.opts), parameter.name
        assert param.required == parameter.required, parameter.name
        first_words = parameter.help.split(",")[0].split(".")[0]
        assert param.help.startswith(first_words), (parameter.name, param.help)
        # A default the option can hold is its own, shown by --help; another ("auto") is the tool's to apply.
        if type(parameter.default) in (int, float, str) and option_type(parameter) is type(parameter.default):
            assert param.default == parameter.default and param.show_default, parameter.name
        elif parameter.default is not None and not isinstance(parameter.default, bool):
            assert param.default is None, parameter.name


def test_the_flags_people_type_still_work():
    """The short flags and the names the commands had before they were made from the definitions."""
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    expected = {
        "rank": {"top_k": ["-k", "--top-k"], "instructions": ["-i"], "state": ["-s"], "describe": ["-d"]},
        "rerank": {"query": ["-q"], "max_documents_per_call": ["--per-call"], "model": ["-m"]},
        "filter": {"question": ["-q"], "max_items_per_call": ["--per-call"], "target_recall": ["--target-recall"]},
        "classify": {"options": ["--options"], "calibration": ["--calibration"], "coverage": ["--coverage"]},
        "score": {"max_concurrency": ["--max-concurrency"], "true": ["--true"], "false": ["--false"]},
    }
    for command, options in expected.items():
        params = {param.name: param for param in commands[command].params}
        for name, names in options.items():
            assert set(names) <= set(params[name].opts), (command, name)


def test_every_reader_a_tool_names_is_one_the_command_line_has():
    named = {p.cli.read for d in definitions() for p in d.offered("cli") if p.cli.read}
    assert named <= set(READERS)


def test_an_option_not_given_leaves_the_tools_own_default(texts):
    """rerank's timeout is "auto" unless --timeout is given; only filter and rerank draw a progress bar."""
    rerank, rank, filter_ = TOOL_COMMANDS["rerank"], TOOL_COMMANDS["rank"], TOOL_COMMANDS["filter"]
    given = {"query": "q", "documents": texts, "timeout": None, "top_k": None, "model": "decider", "as_json": False}
    arguments = tool_arguments(rerank, given)
    assert "timeout" not in arguments and rerank.parameter("timeout").default == "auto"
    assert arguments["show_progress"] is True
    assert tool_arguments(rerank, {**given, "timeout": 3.0})["timeout"] == 3.0
    assert "show_progress" not in tool_arguments(rank, {"instructions": "Which?"})
    assert tool_arguments(filter_, {"question": "Is it?"})["show_progress"] is True


# -- a new parameter is an option with no edit to the command line --------------------------------


class _Echoed(BaseModel):
    arguments: dict[str, Any]


class _Echo:
    def __init__(self, arguments: dict[str, Any]) -> None:
        self.arguments = arguments

    def to_dict(self) -> dict[str, Any]:
        return {"arguments": self.arguments}


async def _echo(
    items: Annotated[list[Any], Field(description="The list."), Cli(argument=True, read="items")],
    question: Annotated[str, Field(description="The question."), Cli(flags=("--question", "-q"))],
    state: StateParam = None,
    *,
    rounds: Annotated[int, Field(description="How many rounds.")] = 3,
    mood: Annotated[Literal["calm", "brisk"] | None, Field(description="The mood.")] = None,
    strict_mode: Annotated[bool, Field(description="Refuse what is odd.")] = False,
) -> _Echo:
    """A tool that gives back what it was called with."""
    return _Echo({"items": items, "question": question, "state": state, "rounds": rounds, "mood": mood,
                  "strict_mode": strict_mode})


ECHO = ToolDefinition(
    _echo, name="echo", title="Echo", description="Gives back its arguments.", result=_Echoed, command="echo",
    route="/v1/echo",
)


def _echo_app() -> typer.Typer:
    echo_app = typer.Typer(rich_markup_mode=None)
    echo_app.command(name="echo")(tool_command(ECHO, lambda result, arguments: print("rendered", result.arguments)))
    echo_app.command(name="other")(lambda: None)  # two commands, so "echo" is named on the command line
    return echo_app


def test_a_tool_definition_is_a_command_with_no_more_written():
    runner = CliRunner()
    done = runner.invoke(
        _echo_app(), ["echo", "-", "-q", "Why?", "--state", '{"a": 1}', "--mood", "brisk", "--strict-mode", "--json"],
        input="x\ny\n",
    )
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["arguments"] == {
        "items": ["x", "y"], "question": "Why?", "state": {"a": 1}, "rounds": 3, "mood": "brisk", "strict_mode": True,
    }
    rendered = runner.invoke(_echo_app(), ["echo", "-", "-q", "Why?", "--rounds", "5"], input='["x"]')
    assert rendered.exit_code == 0, rendered.output
    assert "rendered" in rendered.stdout and "'rounds': 5" in rendered.stdout and "'state': None" in rendered.stdout
    helped = runner.invoke(_echo_app(), ["echo", "--help"], terminal_width=200).stdout
    assert "Gives back its arguments." in helped
    assert re.search(r"--rounds\s+<int>\s+How many rounds\.\s+\[default: 3\]", helped), helped
    assert "--mood" in helped and "calm" in helped and "--format" in helped
    refused = runner.invoke(_echo_app(), ["echo", "-", "-q", "Why?", "--mood", "sleepy"], input='["x"]')
    assert refused.exit_code == 2 and "sleepy" in refused.output


# -- what the commands print -------------------------------------------------------------------


def test_hash_is_the_input_index_on_every_tool_and_rank_is_the_order(capsys, texts):
    code, out, _ = _run(capsys, "rank", texts, "-i", "Which is about markets?", "-m", "lexical")
    assert code == 0
    header, *rows = [line.split("\t") for line in out.splitlines()[:4]]
    assert header == ["rank", "#", "probability", "item"]
    assert [row[0] for row in rows] == ["1", "2", "3"]
    assert rows[0][1] == "2" and rows[0][3] == "a stock market", "the best item is the third given"
    code, out, _ = _run(capsys, "rerank", texts, "-q", "stock market", "-m", "lexical")
    header, first = [line.split("\t") for line in out.splitlines()[:2]]
    assert header == ["rank", "#", "relevance", "id", "document"] and first[:2] == ["1", "2"]
    for command in (("filter", texts, "-q", "Is it about cars?"), ("score", texts, "-q", "Is it about cars?"),
                    ("classify", texts, "-q", "Which?", "--options", "cars,money")):
        code, out, err = _run(capsys, *command, "-m", "local")
        assert code == 0, err
        header, *rows = [line.split("\t") for line in out.splitlines()[:4]]
        assert header[0] == "#" and [row[0] for row in rows] == ["0", "1", "2"], command[0]
        assert rows[0][-1] == "a car", command[0]


@pytest.mark.parametrize(
    "command",
    [
        ("rank", "-i", "Which is about a cat?", "-m", "lexical"),
        ("rerank", "-q", "a cat", "-m", "lexical"),
        ("filter", "-q", "Is it about a cat?", "-m", "local"),
        ("score", "-q", "Is it about a cat?", "-m", "local"),
        ("classify", "-q", "Which?", "--options", "cats,money", "-m", "local"),
    ],
    ids=lambda command: command[0],
)
def test_piped_output_keeps_every_text_whole(capsys, texts, command):
    """The README's promise: piped output is never cut or folded, so grep finds the whole text on its line."""
    code, out, err = _run(capsys, command[0], texts, *command[1:])
    assert code == 0, err
    assert any(line.endswith("\t" + LONG) for line in out.splitlines()), out


def test_a_terminal_table_fits_its_width(texts):
    env = {**os.environ, "TTY_COMPATIBLE": "1", "COLUMNS": "80"}
    command = [sys.executable, "-m", "decirank", "rank", texts, "-i", "Which?", "-m", "lexical"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    lines = [ANSI.sub("", line) for line in done.stdout.splitlines()]
    assert max(len(line) for line in lines) <= 80, lines
    assert "THE-END" not in done.stdout, "a long text is cut on a terminal"


def test_a_local_run_says_it_is_free(capsys, texts):
    code, out, _ = _run(capsys, "score", texts, "-q", "Is it about cars?", "-m", "local")
    assert code == 0
    usage = out.splitlines()[-1]
    assert usage.startswith("model local:") and usage.endswith("free (local model)") and "$" not in usage
    code, out, _ = _run(capsys, "rank", texts, "-i", "Which?", "-m", "lexical")
    assert out.splitlines()[-1].endswith("free (local model)")


def test_a_hosted_runs_cost_is_its_price_or_unknown():
    assert cost_text(0.0012, 2, model="openai:gpt-6-luna") == "$0.001200"
    assert cost_text(0.0, 1, model="typesafe:jev-latest") == "$0.000000"
    assert cost_text(None, 3, model="ollama:default") == "unknown"
    assert cost_text(None, 0) == "$0.000000"
    assert cost_text(0.0, 1, model="local:default") == "free (local model)"


def test_an_unknown_model_lists_the_models_and_roles_it_knows(capsys, texts):
    code, _, err = _run(capsys, "rank", texts, "-i", "Which?", "--model", "nosuch")
    assert code == 2
    (line,) = err.strip().splitlines()
    assert line.startswith("error: unknown model or role 'nosuch'")
    known = line.split("(known: ")[1].rstrip(")").split(", ")
    assert {"decider", "local", "lexical", "ollama"} <= set(known)


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("filter", "TEXTS", "-q", "Is it?", "-m", "lexical", "--min-confidence", "2"), "--min-confidence: expected"),
        (("filter", "TEXTS", "-q", "Is it?", "-m", "lexical", "--per-call", "0"), "--per-call: expected"),
        (("rerank", "TEXTS", "-q", "cars", "-m", "lexical", "--min-relevance", "-1"), "--min-relevance: expected"),
        (("score", "TEXTS", "-q", "Is it?", "-m", "lexical", "--max-concurrency", "0"), "--max-concurrency: expected"),
        (("classify", "TEXTS", "-q", "Which?", "--options", "a,b", "--coverage", "0.9", "-m", "lexical"),
         "--calibration"),
        (("score", "TEXTS", "-q", "Is it?", "--levels", "high", "-m", "lexical"), "--levels"),
    ],
)
def test_bad_input_names_the_option_as_typed(capsys, texts, args, named):
    code, _, err = _run(capsys, *[texts if arg == "TEXTS" else arg for arg in args])
    assert code == 2
    (line,) = err.strip().splitlines()
    assert named in line and "_" not in line.split(":")[0], line


def test_format_reads_standard_input_as_told(capsys, monkeypatch):
    import io

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b'["not", "an array"]\nsecond line\n')))
    code, out, err = _run(capsys, "score", "-", "-q", "Is it a line?", "-m", "lexical", "--format", "text", "--json")
    assert code == 0, err
    assert len(json.loads(out)["probabilities"]) == 2

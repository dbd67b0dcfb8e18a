"""Every shell and Python block of the README and of ``docs/`` runs as written, as a reader would run it.

Each ```sh and ```python block of ``README.md`` and of every ``docs/**/*.md`` is one test (its id is
``FILE:LINE-LANGUAGE``), run in a subprocess in a working folder that holds ``examples/``, where the
files the commands name are (``examples/items.json``, ...). The blocks of one file share one user
folder (``DECIRANK_HOME``), in document order, so a block may use what an earlier one of the same
file stored, and a page never depends on another page having run first; the default role is
``lexical`` there, so no block waits on a model load.

A file a block names that is not there yet goes in ``examples/``, so a reader has it too. An HTML comment on
the line just above a block says how to run it:

- ``<!-- not-run: REASON -->``: the block is skipped, with REASON (a hosted key, a cluster, a
  fragment of a program of your own); the skip lists it.
- ``<!-- run-with: SERVER[, the TOML above as config.toml] -->``: SERVER (``decirank serve`` or
  ``sparrow-decider serve``) is started on a free port, which replaces ``127.0.0.1:8000`` in the
  block; with the second part, the nearest TOML block above is the block's ``config.toml`` (in a
  user folder of its own, whose default role is the config's).

``pip install`` lines are not run (the suite runs where decirank and its extras are installed),
but what they install is checked: decirank from the checkout (``.`` or ``'.[extra]'``), with
extras that pyproject.toml declares. ``RUN_ID`` stands for the newest run's id.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.loopback import free_port, subprocess_server

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: The README first, then the documentation pages in path order (a page's blocks stay in document order).
DOCUMENTS = [README, *sorted((ROOT / "docs").rglob("*.md"))]
RUN_LANGUAGES = {"sh": "sh", "bash": "sh", "python": "python"}
DIRECTIVE = re.compile(r"<!--\s*(?P<kind>[a-z-]+):\s*(?P<text>.*?)\s*-->")
SERVERS = ("decirank serve", "sparrow-decider serve")
DEFAULT_PORT = "127.0.0.1:8000"


@dataclass(frozen=True)
class Block:
    #: The file, relative to the checkout (``README.md``, ``docs/tools.md``): the blocks of one file share a user folder.
    source: str
    line: int
    language: str
    code: str
    #: The directive above the block: (kind, text), or None.
    directive: tuple[str, str] | None
    #: The nearest TOML block above this one, if any.
    toml_above: str | None

    @property
    def id(self) -> str:
        return f"{self.source}:{self.line}-{self.language}"


def readme_blocks(text: str, source: str = "README.md") -> list[Block]:
    """The fenced blocks of ``text`` (the file ``source``) in the languages the test runs, each with its directive."""
    lines = text.splitlines()
    blocks: list[Block] = []
    toml_above = None
    index = 0
    while index < len(lines):
        opening = re.fullmatch(r"```(\w*)\s*", lines[index])
        if opening is None:
            index += 1
            continue
        language, start = opening.group(1), index
        end = next(i for i in range(start + 1, len(lines)) if lines[i].strip() == "```")
        code = "\n".join(lines[start + 1 : end]) + "\n"
        if language == "toml":
            toml_above = code
        elif language in RUN_LANGUAGES:
            above = next((lines[i] for i in range(start - 1, -1, -1) if lines[i].strip()), "")
            found = DIRECTIVE.fullmatch(above.strip())
            directive = (found["kind"], found["text"]) if found else None
            blocks.append(Block(source, start + 1, RUN_LANGUAGES[language], code, directive, toml_above))
        index = end + 1
    return blocks


BLOCKS = [
    block
    for document in DOCUMENTS
    for block in readme_blocks(document.read_text(encoding="utf-8"), document.relative_to(ROOT).as_posix())
]


def test_the_extraction_finds_blocks_and_their_directives():
    """The parser sees fences, languages, the directive on the line above and the TOML above; others are left."""
    text = (
        "```toml\n[a]\nb = 1\n```\n\n<!-- not-run: needs a key -->\n```sh\necho hi\n```\n"
        "```python\nx = 1\n```\n```text\nnot code\n```\n"
    )
    first, second = readme_blocks(text)
    assert (first.language, first.code, first.directive, first.toml_above) == (
        "sh",
        "echo hi\n",
        ("not-run", "needs a key"),
        "[a]\nb = 1\n",
    )
    assert (second.language, second.directive) == ("python", None)


def test_blocks_come_from_the_readme_and_the_docs():
    """The README and the documentation pages both have blocks, each test named by its file and line."""
    sources = {block.source for block in BLOCKS}
    assert "README.md" in sources and any(source.startswith("docs/") for source in sources), sources
    assert len({block.id for block in BLOCKS}) == len(BLOCKS)


def test_every_directive_is_known_and_says_why():
    """A directive is not-run with a reason or run-with a known server, so a typo cannot skip a block."""
    assert len(BLOCKS) >= 10
    for block in BLOCKS:
        if block.directive is None:
            continue
        kind, text = block.directive
        assert kind in ("not-run", "run-with"), f"{block.id}: unknown directive {kind!r}"
        assert text, f"{block.id}: {kind} says nothing"
        if kind == "run-with":
            assert any(server in text for server in SERVERS), f"{block.id}: no known server in {text!r}"


# --- pip install lines: checked, not run ------------------------------------------------------


def _extras() -> set[str]:
    return set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])


def pip_problems(code: str, extras: set[str]) -> list[str]:
    """What is wrong with the ``pip install`` commands of ``code``: decirank not from the checkout, unknown extras."""
    problems = []
    for line in code.splitlines():
        try:
            tokens = shlex.split(line, comments=True)
        except ValueError:  # a line a shell would continue (an open quote): not a pip command of its own
            continue
        for start in (i for i in range(len(tokens) - 1) if tokens[i : i + 2] == ["pip", "install"]):
            for requirement in tokens[start + 2 :]:
                if requirement in ("&&", "||", ";"):
                    break
                if requirement.startswith("-"):
                    continue
                if requirement.lower().startswith("decirank"):
                    problems.append(f"{requirement!r}: decirank installs from a checkout, as '.' or '.[extra]'")
                elif requirement.startswith("."):
                    named = re.fullmatch(r"\.(?:\[([\w,-]*)\])?", requirement)
                    unknown = set(named.group(1).split(",")) - extras if named and named.group(1) else set()
                    if named is None or unknown:
                        problems.append(f"{requirement!r}: no such extra {sorted(unknown) or requirement}")
    return problems


def test_pip_lines_are_checked():
    """The check refuses decirank[...] from an index and unknown extras, and takes what pyproject declares."""
    extras = {"server", "mcp"}
    fine = "pip install '.[server,mcp]' langchain-classic\npip install .  # or pip install 'decirank[x]' elsewhere\n"
    assert pip_problems(fine, extras) == []
    assert len(pip_problems("pip install 'decirank[server]'\npip install '.[nope]'\n", extras)) == 2


# --- the working folder and the servers ---------------------------------------------------------


def _write_files(folder: Path) -> None:
    """The files the blocks' commands name: ``examples/``, shipped with the checkout, as a reader has it."""
    (folder / "examples").symlink_to(ROOT / "examples", target_is_directory=True)


@pytest.fixture(scope="module")
def workspaces(tmp_path_factory) -> dict[str, dict[str, Path]]:
    """Per file, made when its first block runs: a working folder with the files, and the user folder its blocks share."""
    return {}


@pytest.fixture
def workspace(block: Block, workspaces, tmp_path_factory) -> dict[str, Path]:
    """The working folder and the user folder of ``block``'s file."""
    if block.source not in workspaces:
        folder = tmp_path_factory.mktemp("blocks")
        _write_files(folder)
        workspaces[block.source] = {"folder": folder, "home": tmp_path_factory.mktemp("blocks-home")}
    return workspaces[block.source]


def _environment(home: Path, *, default_role: str | None) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("DECIRANK_")}
    env |= {"DECIRANK_HOME": str(home), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"}
    if default_role is not None:
        env["DECIRANK_ROLE_DECIDER"] = default_role
    return env


def _server_command(name: str, port: int) -> tuple[list[str], str]:
    if name == "sparrow-decider serve":
        from tests.backends.test_systemone import sparrow_command

        return sparrow_command(port), "/"
    return [sys.executable, "-m", "decirank", "serve", "--port", str(port)], "/healthz"


@contextmanager
def servers_for(block: Block, env: dict[str, str]) -> Iterator[str]:
    """Start what the block's run-with names; yields the block's code with the servers' port in it."""
    code = block.code
    with ExitStack() as stack:
        if block.directive is not None and block.directive[0] == "run-with":
            for name in SERVERS:
                if name in block.directive[1]:
                    port = free_port()
                    command, ready = _server_command(name, port)
                    url = f"http://127.0.0.1:{port}"
                    stack.enter_context(subprocess_server(command, url, ready_path=ready, env=env, timeout=120))
                    code = code.replace(DEFAULT_PORT, f"127.0.0.1:{port}")
        yield code


def _newest_run_id(env: dict[str, str]) -> str:
    listed = subprocess.run(
        [sys.executable, "-m", "decirank", "runs", "list", "--json", "--limit", "1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    runs = json.loads(listed.stdout)
    assert runs, "RUN_ID stands for the newest run, and no block has run a tool yet: run the blocks in order"
    return runs[0]["id"]


@pytest.mark.parametrize("block", BLOCKS, ids=[block.id for block in BLOCKS])
def test_readme_block_runs(block: Block, workspace, tmp_path):
    """The block runs to a zero exit, as written, with the files and servers it names."""
    if block.directive is not None and block.directive[0] == "not-run":
        pytest.skip(f"{block.id} is marked not-run: {block.directive[1]}")
    assert pip_problems(block.code, _extras()) == [], block.id
    home, default_role = workspace["home"], "lexical"
    if block.directive is not None and "TOML above" in block.directive[1]:
        assert block.toml_above is not None, f"{block.id}: no TOML block above it"
        home, default_role = tmp_path / "home", None
        home.mkdir()
    env = _environment(home, default_role=default_role)
    with servers_for(block, env) as code:
        if "TOML above" in (block.directive or ("", ""))[1]:
            config = block.toml_above.replace(DEFAULT_PORT, code_port(code))
            (home / "config.toml").write_text(config)
        if "RUN_ID" in code:
            code = code.replace("RUN_ID", _newest_run_id(env))
        if block.language == "sh":
            # pip is checked above, not run: the suite runs where decirank and its extras are installed.
            command = ["bash", "-c", "set -euo pipefail\npip() { :; }\n" + code]
        else:
            command = [sys.executable, "-c", code]
        done = subprocess.run(
            command,
            cwd=workspace["folder"],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    assert done.returncode == 0, f"{block.id} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"


def code_port(code: str) -> str:
    """The ``127.0.0.1:PORT`` a block's code was given (its server's), else the documents' default."""
    found = re.search(r"127\.0\.0\.1:\d+", code)
    return found.group(0) if found else DEFAULT_PORT

"""The README's path to an open decision-model server, end to end: config.toml or --base-url, the CLI, a real server.

``sparrow-decider serve`` is the one of those servers that runs offline here
(numpy only, weights inside its package), so it stands for all of them: a real
subprocess on a free loopback port, driven by ``decirank`` run as a user runs
it. (``test_systemone.py`` covers the Python API and every question type
against the same server.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.backends import test_systemone
from tests.cli._run import PAPERS, RANK_PAPERS, decirank
from tests.loopback import free_port

#: A sparrow-decider server on a free loopback port for this module: test_systemone.py's fixture.
sparrow = test_systemone.sparrow
SPARROW_MODEL = "sparrow-nano-general-v1.1"


def write_config(home: Path, models: list[str], base_url: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f"[roles.decider]\nmodels = {json.dumps(models)}\n\n[providers.systemone]\nbase_url = {json.dumps(base_url)}\n"
    )


def ranked(done) -> dict:
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    papers = json.loads(PAPERS.read_text())
    assert sorted(entry["index"] for entry in result["ranked"]) == list(range(len(papers)))
    assert sum(entry["probability"] for entry in result["ranked"]) == pytest.approx(1.0, abs=0.01)
    return result


def test_the_decider_role_configured_to_an_open_server_ranks_there(sparrow, isolated_user_dir):
    """config.toml as the README shows it: the role names the server's model, the provider its base URL."""
    write_config(isolated_user_dir, [f"systemone:{SPARROW_MODEL}", "local"], sparrow)
    models = decirank("models", "--json")
    assert models.returncode == 0, models.stderr
    assert json.loads(models.stdout)["roles"]["decider"][0] == f"systemone:{SPARROW_MODEL}"

    result = ranked(decirank(*RANK_PAPERS))
    assert result["model"] == f"systemone:{SPARROW_MODEL}", "the server answered, not the local fallback"
    assert result["usage"]["calls"] >= 1


def test_one_call_names_the_server_with_base_url_and_jev_latest(sparrow):
    """No config: -m systemone:jev-latest --base-url, the name every one of these servers accepts."""
    result = ranked(decirank(*RANK_PAPERS, "-m", "systemone:jev-latest", "--base-url", sparrow))
    assert result["model"] == "systemone:jev-latest"


def test_a_server_that_is_down_fails_over_to_local(isolated_user_dir):
    """The README's role puts local after the server: with nothing listening, local answers."""
    write_config(isolated_user_dir, [f"systemone:{SPARROW_MODEL}", "local"], f"http://127.0.0.1:{free_port()}")
    result = ranked(decirank(*RANK_PAPERS))
    assert result["model"].split(":")[0] == "local"

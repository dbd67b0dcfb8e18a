"""``decirank serve`` as a subprocess, and the CLI talking to it through the systemone backend."""

from __future__ import annotations

import importlib.util
import json
import os
import sys

import pytest

from tests.cli._run import decirank
from tests.loopback import free_port, subprocess_server

KEY = "serve-test-key"
ITEMS = [
    {"title": "bread baking at home"},
    {"title": "flea treatment for dogs"},
    {"title": "stock markets today"},
    {"title": "cats get fleas and ticks"},
]
# The embedded model joins these checks once its package is in the tree.
SERVED_MODELS = ["lexical"] + (["local"] if importlib.util.find_spec("decirank.backends.local") else [])


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    return tmp_path_factory.mktemp("serve-home")


@pytest.fixture(scope="module", params=SERVED_MODELS)
def served(request, home):
    """A ``decirank serve`` subprocess whose default is the model of the parameter, with an API key."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "DECIRANK_HOME": str(home), "DECIRANK_SERVER_API_KEY": KEY}
    command = [sys.executable, "-m", "decirank", "serve", "--port", str(port), "--model", request.param]
    with subprocess_server(command, url, ready_path="/healthz", env=env, timeout=120):
        yield request.param, url


@pytest.fixture
def client_env(home):
    return {**os.environ, "DECIRANK_HOME": str(home), "SYSTEMONE_API_KEY": KEY}


@pytest.fixture
def items_file(tmp_path):
    path = tmp_path / "items.json"
    path.write_text(json.dumps(ITEMS))
    return path


def test_rank_through_the_server_orders_as_the_model_itself(served, items_file, client_env):
    """rank with systemone:<model> against the server gives the order and probabilities of <model> run here."""
    model, url = served
    common = [
        "rank",
        str(items_file),
        "-i",
        "Which is about fleas?",
        "-s",
        '{"q": "fleas on pets"}',
        "-d",
        "title",
        "--json",
    ]
    remote = decirank(*common, "--model", f"systemone:{model}", "--base-url", url, env=client_env)
    direct = decirank(*common, "--model", model, env=client_env)
    assert remote.returncode == 0, remote.stderr
    assert direct.returncode == 0, direct.stderr
    remote_data, direct_data = json.loads(remote.stdout), json.loads(direct.stdout)
    assert remote_data["items"] == direct_data["items"]
    assert [r["probability"] for r in remote_data["ranked"]] == pytest.approx(
        [r["probability"] for r in direct_data["ranked"]]
    )
    assert remote_data["model"].startswith("systemone:")


def test_rerank_through_the_server_scores_as_the_model_itself(served, client_env):
    """rerank through the server orders the documents as the same model run here does."""
    model, url = served
    documents = json.dumps([item["title"] for item in ITEMS])
    common = ["rerank", "-", "--query", "fleas on my cat", "--json"]
    remote = decirank(*common, "--model", f"systemone:{model}", "--base-url", url, env=client_env, input=documents)
    direct = decirank(*common, "--model", model, env=client_env, input=documents)
    assert remote.returncode == 0, remote.stderr
    remote_results, direct_results = json.loads(remote.stdout)["results"], json.loads(direct.stdout)["results"]
    assert [r["id"] for r in remote_results] == [r["id"] for r in direct_results]


def test_a_client_without_the_servers_key_gets_one_clear_line(served, items_file, client_env):
    """A server started with an API key refuses a client without it, and the client says so in one line."""
    _, url = served
    env = {name: value for name, value in client_env.items() if name != "SYSTEMONE_API_KEY"}
    done = decirank(
        "rank", str(items_file), "-i", "Which?", "-s", "x", "--model", "systemone", "--base-url", url, env=env
    )
    assert done.returncode == 2
    assert "refused the key (401)" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--log-level", "loud"], "Invalid value for '--log-level'"),
        (["--port", "99999"], "Invalid value for '--port'"),
        (["--model", "lexicl"], "unknown model or role 'lexicl'"),
    ],
)
def test_bad_options_are_refused_before_serving_in_one_line(option, message):
    """A log level uvicorn lacks, a port out of range or an unknown model: one line and exit 2, nothing served."""
    done = decirank("serve", *option)
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_serve_help_lists_every_endpoint_and_the_true_default_budget():
    """serve --help names every tool and rerank endpoint, and the budget a request really gets by default."""
    from decirank.cli.serve import DEFAULT_TIMEOUT
    from decirank.server import DEFAULT_TIMEOUT as SERVER_DEFAULT_TIMEOUT
    from decirank.server.app import create_app

    assert DEFAULT_TIMEOUT == SERVER_DEFAULT_TIMEOUT
    # Unwrapped, so each path reads whole whatever the terminal's width.
    shown = " ".join(decirank("serve", "--help", env={**os.environ, "COLUMNS": "1000"}).stdout.split())
    posted = {route.path for route in create_app("lexical").routes if "POST" in getattr(route, "methods", ())}
    for path in posted:
        assert path in shown, path
    assert f"(default {DEFAULT_TIMEOUT:g}); a rerank gets this plus 20 ms per document" in shown

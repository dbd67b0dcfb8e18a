"""The page at ``/``: its assets and endpoints over HTTP, and the page itself driven in a headless browser.

The browser tests start a real ``decirank serve`` on a free loopback port
(with its own ``DECIRANK_HOME``) and drive Chromium through Playwright. They
skip, saying why, only where no browser can be had: Playwright not installed,
or no Chromium on the machine (``.ci/run`` installs Debian's). Set
``DECIRANK_TEST_BROWSER`` to a Chromium binary to choose another.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import httpx
import pytest

import decirank
from decirank.backends import providers
from decirank.server import create_app
from decirank.stores.artifacts import ArtifactStore
from tests.loopback import ThreadedServer, free_port, subprocess_server

KEY = "page-test-key"
#: The page's three files together stay under this many bytes.
ASSET_BUDGET = 80 * 1024
ASSETS = ("index.html", "app.js", "app.css")
ITEMS = [
    "Flea life cycle: adult fleas live two to three months",
    "Sourdough starter feeding schedule",
    "How to bathe a cat without tears",
    "Dog flea treatments compared",
    "Bicycle chain maintenance",
]
STATE = {"question": "How long do fleas live?"}
INSTRUCTIONS = "Which page answers the question?"
#: Development data beside the checkout (never shipped: research data sets), as the benchmarks find it.
DECISIONS = Path(__file__).resolve().parents[3] / "shared" / "data" / "decisions"


def _asset(name: str) -> str:
    return resources.files("decirank.server").joinpath("static", name).read_text()


# --- over HTTP -----------------------------------------------------------------------------


@pytest.fixture
def keyed():
    """An in-process server (lexical) that wants a key; the test's DECIRANK_HOME holds its run log."""
    with ThreadedServer(create_app("lexical", api_key=KEY)) as url:
        with httpx.Client(base_url=url, timeout=30, headers={"authorization": f"Bearer {KEY}"}) as client:
            yield url, client


def test_page_and_assets_need_no_key_and_load_nothing_from_elsewhere(keyed):
    """/ and its two assets answer without a key, are small, and name no other host: no CDN, no fonts."""
    url, _ = keyed
    total = 0
    for path, kind in (("/", "text/html"), ("/static/app.js", "text/javascript"), ("/static/app.css", "text/css")):
        response = httpx.get(url + path)
        assert response.status_code == 200 and response.headers["content-type"].startswith(kind)
        assert "default-src 'self'" in response.headers["content-security-policy"]
        total += len(response.content)
        # The only URL in them is the SVG namespace, which names and fetches nothing.
        assert re.findall(r"(?:https?:)?//[\w.-]+\.\w+", response.text.replace("http://www.w3.org/2000/svg", "")) == []
    assert total < ASSET_BUDGET
    assert httpx.get(url + "/static/runs.db").status_code == 404
    assert httpx.get(url + "/static/..%2Fpage.py").status_code == 404


@pytest.mark.parametrize("path", ["/v1/server", "/v1/models", "/v1/runlog/runs", "/v1/runlog/series"])
def test_page_endpoints_want_the_key(keyed, path):
    url, _ = keyed
    assert httpx.get(url + path).status_code == 401
    assert httpx.get(url + path, headers={"authorization": "Bearer wrong"}).status_code == 401


def test_models_lists_every_model_and_marks_those_a_request_may_name(keyed):
    """Every provider's models, as decirank models lists them; those calling another server are not usable."""
    _, client = keyed
    listing = client.get("/v1/models").json()
    assert listing["default"] == "lexical"
    assert listing["roles"]["decider"] == ["local:default"]
    by_name = {model["name"]: model for model in listing["models"]}
    assert set(by_name) == {f"{p.name}:{m}" for p in providers() for m in p.models}
    assert by_name["lexical:bm25"]["usable"] and by_name["local:default"]["usable"]
    assert not by_name["typesafe:jev-latest"]["usable"] and "another server" in by_name["typesafe:jev-latest"]["note"]


def test_a_remote_model_is_usable_when_it_is_the_servers_own(isolated_user_dir):
    with ThreadedServer(create_app("systemone:local")) as url:
        by_name = {m["name"]: m for m in httpx.get(url + "/v1/models").json()["models"]}
    assert by_name["systemone:local"]["usable"]
    assert not by_name["vllm:default"]["usable"]


def test_server_offers_exec_evaluators_only_when_allowed(isolated_user_dir):
    for allowed in (False, True):
        with ThreadedServer(create_app("lexical", allow_exec=allowed)) as url:
            settings = httpx.get(url + "/v1/server").json()
        assert settings["allow_exec"] is allowed
        assert ("exec" in settings["evaluators"]) is allowed
        assert settings["model"] == "lexical" and settings["runlog"] is True and "json" in settings["validation_types"]


def test_runlog_runs_counts_items_and_filters_by_tool_model_and_status(keyed):
    _, client = keyed
    long_list = [f"item {i}" for i in range(300)]
    ranked = client.post("/v1/rank", json={"items": long_list, "instructions": "which?", "state": None})
    assert ranked.status_code == 200
    assert client.post("/v1/rerank", json={"query": "fleas", "documents": ITEMS, "model": "local"}).status_code == 200
    data = client.get("/v1/runlog/runs").json()
    assert data["enabled"] and data["tools"] == ["rank", "rerank"]
    assert data["models"] == ["lexical:bm25", "local:default"]
    assert "interrupted" in data["statuses"]
    assert [(r["tool"], r["items"]) for r in data["runs"]] == [("rerank", 5), ("rank", 300)]
    assert [r["tool"] for r in client.get("/v1/runlog/runs", params={"model": "local:default"}).json()["runs"]] == [
        "rerank"
    ]
    assert [r["tool"] for r in client.get("/v1/runlog/runs", params={"tool": "rank"}).json()["runs"]] == ["rank"]
    assert client.get("/v1/runlog/runs", params={"status": "failed"}).json()["runs"] == []
    assert client.get("/v1/runlog/runs", params={"status": "bogus"}).status_code == 422
    assert client.get("/v1/runlog/runs", params={"limit": 0}).status_code == 422


def test_example_artifacts_are_stored_once_and_never_replace_an_artifact(keyed):
    """POST /v1/example-artifacts wants the key, stores its fixed texts where the refs are free, and names them."""
    url, client = keyed
    assert httpx.post(url + "/v1/example-artifacts").status_code == 401
    ArtifactStore().put("example-run/valid-json", "mine")
    named = client.post("/v1/example-artifacts").json()
    assert named == {"refs": ["example-run/valid-json", "example-run/broken-json"], "evaluator": "validate:json"}
    assert ArtifactStore().get("example-run/valid-json") == "mine"
    assert ArtifactStore().get("example-run/broken-json").startswith('{"name"')
    scored = client.post("/v1/score_list", json={"refs": named["refs"], "evaluator": named["evaluator"]}).json()
    assert {entry["verdict"] for entry in scored["ranked"]} == {"INVALID"}  # "mine" is not JSON either


def test_runlog_runs_counts_a_batchs_rows_and_the_texts_of_classify_and_score(keyed, tmp_path):
    """A batch run counts its input's rows, classify and score runs their texts."""
    _, client = keyed
    client.post("/v1/score", json={"texts": ["a", "b", "c"], "question": "Is it?"})
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"text": f"row {i}"}) + "\n" for i in range(4)))
    decirank.batch("score", str(rows), str(tmp_path / "out.jsonl"), question="Is it?", model="lexical", workers=0)
    counts = [(run["tool"], run["items"]) for run in client.get("/v1/runlog/runs").json()["runs"]]
    assert ("batch", 4) in counts and ("score", 3) in counts


def test_runlog_series_gives_latency_percentiles_and_cost_per_model(keyed):
    _, client = keyed
    for _ in range(3):
        client.post("/v1/rank", json={"items": ITEMS, "instructions": INSTRUCTIONS, "state": STATE})
    series = client.get("/v1/runlog/series").json()
    assert series["bucket_seconds"] in (60, 300)
    (point, *_) = series["models"]["lexical:bm25"]
    assert point["calls"] >= 1 and point["cost"] == 0.0
    assert 0 < point["p50_ms"] <= point["p95_ms"]


def test_runlog_endpoints_when_the_log_is_off(monkeypatch):
    monkeypatch.setenv("DECIRANK_RUNLOG", "off")
    with ThreadedServer(create_app("lexical")) as url:
        assert httpx.get(url + "/v1/runlog/runs").json()["enabled"] is False
        assert httpx.get(url + "/v1/runlog/series").status_code == 404
        assert httpx.get(url + "/v1/server").json()["runlog"] is False


def test_assets_ship_as_package_data():
    """The wheel carries the page: pyproject names static/ as package data of decirank.server."""
    pyproject = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    assert re.search(r'"decirank\.server"\s*=\s*\[[^\]]*"static/\*"', pyproject)
    assert sum(len(_asset(name).encode()) for name in ASSETS) < ASSET_BUDGET


# --- in a browser --------------------------------------------------------------------------


def _browser_binary() -> str | None:
    chosen = os.environ.get("DECIRANK_TEST_BROWSER")
    if chosen:
        return chosen
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


#: How to get the browser these tests drive, as .ci/run does; said in every skip for want of one.
GET_A_BROWSER = (
    "install Debian's Chromium (apt-get install chromium, as .ci/run does before make test) "
    "or set DECIRANK_TEST_BROWSER to a Chromium binary"
)


def no_browser_reason(binary: str | None, error: str) -> str:
    """Why the page's browser tests skip, and how to run them."""
    if binary is None:
        return f"no headless browser: no Chromium on PATH; {GET_A_BROWSER}"
    first_line = (error.strip().splitlines() or [""])[0]
    return f"no headless browser: Chromium could not start ({binary}): {first_line}; {GET_A_BROWSER}"


def test_a_skip_for_want_of_a_browser_says_how_to_get_one():
    """Without Chromium the browser tests skip with the command that installs it, never silently."""
    assert no_browser_reason(None, "Executable doesn't exist").endswith(GET_A_BROWSER)
    assert "apt-get install chromium" in no_browser_reason("/usr/bin/chromium", "crashed\nmore")
    assert "crashed" in no_browser_reason("/usr/bin/chromium", "crashed\nmore")


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import Error, sync_playwright
    except ImportError:
        pytest.skip("no headless browser: the playwright package is not installed (pip install 'decirank[test]')")
    binary = _browser_binary()
    with sync_playwright() as playwright:
        try:
            launched = playwright.chromium.launch(executable_path=binary)  # None: Playwright's own, if it has one
        except Error as error:
            pytest.skip(no_browser_reason(binary, str(error)))
        yield launched
        launched.close()


def _serve(home: Path, *extra: str):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "DECIRANK_HOME": str(home)}
    for variable in ("DECIRANK_RUNLOG", "DECIRANK_DATABASE_URL", "DECIRANK_CONFIG", "DECIRANK_SERVER_API_KEY"):
        env.pop(variable, None)
    command = [sys.executable, "-m", "decirank", "serve", "--port", str(port), *extra]
    return subprocess_server(command, url, ready_path="/healthz", env=env, timeout=120)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A real ``decirank serve`` whose model is the embedded one, with a run log of its own."""
    home = tmp_path_factory.mktemp("page-home")
    with _serve(home, "--model", "local") as process:
        yield f"http://127.0.0.1:{_port_of(process)}", home


def _port_of(process: subprocess.Popen) -> str:
    return process.args[process.args.index("--port") + 1]


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    context.close()
    assert errors == [], f"the page raised: {errors}"


def _open(page, url: str, view: str = "") -> None:
    page.goto(f"{url}/{view}")
    page.wait_for_selector("body[data-ready]")


def _fill_rank(page, items, *, model: str, none: str | None = "none of these") -> None:
    page.click("#tool-tabs [data-tool=rank]")
    page.fill("#question", INSTRUCTIONS)
    page.fill("#items", "\n".join(items) if all(isinstance(i, str) for i in items) else json.dumps(items))
    page.fill("#state", json.dumps(STATE))
    page.fill("#none", none or "")
    page.select_option("#model", model)


def _bars(page) -> list[dict]:
    return page.eval_on_selector_all(
        "#bars > li",
        """rows => rows.map(r => ({label: r.querySelector('.label').firstChild.textContent,
            p: r.dataset.probability === '' ? null : Number(r.dataset.probability),
            index: r.dataset.index === '' ? null : Number(r.dataset.index), cls: r.className,
            width: r.querySelector('.fill').getBoundingClientRect().width}))""",
    )


def _run(page) -> None:
    page.click("#run")
    page.wait_for_selector("body:not([data-busy])")
    page.wait_for_selector("#results:not([hidden]), #play-error:not([hidden])")
    assert page.is_hidden("#play-error"), page.text_content("#play-error")


def _run_the_choice_example(page, served) -> None:
    """The decision tab's choice example, run."""
    url, _ = served
    _open(page, url)
    page.click("#tool-tabs [data-tool=decision]")
    page.select_option("#decision-type", "choice")
    page.click("#example")
    _run(page)


def test_ranking_with_the_local_model_shows_bars_in_rank_order_and_opens_its_run(page, served):
    """Load /, rank with the local model: bars best first, as /v1/rank orders them; the run shows its model call."""
    url, _ = served
    _open(page, url)
    assert page.title() == "decirank"
    _fill_rank(page, ITEMS, model="local:default")
    _run(page)
    rows = _bars(page)
    items = [row for row in rows if "none-option" not in row["cls"]]
    expected = httpx.post(
        url + "/v1/rank",
        json={"items": ITEMS, "instructions": INSTRUCTIONS, "state": STATE, "none": "none of these", "model": "local"},
    ).json()
    assert [row["label"] for row in items] == expected["items"]
    assert items[0]["label"].startswith("Flea life cycle")
    probabilities = [row["p"] for row in rows]
    assert probabilities == sorted(probabilities, reverse=True), "bars, the 'none' bar included, go best first"
    widths = [row["width"] for row in rows]
    assert widths == sorted(widths, reverse=True) and widths[0] > 5 * widths[-1]
    (none_row,) = [row for row in rows if "none-option" in row["cls"]]
    assert none_row["label"] == "none of these" and none_row["p"] == pytest.approx(expected["none"])
    assert "local:default" in page.text_content("#result-summary")

    page.click("#open-run")
    page.wait_for_selector("#call-tree")
    assert page.get_attribute("#run-card", "data-run") != expected["run_id"], "the page's own run, not the API's"
    calls = page.locator("#call-tree li.call")
    assert calls.count() == 1
    assert calls.first.get_attribute("data-model") == "local:default"
    assert calls.first.get_attribute("data-status") == "success"
    assert "6 options" in page.text_content("#call-tree .decision")

    page.click("#nav-runs")
    page.wait_for_selector("#runs-table tbody tr")
    first = page.locator("#runs-table tbody tr").first
    cells = first.locator("td").all_text_contents()
    assert cells[1] == "rank" and cells[2] == "local:default" and cells[3] == "5" and cells[7] == "success"
    page.wait_for_selector("#chart-latency svg circle")
    assert "local:default" in page.text_content("#chart-latency .legend")
    # The filters offer what the log holds, and narrow the table to it.
    assert page.eval_on_selector_all("#f-tool option", "os => os.map(o => o.value)") == ["", "rank"]
    assert "local:default" in page.eval_on_selector_all("#f-model option", "os => os.map(o => o.value)")
    page.select_option("#f-status", "failed")
    page.wait_for_selector("#runs-status:text-is('0 runs')")
    page.select_option("#f-status", "success")
    page.select_option("#f-tool", "rank")
    page.select_option("#f-model", "local:default")
    page.wait_for_selector("#runs-table tbody tr")
    assert set(page.locator("#runs-table tbody tr td:nth-child(3)").all_text_contents()) == {"local:default"}


def test_a_list_over_254_items_shows_its_chunks_and_final_round(page, served):
    url, _ = served
    _open(page, url)
    items = [{"title": f"page {i} about {'fleas on dogs' if i % 50 == 0 else 'baking bread'}"} for i in range(300)]
    _fill_rank(page, items, model="lexical:bm25", none=None)
    page.fill("#describe", "title")
    assert "over 254" in page.text_content("#items-count")
    _run(page)
    rows = _bars(page)
    assert len(rows) == 300
    assert rows[0]["label"].endswith("fleas on dogs")
    finalists = [row for row in rows if row["p"] is not None]
    assert finalists and all("out" in row["cls"] for row in rows[len(finalists) :])
    page.wait_for_selector("#chunks:not([hidden])")
    chunks = page.locator("#chunks details").evaluate_all("ds => ds.map(d => d.dataset.chunk)")
    assert chunks == ["1", "2", "final"]
    assert f"Final round: {len(finalists)} options" in page.text_content("#chunks [data-chunk=final] summary")


def test_decision_filter_and_rerank_in_the_playground(page, served):
    _run_the_choice_example(page, served)
    rows = _bars(page)
    assert len(rows) == 3 and [r["p"] for r in rows] == sorted((r["p"] for r in rows), reverse=True)
    assert rows[0]["label"].startswith("delivery:")
    assert sum(r["p"] for r in rows) == pytest.approx(1, abs=1e-6)

    page.select_option("#decision-type", "noul")
    page.click("#example")
    _run(page)
    rows = _bars(page)
    assert [r["label"].split(":")[0] for r in rows] == ["true", "false"] and rows[0]["p"] > 0.5

    page.select_option("#decision-type", "score")
    page.click("#example")
    _run(page)
    assert [r["label"] for r in _bars(page)] == ["not urgent", "somewhat urgent", "urgent", "critical"]

    page.click("#tool-tabs [data-tool=filter]")
    page.click("#example")
    _run(page)
    rows = _bars(page)
    assert [r["p"] for r in rows] == sorted((r["p"] for r in rows), reverse=True)
    assert all(("kept" in r["cls"].split()) == (r["p"] >= 0.5) for r in rows)

    page.click("#tool-tabs [data-tool=rerank]")
    page.click("#example")
    _run(page)
    rows = _bars(page)
    assert rows[0]["label"].startswith("Flea life cycle")
    assert [r["p"] for r in rows] == sorted((r["p"] for r in rows), reverse=True)


def test_copy_as_code_gives_python_cli_and_curl_that_rank_the_same(page, served, tmp_path):
    """Each snippet the page gives, run as it is, ranks the items in the order the page shows."""
    url, home = served
    _open(page, url)
    _fill_rank(page, ITEMS, model="local:default")
    _run(page)
    shown = [row["label"] for row in _bars(page) if "none-option" not in row["cls"]]
    page.click("#copy-code")
    snippets = {}
    for lang in ("python", "cli", "curl"):
        page.click(f"#code-tabs [data-lang={lang}]")
        snippets[lang] = page.text_content("#code")
    assert "decirank.rank(" in snippets["python"] and 'model="local:default"' in snippets["python"]
    assert snippets["cli"].startswith("decirank rank - --json")
    assert snippets["curl"].startswith(f"curl -sS {url}/v1/rank")
    env = {**os.environ, "DECIRANK_HOME": str(tmp_path), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}

    python = subprocess.run([sys.executable, "-c", snippets["python"]], env=env, capture_output=True, text=True)
    assert python.returncode == 0, python.stderr
    assert [line.split(" ", 1)[1] for line in python.stdout.splitlines()] == shown

    cli = subprocess.run(["bash", "-c", snippets["cli"]], env=env, capture_output=True, text=True)
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["items"] == shown
    if shutil.which("curl"):
        curl = subprocess.run(["bash", "-c", snippets["curl"]], env=env, capture_output=True, text=True)
        assert curl.returncode == 0, curl.stderr
        assert json.loads(curl.stdout)["items"] == shown


def test_the_api_key_is_asked_once_and_kept_in_the_session_only(browser, tmp_path):
    with _serve(tmp_path, "--model", "lexical", "--api-key", KEY) as process:
        url = f"http://127.0.0.1:{_port_of(process)}"
        context = browser.new_context()
        page = context.new_page()
        page.goto(url + "/")
        page.wait_for_selector("#key-dialog[open]")
        page.fill("#key-input", "not-the-key")
        page.click("#key-submit")
        page.wait_for_selector("#key-error:has-text('refused')")
        assert page.is_visible("#key-dialog")
        page.fill("#key-input", KEY)
        page.click("#key-submit")
        page.wait_for_selector("body[data-ready]")
        assert page.is_hidden("#key-dialog") and "model lexical" in page.text_content("#server-info")
        _run(page)
        assert len(_bars(page)) == 6

        page.reload()
        page.wait_for_selector("body[data-ready]")
        assert page.is_hidden("#key-dialog"), "asked once per session: a reload keeps the key"
        assert page.evaluate("sessionStorage.getItem('decirank.apiKey')") == KEY
        assert page.evaluate("localStorage.length") == 0 and context.cookies() == []
        page.click("#copy-code")
        page.click("#code-tabs [data-lang=curl]")
        assert KEY not in page.text_content("#code") and "$DECIRANK_SERVER_API_KEY" in page.text_content("#code")

        page.goto(url + "/#/runs")
        page.wait_for_selector("#runs-table tbody tr")
        page.click("#runs-table tbody tr")
        page.wait_for_selector("#call-tree li.call[data-model='lexical:bm25']")
        context.close()

        fresh = browser.new_context().new_page()
        fresh.goto(url + "/")
        fresh.wait_for_selector("#key-dialog[open]")  # a new session asks again
        fresh.context.close()


def test_exec_evaluators_are_offered_only_when_the_server_allows_them(browser, tmp_path):
    for allowed in (False, True):
        with _serve(tmp_path, "--model", "lexical", *(["--allow-exec"] if allowed else [])) as process:
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{_port_of(process)}/")
            page.wait_for_selector("body[data-ready]")
            page.click("#tool-tabs [data-tool=score_list]")
            kinds = page.eval_on_selector_all("#evaluator-kind option", "os => os.map(o => o.value)")
            assert kinds == ["score", "validate", "exec"] if allowed else kinds == ["score", "validate"]
            assert ("exec: allowed" in page.text_content("#server-info")) is allowed
            page.close()


def test_classify_and_score_tabs_take_their_options_and_show_a_bar_per_text(page, served):
    """classify (options, none, stored examples) and score (true/false) run from the playground, a bar per
    text in input order, and each gives the Python snippet of its own tool."""
    url, home = served
    env = {**os.environ, "DECIRANK_HOME": str(home), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    examples = home / "examples.jsonl"
    examples.write_text(
        '{"state": "where is my order", "answer": "delivery"}\n{"state": "give me a refund", "answer": "refund"}\n'
    )
    added = subprocess.run(
        [sys.executable, "-m", "decirank", "examples", "add", "orders", str(examples)],
        env=env, capture_output=True, text=True, check=False,
    )
    assert added.returncode == 0, added.stderr
    _open(page, url)
    page.click("#tool-tabs [data-tool=classify]")
    page.click("#example")
    assert page.is_visible("#options") and page.is_visible("#none") and page.is_hidden("#state")
    page.fill("#examples", "orders")
    page.select_option("#model", "local:default")
    _run(page)
    rows = _bars(page)
    assert [row["index"] for row in rows] == [0, 1, 2]
    assert rows[0]["label"].startswith("My parcel has not arrived")
    choices = page.eval_on_selector_all("#bars > li .tag", "tags => tags.map(t => t.textContent)")
    assert choices[0] == "delivery" and set(choices) <= {"refund", "delivery", "cancel", "none"}
    page.click("#copy-code")
    assert "decirank.classify(" in page.text_content("#code") and '"orders"' in page.text_content("#code")
    page.click("#code-tabs [data-lang=cli]")
    cli = subprocess.run(["bash", "-c", page.text_content("#code")], env=env, capture_output=True, text=True)
    assert cli.returncode == 0, cli.stderr
    assert [decision["choice"] for decision in json.loads(cli.stdout)["decisions"]] == choices
    page.click("#code-tabs [data-lang=python]")
    page.click("#code-close")

    page.click("#tool-tabs [data-tool=score]")
    page.click("#example")
    assert page.is_visible("#noul-true") and page.is_hidden("#options")
    _run(page)
    rows = _bars(page)
    assert len(rows) == 2 and rows[0]["p"] > rows[1]["p"]
    assert "calls 1" in page.text_content("#result-summary")  # the embedded model scores both texts in one call


TICKETS = [
    "The production database is down and no customer can log in.",
    'Typo on the About page: "teh" should be "the".',
]
URGENCY = "How urgent is this ticket?"


def _graded_rows(page) -> list[dict]:
    """Each graded row: the level its tag names, its expected level and its per-level spread, lowest first."""
    return page.eval_on_selector_all(
        "#bars > li",
        """rows => rows.map(r => ({index: Number(r.dataset.index), level: r.dataset.level ?? null,
            tags: [...r.querySelectorAll('.label .tag')].map(t => t.textContent),
            p: Number(r.dataset.probability), expected: r.dataset.expected === undefined ? null : Number(r.dataset.expected),
            spread: [...r.querySelectorAll('.levels [data-level]')].map(l => [l.dataset.level, Number(l.dataset.probability)])}))""",
    )


def test_score_with_levels_shows_each_texts_level_and_its_code_asks_the_same(page, served, tmp_path):
    """score with levels: what true/false mean goes, each text shows its level, expected level and spread as
    /v1/score gives them, and the Python, CLI and curl snippets ask for the same levels; emptied, it is yes/no again."""
    url, _ = served
    _open(page, url)
    page.click("#tool-tabs [data-tool=score]")
    page.fill("#question", URGENCY)
    page.fill("#items", "\n".join(TICKETS))
    page.fill("#noul-true", "urgent")  # left over from a yes/no question: with levels it is neither shown nor sent
    page.fill("#levels", "low\nmedium\nhigh")
    assert page.is_hidden("#noul-true") and page.is_hidden("#noul-false")
    assert "answered with a level" in page.text_content("#question-name")
    _run(page)
    rows = _graded_rows(page)
    expected = httpx.post(
        url + "/v1/score", json={"texts": TICKETS, "question": URGENCY, "levels": ["low", "medium", "high"]}
    ).json()
    assert expected["probabilities"] == []
    assert [row["index"] for row in rows] == [0, 1]
    assert [row["level"] for row in rows] == [row["tags"][0] for row in rows] == ["high", "low"]
    for row, want in zip(rows, expected["levels"]):
        assert row["level"] == want["level"] and row["expected"] == pytest.approx(want["expected_level"])
        assert [name for name, _ in row["spread"]] == ["low", "medium", "high"]
        assert dict(row["spread"]) == pytest.approx(want["probabilities"])
        assert row["p"] == pytest.approx(max(want["probabilities"].values()))
    assert rows[0]["expected"] > 1.5 > 0.5 > rows[1]["expected"]
    assert "low < medium < high" in page.text_content("#result-summary")

    page.click("#copy-code")
    snippets = {}
    for lang in ("python", "cli", "curl"):
        page.click(f"#code-tabs [data-lang={lang}]")
        snippets[lang] = page.text_content("#code")
    assert 'levels=["low", "medium", "high"]' in snippets["python"] and "true=" not in snippets["python"]
    assert "--levels 'low,medium,high'" in snippets["cli"] and "--true" not in snippets["cli"]
    assert json.loads(snippets["curl"].split("<<'EOF'\n")[1].split("\nEOF")[0])["levels"] == ["low", "medium", "high"]
    env = {**os.environ, "DECIRANK_HOME": str(tmp_path), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    python = subprocess.run([sys.executable, "-c", snippets["python"]], env=env, capture_output=True, text=True)
    assert python.returncode == 0, python.stderr
    assert [line.split()[:2] for line in python.stdout.splitlines()] == [["0", "high"], ["1", "low"]]
    cli = subprocess.run(["bash", "-c", snippets["cli"]], env=env, capture_output=True, text=True)
    assert cli.returncode == 0, cli.stderr
    assert [d["level"] for d in json.loads(cli.stdout)["levels"]] == ["high", "low"]
    if shutil.which("curl"):
        curl = subprocess.run(["bash", "-c", snippets["curl"]], env=env, capture_output=True, text=True)
        assert curl.returncode == 0, curl.stderr
        assert [d["level"] for d in json.loads(curl.stdout)["levels"]] == ["high", "low"]
    page.click("#code-tabs [data-lang=python]")
    page.click("#code-close")

    page.fill("#levels", "")
    assert page.is_visible("#noul-true")
    _run(page)
    rows = _graded_rows(page)
    assert [row["level"] for row in rows] == [None, None] and all(row["spread"] == [] for row in rows)
    assert all(0 <= row["p"] <= 1 for row in rows) and "levels" not in page.text_content("#result-summary")

def test_score_list_example_scores_stored_refs_with_issues_and_reasons(page, served):
    """'fill an example' on score_list names refs the server has stored; their results show verdicts,
    the reason and the issues of the broken one."""
    url, _ = served
    _open(page, url)
    page.click("#tool-tabs [data-tool=score_list]")
    page.click("#example")
    page.wait_for_selector("#items-count:text-is('2 refs')")
    _run(page)
    rows = page.eval_on_selector_all(
        "#bars > li", "rows => rows.map(r => [r.querySelector('.label').firstChild.textContent, r.textContent])"
    )
    assert len(rows) == 2 and "UNKNOWN" not in " ".join(text for _, text in rows)
    (valid,) = [text for ref, text in rows if ref.endswith("valid-json")]
    (broken,) = [text for ref, text in rows if ref.endswith("broken-json")]
    assert "VALID" in valid and "INVALID" in broken
    notes = page.eval_on_selector_all("#bars > li .note", "notes => notes.map(n => n.textContent)")
    assert len(notes) == 2 and any("•" in note for note in notes), notes


def test_rank_without_items_asks_for_them_and_makes_no_call(page, served):
    """Running rank with an empty list says to give the items, rather than a 'no fit' result."""
    url, _ = served
    _open(page, url)
    page.fill("#items", "")
    page.click("#run")
    page.wait_for_selector("#play-error:not([hidden])")
    assert page.text_content("#play-error").startswith("Give the items first")
    assert page.is_hidden("#results")


def test_each_tab_keeps_its_own_question(page, served):
    """Switching tabs shows the other tool's own draft (empty at first), and switching back restores this one."""
    url, _ = served
    _open(page, url)
    page.fill("#question", "Which page answers the question about fleas?")
    page.click("#tool-tabs [data-tool=filter]")
    assert page.input_value("#question") == "" and page.input_value("#items") == ""
    page.fill("#question", "Is this about pets?")
    page.click("#tool-tabs [data-tool=decision]")
    page.select_option("#decision-type", "noul")
    assert page.input_value("#question") == ""
    page.click("#tool-tabs [data-tool=rank]")
    assert page.input_value("#question") == "Which page answers the question about fleas?"
    page.click("#tool-tabs [data-tool=filter]")
    assert page.input_value("#question") == "Is this about pets?"


def test_a_decision_links_its_run_and_shows_its_real_call_count(page, served):
    """A decision's result opens its run and counts its model calls, read from the server's headers."""
    _run_the_choice_example(page, served)
    assert "calls 1" in page.text_content("#result-summary")
    page.click("#open-run")
    page.wait_for_selector("#call-tree li.call")
    assert page.text_content("#run-card h2").startswith("systemone run")


def test_a_batch_run_shows_its_item_count(page, served, tmp_path):
    """A decirank batch run is listed with its input's row count, like a tool run with its items."""
    url, home = served
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"text": f"page {i} about fleas"}) + "\n" for i in range(7)))
    env = {**os.environ, "DECIRANK_HOME": str(home)}
    done = subprocess.run(
        [sys.executable, "-m", "decirank", "batch", "score", str(rows), "--out", str(tmp_path / "out.jsonl"),
         "-q", "Is this about fleas?", "--text", "text", "-m", "lexical", "--workers", "0"],
        env=env, capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stderr
    _open(page, url, "#/runs")
    page.select_option("#f-tool", "batch")
    # The unfiltered rows stay until the filtered list arrives: wait for that list, not for any row.
    page.wait_for_function(
        "() => { const cell = document.querySelector('#runs-table tbody tr td:nth-child(2)');"
        " return cell !== null && cell.textContent === 'batch'; }"
    )
    cells = page.locator("#runs-table tbody tr").first.locator("td").all_text_contents()
    assert cells[1] == "batch" and cells[3] == "7"


# --- the calibrate tab ---------------------------------------------------------------------


def _sst2_rows(count: int) -> list[dict]:
    path = DECISIONS / "sst2-train.jsonl"
    if not path.exists():
        pytest.skip(f"no development data at {path} (../shared/data/decisions, never shipped)")
    with path.open(encoding="utf-8") as lines:
        found = [json.loads(line) for _, line in zip(range(count), lines, strict=False)]
    return [{"item": row["text"], "answer": row["label"] == "positive"} for row in found]


def _calibrate(page) -> None:
    page.click("#run")
    page.wait_for_selector("body:not([data-busy])")
    page.wait_for_selector("#results:not([hidden]), #play-error:not([hidden])")
    assert page.is_hidden("#play-error"), page.text_content("#play-error")
    assert page.is_visible("#cal")


def _try_the_guarantee(page) -> dict[str, str]:
    page.click("#cal-try")
    page.wait_for_selector("body:not([data-busy])")
    page.wait_for_selector("#cal-check:not([hidden]), #cal-error:not([hidden])")
    assert page.is_hidden("#cal-error"), page.text_content("#cal-error")
    return page.eval_on_selector_all(
        "#cal-check [data-fact]",
        "fs => Object.fromEntries(fs.map(f => [f.dataset.fact, [f.dataset.value, f.textContent]]))",
    )


def _plotted(page) -> dict[str, int]:
    series = page.eval_on_selector_all("#cal-plot circle", "cs => cs.map(c => c.dataset.series)")
    return {name: series.count(name) for name in set(series)}


def test_calibrate_tab_fits_a_filter_plots_its_reliability_and_tries_the_recall_promise(page, served):
    """Upload 120 labelled reviews: the first 60 fit a filter calibration, the plot shows both series,
    and the recall shown on the 60 held out is what their labels and the promised cut-off give."""
    url, _ = served
    rows = _sst2_rows(120)
    question = "Is this review positive?"
    _open(page, url)
    page.click("#tool-tabs [data-tool=calibrate]")
    assert page.is_hidden("#state") and page.is_hidden("#options") and page.text_content("#run") == "Calibrate"
    content = "".join(json.dumps(row) + "\n" for row in rows).encode()
    upload = {"name": "sst2 dev.jsonl", "mimeType": "application/json", "buffer": content}
    page.set_input_files("#cal-file", files=[upload])
    page.wait_for_selector("#items-count:text-is('120 labelled rows · 60 to fit, 60 held out')")
    assert page.input_value("#cal-name") == "sst2-dev"
    page.fill("#question", question)
    page.select_option("#model", "local:default")
    _calibrate(page)

    stored = httpx.get(f"{url}/v1/calibrations/sst2-dev").json()
    assert stored["rows"] == 60 and stored["tool"] == "filter" and stored["model"] == "local:default"
    facts = page.eval_on_selector_all(
        "#result-summary [data-fact]", "fs => Object.fromEntries(fs.map(f => [f.dataset.fact, f.textContent]))"
    )
    assert facts["method"] == "method " + stored["method"]
    assert facts["ece"] == f"ECE {stored['before']['ece']:.3f} → {stored['after']['ece']:.3f}"
    assert facts["brier"] == f"Brier {stored['before']['brier']:.3f} → {stored['after']['brier']:.3f}"
    assert facts["held"] == "held out 60"
    assert _plotted(page) == {"before": len(stored["before"]["table"]), "after": len(stored["after"]["table"])}
    assert page.locator("#cal-plot line.diagonal").count() == 1
    assert page.locator("#cal-plot .legend span").all_text_contents() == ["before", "after", "perfectly calibrated"]

    assert page.input_value("#cal-recall") == "0.9" and page.input_value("#cal-confidence") == "0.9"
    assert page.is_hidden("#cal-coverage")
    shown = _try_the_guarantee(page)
    held = rows[60:]
    expected = httpx.post(
        f"{url}/v1/filter",
        json={
            "items": [r["item"] for r in held],
            "question": question,
            "calibration": "sst2-dev",
            "target_recall": 0.9,
            "confidence": 0.9,
            "model": "local",
        },
    ).json()
    assert expected["promise"]["threshold"] is not None, "38 labelled positives support a cut-off"
    kept = [d["kept"] for d in expected["decisions"]]
    hits = sum(k and r["answer"] for k, r in zip(kept, held, strict=True))
    recall, precision = hits / sum(r["answer"] for r in held), hits / sum(kept)
    assert float(shown["recall"][0]) == pytest.approx(recall)
    assert f"recall {recall * 100:.1f}%" in shown["recall"][1] or recall >= 0.995
    assert float(shown["precision"][0]) == pytest.approx(precision)
    assert shown["kept"] == [str(sum(kept)), f"kept {sum(kept)} of 60"]
    assert float(shown["cutoff"][0]) == pytest.approx(expected["promise"]["threshold"])
    assert shown["held"][1] == "the promise " + ("held on these rows" if recall >= 0.9 else "missed on these rows")


def _order_rows() -> list[dict]:
    """Customer messages labelled with what they want, made up for the test (cycled, so both halves hold each)."""
    wants = {
        "delivery": (
            "Where is my parcel?|My order has not arrived yet|When will the package be delivered?|"
            "The courier never came with my box|Tracking says shipped but nothing came"
        ),
        "refund": (
            "I want my money back|Please refund the broken kettle|Give me a refund for this order|"
            "I was charged twice, return the money|Can I get reimbursed for the damaged item?"
        ),
        "cancel": (
            "Cancel my order please|I no longer want this, stop the order|Please cancel before it ships|"
            "Call off my purchase|I changed my mind, cancel it"
        ),
    }
    rows = []
    for round_ in range(3):
        for index in range(5):
            for key, texts in wants.items():
                text = texts.split("|")[(index + round_) % 5]
                rows.append({"state": f"{text} (ticket {round_}{index})", "answer": key})
    return rows[:44]


def test_calibrate_tab_fits_classify_and_tries_coverage_on_the_held_out_rows(page, served, tmp_path):
    """Paste labelled messages for classify: a temperature is chosen, and the held-out coverage shown is the
    share of their prediction sets that hold the right option; the Python and CLI snippets fit the same."""
    url, _ = served
    rows = _order_rows()
    question = "What does the customer want?"
    options = {
        "refund": "asks for their money back",
        "delivery": "asks where the order is",
        "cancel": "wants to cancel the order",
    }
    _open(page, url)
    page.click("#tool-tabs [data-tool=calibrate]")
    page.select_option("#cal-tool", "classify")
    assert page.is_visible("#options") and page.is_visible("#none")
    page.fill("#items", json.dumps(rows))
    page.fill("#options", "\n".join(f"{key}: {text}" for key, text in options.items()))
    page.fill("#question", question)
    page.fill("#cal-name", "orders")
    page.select_option("#model", "local:default")
    assert page.text_content("#items-count") == "44 labelled rows · 22 to fit, 22 held out"
    _calibrate(page)
    stored = httpx.get(f"{url}/v1/calibrations/orders").json()
    assert stored["tool"] == "classify" and stored["options"] == options
    assert stored["method"] in ("identity", "temperature")
    plotted = _plotted(page)
    assert plotted["before"] >= 1 and plotted["after"] >= 1

    assert page.is_visible("#cal-coverage") and page.is_hidden("#cal-recall")
    page.fill("#cal-coverage", "0.8")
    shown = _try_the_guarantee(page)
    held = rows[22:]
    expected = httpx.post(
        f"{url}/v1/classify",
        json={
            "texts": [r["state"] for r in held],
            "question": question,
            "options": options,
            "calibration": "orders",
            "coverage": 0.8,
            "model": "local",
        },
    ).json()
    covered = sum(r["answer"] in d["prediction_set"] for r, d in zip(held, expected["decisions"], strict=True)) / 22
    assert float(shown["coverage"][0]) == pytest.approx(covered)
    assert float(shown["set-size"][0]) == pytest.approx(expected["coverage"]["mean_set_size"])

    page.click("#copy-code")
    snippet = page.text_content("#code")
    assert "decirank.calibrate(" in snippet and '"classify"' in snippet
    env = {**os.environ, "DECIRANK_HOME": str(tmp_path)}
    python = subprocess.run([sys.executable, "-c", snippet], env=env, capture_output=True, text=True, check=False)
    assert python.returncode == 0, python.stderr
    assert python.stdout.split()[0] == stored["method"]
    page.click("#code-tabs [data-lang=cli]")
    env["PATH"] = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    cli = subprocess.run(["bash", "-c", page.text_content("#code")], env=env, capture_output=True, text=True, check=False)
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["after"] == stored["after"]


def test_calibrate_tab_shows_what_is_wrong_with_the_rows(page, served):
    """A row without an answer is named by the page; too few rows to fit, by the server's field."""
    url, _ = served
    _open(page, url)
    page.click("#tool-tabs [data-tool=calibrate]")
    page.fill("#question", "Is this about pets?")
    page.fill("#cal-name", "few")
    page.fill("#items", '{"item": "a cat", "answer": true}\n{"item": "a dog"}')
    assert page.text_content("#items-count") == 'Row 2 is not {"item" or "state", "answer"}'
    page.click("#run")
    page.wait_for_selector("#play-error:not([hidden])")
    assert page.text_content("#play-error") == 'Row 2 is not {"item" or "state", "answer"}'
    page.fill("#items", "".join(json.dumps({"item": f"page {i}", "answer": i % 2 == 0}) + "\n" for i in range(10)))
    page.click("#run")
    page.wait_for_selector("body:not([data-busy])")
    page.wait_for_selector("#play-error:not([hidden])")
    assert "rows" in page.text_content("#play-error") and "20" in page.text_content("#play-error")
    assert page.is_hidden("#results")


def test_a_run_kept_as_hashes_says_so_and_one_kept_in_full_does_not(page, served, tmp_path):
    """Under --runlog-texts hashes a run's card says its texts are kept as hashes; a run of a server keeping
    texts in full says nothing of the kind."""
    with _serve(tmp_path, "--model", "lexical", "--runlog-texts", "hashes") as process:
        url = f"http://127.0.0.1:{_port_of(process)}"
        ranked = httpx.post(url + "/v1/rank", json={"items": ITEMS, "instructions": INSTRUCTIONS, "state": STATE})
        run_id = ranked.json()["run_id"]
        assert httpx.get(f"{url}/v1/runs/{run_id}").json()["texts"] == "hashes"
        _open(page, url, "#/runs/" + run_id)
        page.wait_for_selector("#run-card")
        assert page.text_content("#run-texts").startswith("texts kept as hashes")
        assert ITEMS[0] not in page.text_content("#run-card")
    full_url, _ = served
    full = httpx.post(full_url + "/v1/rank", json={"items": ITEMS, "instructions": INSTRUCTIONS, "state": STATE})
    _open(page, full_url, "#/runs/" + full.json()["run_id"])
    page.wait_for_selector("#run-card")
    assert page.locator("#run-texts").count() == 0

"""Take the README's screenshots of the page at / (docs/page-*.png) from a real ``decirank serve``.

    .venv/bin/python docs/screenshots.py            # needs Chromium (apt-get install chromium) and playwright

The server runs in a fresh DECIRANK_HOME with a role ``failover`` whose first
model is a System One server nobody answers at, so one run shows a failed
attempt and the fallback that answered. Calls are spread over a few minutes
so that the charts have more than one point.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.loopback import free_port, subprocess_server  # noqa: E402
from tests.server.test_page import ITEMS, STATE, _browser_binary  # noqa: E402  (the page tests' sample data)

DOCS = ROOT / "docs"
CONFIG = """
[roles.failover]                     # a dead server first, then the embedded model
models = ["systemone:local", "local"]

[providers.systemone]
base_url = "http://127.0.0.1:9"
"""


def traffic(url: str, rounds: int, pause: float) -> None:
    """Real calls with both local models, so the run log and its charts have something to show."""
    for round_ in range(rounds):
        for model in ("local", "lexical"):
            httpx.post(url + "/v1/rank", json={"items": ITEMS, "instructions": "Which page answers?", "state": STATE,
                                               "model": model}, timeout=60)
            httpx.post(url + "/v1/rerank", json={"query": "how long do fleas live", "documents": ITEMS * (round_ + 1),
                                                 "model": model}, timeout=60)
        httpx.post(url + "/v1/filter", json={"items": ITEMS, "question": "Is this page about pets?",
                                             "state": {"site": "a vet clinic"}}, timeout=60)
        if round_ < rounds - 1:
            time.sleep(pause)


def main() -> None:
    from playwright.sync_api import sync_playwright

    home = Path(tempfile.mkdtemp(prefix="decirank-shots-"))
    (home / "config.toml").write_text(CONFIG)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "DECIRANK_HOME": str(home)}
    command = [sys.executable, "-m", "decirank", "serve", "--port", str(port), "--model", "local"]
    with subprocess_server(command, url, ready_path="/healthz", env=env, timeout=120):
        traffic(url, rounds=int(os.environ.get("ROUNDS", "4")), pause=float(os.environ.get("PAUSE", "61")))
        failover = httpx.post(url + "/v1/rank", json={"items": ITEMS, "instructions": "Which page answers?",
                                                      "state": STATE, "model": "failover"}, timeout=60).json()
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=_browser_binary())
            page = browser.new_page(viewport={"width": 1200, "height": 860}, device_scale_factor=1)
            page.goto(url + "/")
            page.wait_for_selector("body[data-ready]")
            page.select_option("#model", "local:default")
            page.click("#run")
            page.wait_for_selector("#results:not([hidden])")
            page.click("#copy-code")
            page.screenshot(path=DOCS / "page-playground.png", full_page=True)

            page.goto(url + "/#/runs")
            page.wait_for_selector("#chart-cost svg")
            page.screenshot(path=DOCS / "page-runs.png", full_page=True)

            page.goto(url + "/#/runs/" + failover["run_id"])
            page.wait_for_selector("#call-tree li.call")
            for details in page.locator("#call-tree li.call details").all()[:1]:
                details.evaluate("d => d.open = false")
            page.screenshot(path=DOCS / "page-run.png", full_page=True)
            browser.close()
    print(json.dumps({"home": str(home), "shots": sorted(p.name for p in DOCS.glob("page-*.png"))}))


if __name__ == "__main__":
    main()

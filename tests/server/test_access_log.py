"""decirank serve's access log: a line per request on stderr (method, path, status, ms, run id), off with --quiet."""

from __future__ import annotations

import re
import time

import httpx

from tests.server.serving import serving

RANK = {"items": ["fleas on dogs", "tax forms"], "instructions": "about pets", "state": None}


def _matching(served, pattern: str, count: int, within: float = 5.0) -> list[str]:
    """The server's stderr lines matching ``pattern``, once there are ``count`` (or ``within`` s passed)."""
    deadline = time.monotonic() + within
    while True:
        found = [line for line in list(served.log.lines) if re.search(pattern, line)]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def test_each_request_is_one_line_with_method_path_status_ms_and_run_never_body_or_query(tmp_path):
    """A rank (200, its run id), a refused rank (422), /healthz with a secret in its query: one line each, even
    at --log-level info where uvicorn would log its own; neither the texts nor the query appear."""
    with serving("--model", "lexical", "--log-level", "info", home=tmp_path) as served:
        ranked = httpx.post(served.url + "/v1/rank", json=RANK)
        assert ranked.status_code == 200
        run_id = ranked.json()["run_id"]
        assert httpx.post(served.url + "/v1/rank", json={"items": "not a list"}).status_code == 422
        assert httpx.get(served.url + "/healthz?token=hunter2").status_code == 200
        [rank_line] = _matching(served, r"POST /v1/rank 200 ", 1)
        assert re.search(rf"POST /v1/rank 200 \d+\.\d ms run {run_id}$", rank_line), rank_line
        [refused] = _matching(served, r"POST /v1/rank 422 ", 1)
        assert " run " not in refused  # refused before any run started
        [health] = _matching(served, r"GET /healthz", 1)
        assert re.search(r"GET /healthz 200 \d+\.\d ms$", health), health
        time.sleep(0.3)  # anything else it would log about these requests
        text = served.log.text()
        assert "hunter2" not in text and "fleas on dogs" not in text and "not a list" not in text
        assert len(_matching(served, r"/v1/rank", 3, within=0)) == 2, text  # no second line (uvicorn's) per request


def test_quiet_turns_the_access_log_off(tmp_path):
    """decirank serve --quiet logs nothing about the requests it answers."""
    with serving("--model", "lexical", "--quiet", home=tmp_path) as served:
        assert httpx.post(served.url + "/v1/rank", json=RANK).status_code == 200
        assert httpx.get(served.url + "/healthz").status_code == 200
        time.sleep(0.5)
        assert not [line for line in served.log.lines if "/v1/rank" in line or "/healthz" in line], served.log.text()

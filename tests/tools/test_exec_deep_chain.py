"""A fork chain deeper than any level-by-level sweep, whose command kills its own subreaper: the server ends
all of it before the call returns, and answers other requests meanwhile."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import pytest

from decirank.tools._evaluators.exec import SUBREAPER
from tests.loopback import HealthProbe
from tests.processes import marked
from tests.server.serving import serving

pytestmark = pytest.mark.skipif(not SUBREAPER, reason="the child subreaper is Linux's")

#: Deeper than the 1,000 rounds the old sweep gave itself, one level a round.
DEPTH = 1_100
MARKER = "3011.75"

# Each level starts the next in a session of its own (out of every group and session above it), then becomes
# a sleep carrying the marker; the last level says the chain is complete.
CHAIN = f"""
if [ "$1" -gt 0 ]; then setsid sh "$0" $(($1 - 1)) "$2" & else touch "$2"; fi
exec sleep {MARKER}
"""


def test_a_chain_deeper_than_1000_is_ended_at_once_off_the_event_loop(tmp_path):
    home = tmp_path / "home"
    env = {**os.environ, "DECIRANK_HOME": str(home)}
    subprocess.run([sys.executable, "-m", "decirank", "artifacts", "put", "ex/a", "-"], input="x", text=True,
                   env=env, check=True, capture_output=True)  # fmt: skip
    chain, done = tmp_path / "chain.sh", tmp_path / "complete"
    chain.write_text(CHAIN)
    command = (
        f"exec:sh {chain} {DEPTH} {done} & "
        f"while [ ! -f {done} ]; do sleep 0.05; done; kill -9 $PPID"
    )
    with serving("--model", "lexical", "--allow-exec", home=home) as served:
        body = {"refs": ["ex/a"], "evaluator": command, "timeout": 120}
        with HealthProbe(served.url).running() as probe:
            response = httpx.post(f"{served.url}/v1/score_list", json=body, timeout=180)
        slowest = probe.slowest
        assert probe.failures == []
        assert response.status_code == 200, response.text
        assert response.json()["ranked"][0]["verdict"] == "INVALID"
        left = marked(MARKER)
        assert left == [], f"{len(left)} of the chain's {DEPTH + 1} processes are still running"
        assert slowest < 1.0, f"/healthz took {slowest:.2f} s while the chain was ended"

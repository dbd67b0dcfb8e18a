"""Ctrl-C during a tool command: exit 130 with one line saying what stopped and what the run log recorded.

The model is a System One server that holds its answer, so the command is always mid-call when the
signal arrives: the test waits for the server to be holding a request, never on a clock.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from decirank.stores.runlog import RunLog
from tests.loopback import HeldAnswers, Reply, ScriptedServer

TEXTS = json.dumps(["My card was charged twice", "The parcel never came", "How do I reset my password?"])
COMMANDS = {
    "rank": ("rank", "TEXTS", "--instructions", "Which one is about money?"),
    "rerank": ("rerank", "TEXTS", "--query", "a double charge"),
    "filter": ("filter", "TEXTS", "--question", "Is this about money?"),
    "classify": ("classify", "TEXTS", "--question", "Which team?", "--options", "billing,shipping"),
    "score": ("score", "TEXTS", "--question", "Is this about money?"),
}


@pytest.mark.parametrize("tool", sorted(COMMANDS))
def test_ctrl_c_says_what_was_interrupted_and_what_the_run_log_recorded(tool, tmp_path):
    """SIGINT while the model is answering: exit 130, the last line names the tool and its run, recorded cancelled."""
    held = HeldAnswers()
    with ScriptedServer() as server:
        url = server.script("s1", Reply(body=held))
        env = {**os.environ, "DECIRANK_HOME": str(tmp_path), "COLUMNS": "200"}
        texts = tmp_path / "texts.json"
        texts.write_text(TEXTS, encoding="utf-8")
        arguments = [str(texts) if argument == "TEXTS" else argument for argument in COMMANDS[tool]]
        command = [sys.executable, "-m", "decirank", *arguments, "--model", "systemone:m", "--base-url", url]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            assert held.holding.wait(120), process.stderr.read() if process.poll() is not None else "no request came"
            process.send_signal(signal.SIGINT)
            stdout, stderr = process.communicate(timeout=60)
        finally:
            held.release()
            if process.poll() is None:
                process.kill()
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and stdout == ""
    last = stderr.strip().splitlines()[-1]
    runs = RunLog.open(tmp_path / "runs.db").runs(tool=tool)
    assert [run["status"] for run in runs] == ["cancelled"]
    short = runs[0]["id"][:12]
    assert last == (
        f"interrupted: {tool} was cancelled after 0 of its model calls had answered; the run log recorded run "
        f"{short} as cancelled (decirank runs show {short})"
    )

"""Running ``python -m decirank`` as a user would: a real subprocess, with wide tables."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

#: The README's example items.
PAPERS = Path(__file__).resolve().parents[2] / "examples" / "papers.json"

#: The README's ``rank`` over them, as JSON.
RANK_PAPERS = (
    "rank",
    str(PAPERS),
    "--instructions",
    "Which paper best answers the question?",
    "--state",
    '{"question": "How can a small model rerank search results without a GPU?"}',
    "--describe",
    "title",
    "--json",
)


def decirank(
    *args: str, input: str | None = None, env: Mapping[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run ``decirank *args``; ``env`` replaces the environment (default: this process's)."""
    # Wide enough that no table cell wraps, so tests can look for whole values on one line.
    environment = {**(os.environ if env is None else env), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "decirank", *args],
        capture_output=True,
        text=True,
        input=input,
        env=environment,
        timeout=timeout,
        check=False,
    )

"""Shared by the framework adapters' tests: a few passages, and the runs the run log holds.

Every test runs the real framework with the embedded ``local`` model, offline.
"""

from __future__ import annotations

import os

import pytest

from decirank.stores.runlog import current_runlog

# Haystack reads this when it is first imported: no telemetry leaves a test run.
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

QUERY = "How long do fleas live?"

#: (text, metadata); the flea passage is the one that answers QUERY, and each shares a word with it,
#: so a BM25 first stage finds them all (the tax passage shares the most).
PASSAGES = [
    ("Sourdough starters live for years if they are fed flour and water every week.", {"source": "bread"}),
    ("Adult fleas live two to three months on a host, feeding on its blood.", {"source": "fleas"}),
    ("How long do you keep tax records? Seven years in most cases.", {"source": "tax"}),
    ("Jupiter is so far from the Sun that nothing we know could live there.", {"source": "planets"}),
]


@pytest.fixture
def rerank_runs():
    """A function returning the ``rerank`` runs of the test's own run log, newest first."""

    def runs() -> list[dict]:
        runlog = current_runlog()
        assert runlog is not None
        assert runlog.location.startswith(os.environ["DECIRANK_HOME"])  # the tmp dir conftest gives each test
        return runlog.runs(tool="rerank", limit=None)

    return runs


@pytest.fixture
def failing_model():
    """A model name whose every call fails with a server error (decirank's scripted backend)."""
    from decirank.errors import ServerError
    from decirank.testing import ScriptedBackend, use_backend

    with use_backend(ScriptedBackend(error=ServerError("down", status=503))) as model:
        yield model

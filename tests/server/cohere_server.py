"""What the Cohere SDK tests share: a few documents, a query, and ``decirank serve`` with an API key."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.loopback import free_port, subprocess_server

KEY = "cohere-test-key"
DOCUMENTS = [
    "Sourdough bread needs a starter and a long rise.",
    "Fleas on dogs: treatment with a monthly spot-on.",
    "Stock markets closed higher today.",
    "Cats get fleas and ticks in the summer.",
]
QUERY = "how do I get rid of fleas on my dog"


@contextlib.contextmanager
def lexical_server(home: Path) -> Iterator[str]:
    """``decirank serve --model lexical`` with the API key :data:`KEY`, on a free loopback port; yields its URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "DECIRANK_HOME": str(home), "DECIRANK_SERVER_API_KEY": KEY}
    env.pop("DECIRANK_ROLE_DECIDER", None)
    command = [sys.executable, "-m", "decirank", "serve", "--port", str(port), "--model", "lexical"]
    with subprocess_server(command, url, ready_path="/healthz", env=env, timeout=120):
        yield url

"""score against filter on the same rows: wall time and model calls, with ``local`` and over System One.

    python benchmarks/score_vs_filter.py [--rows 3000] [--hosted-rows 3000] [--max-concurrency 16]

The rows are generated short reviews, all different. Each measurement runs in
a fresh process (and, over System One, against a fresh server), so no tool
finds the texts already encoded by the one before: the embedded encoders keep
the vectors of texts they have read. ``local`` runs in that process, its
encoders loaded before the clock starts; the System One case starts
``decirank serve --model local`` on a free loopback port as the hosted model,
waits until it is ready, and asks it through ``systemone:local`` (score: one
request per text, at most ``--max-concurrency`` in flight; filter: up to 20
items a request). Prints one line per tool and model.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

import httpx

QUESTION = "Is this review positive?"
WORDS = ["moving", "dull", "funny", "tedious", "bright", "clumsy", "warm", "cold", "sharp", "flat"]


def rows(count: int) -> list[str]:
    """``count`` distinct short reviews."""
    return [f"Review {i}: a {WORDS[i % 10]} and {WORDS[(i // 10) % 10]} film, part {i // 100}." for i in range(count)]


def measure(tool: str, count: int, model: str, base_url: str | None, concurrency: int) -> dict:
    """One tool over ``count`` rows in this process: seconds and model calls."""
    import decirank
    from decirank.backends import create_backend

    if base_url is None:
        create_backend("local").load()
    texts = rows(count)
    options = {"model": model, "base_url": base_url, "timeout": None}
    started = time.perf_counter()
    if tool == "score":
        result = decirank.score(texts, QUESTION, max_concurrency=concurrency, **options)
    else:
        result = decirank.filter(texts, QUESTION, **options)
    return {"seconds": time.perf_counter() - started, "calls": result.usage.calls}


def in_a_fresh_process(tool: str, count: int, model: str, base_url: str | None, concurrency: int) -> dict:
    command = [sys.executable, __file__, "--measure", tool, "--rows", str(count), "--model", model]
    command += ["--max-concurrency", str(concurrency)] + (["--base-url", base_url] if base_url else [])
    env = {**os.environ, "DECIRANK_CACHE": "off"}
    done = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
    return json.loads(done.stdout.splitlines()[-1])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def ready(url: str) -> bool:
    try:
        return httpx.get(url + "/readyz", timeout=30).status_code == 200
    except httpx.TransportError:
        return False


def with_a_server(run):
    """``run(url)`` against a fresh ``decirank serve --model local`` on loopback."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as home:
        command = [sys.executable, "-m", "decirank", "serve", "--port", str(port), "--model", "local"]
        env = {**os.environ, "DECIRANK_HOME": home, "DECIRANK_CACHE": "off"}
        server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 120
            while not ready(url):
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("decirank serve did not become ready")
                time.sleep(0.2)
            return run(url)
        finally:
            server.terminate()
            server.wait(timeout=30)


def show(label: str, measured: dict) -> None:
    print(f"  {label:30s} {measured['seconds']:7.2f} s  {measured['calls']:5d} model calls", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--hosted-rows", type=int, default=3000, help="rows for the System One case")
    parser.add_argument("--max-concurrency", type=int, default=16)
    parser.add_argument("--measure", choices=["score", "filter"], help=argparse.SUPPRESS)
    parser.add_argument("--model", default="local", help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    concurrency = arguments.max_concurrency
    if arguments.measure:
        measured = measure(arguments.measure, arguments.rows, arguments.model, arguments.base_url, concurrency)
        print(json.dumps(measured))
        return

    print(f"{arguments.rows} rows, local (in the process):", flush=True)
    for tool in ("score", "filter"):
        show(tool, in_a_fresh_process(tool, arguments.rows, "local", None, concurrency))
    print(f"{arguments.hosted_rows} rows, systemone:local (decirank serve as the hosted model):", flush=True)
    for tool in ("score", "filter"):
        measured = with_a_server(
            lambda url, tool=tool: in_a_fresh_process(tool, arguments.hosted_rows, "systemone:local", url, concurrency)
        )
        show(f"{tool} (max_concurrency {concurrency})" if tool == "score" else tool, measured)


if __name__ == "__main__":
    main()

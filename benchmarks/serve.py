"""Throughput and latency of ``decirank serve``'s /v1/rerank under a bounded local load.

Starts ``decirank serve`` on a free loopback port (its user state, run log
included, in a temporary directory; the decision cache off), sends a fixed number of rerank requests of 20 and of
100 documents with a fixed number in flight, and reports requests per
second and p50/p95 latency for each size; then stops the server.

    python benchmarks/serve.py --data path/to/trec-dl19/bm25_top100.json
    python benchmarks/serve.py --model lexical --concurrency 8 --json

Documents are the BM25 top 100 of the DL19 queries when ``--data`` is
given, else generated sentences.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

HOST = "127.0.0.1"
SIZES = (20, 100)
WARMUP_REQUESTS = 2


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def load_queries(data: Path | None, size: int) -> list[tuple[str, list[str]]]:
    """(query, documents) pairs with ``size`` documents each."""
    if data is not None:
        queries = json.loads(data.read_text(encoding="utf-8"))
        return [(q["query"], [hit["content"] for hit in q["hits"][:size]]) for q in queries if len(q["hits"]) >= size]
    topics = ["fleas on pets", "baking bread", "stock markets", "river ecology", "solar panels", "chess openings"]
    return [
        (topic, [f"A note on {topics[(i + n) % len(topics)]}, number {n}, with some detail." for n in range(size)])
        for i, topic in enumerate(topics)
    ]


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile."""
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]


async def measure(url: str, queries: list[tuple[str, list[str]]], requests: int, concurrency: int) -> dict[str, Any]:
    bodies = [
        {"query": query, "documents": documents, "timeout": 300}
        for query, documents in (queries[n % len(queries)] for n in range(requests + WARMUP_REQUESTS))
    ]
    latencies: list[float] = []
    async with httpx.AsyncClient(base_url=url, timeout=600) as client:

        async def send(body: dict[str, Any]) -> tuple[float, str]:
            started = time.perf_counter()
            response = await client.post("/v1/rerank", json=body)
            response.raise_for_status()
            return time.perf_counter() - started, response.json()["meta"]["model"]

        for body in bodies[:WARMUP_REQUESTS]:
            _, answered_by = await send(body)
        pending = iter(bodies[WARMUP_REQUESTS:])

        async def worker() -> None:
            for body in pending:
                latency, _ = await send(body)
                latencies.append(latency)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    ordered = sorted(latencies)
    return {
        "model": answered_by,
        "documents": len(bodies[0]["documents"]),
        "requests": requests,
        "concurrency": concurrency,
        "seconds": round(elapsed, 3),
        "requests_per_second": round(requests / elapsed, 2),
        "documents_per_second": round(requests * len(bodies[0]["documents"]) / elapsed, 1),
        "p50_ms": round(percentile(ordered, 0.50) * 1000, 1),
        "p95_ms": round(percentile(ordered, 0.95) * 1000, 1),
    }


def wait_until_ready(url: str, server: subprocess.Popen, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if server.poll() is not None:
            raise SystemExit(f"decirank serve exited with {server.returncode}")
        try:
            httpx.get(url + "/healthz", timeout=2).raise_for_status()
            return
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise SystemExit(f"decirank serve did not answer at {url} within {timeout:g} s") from None
            time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="decider", help="the server's model (default: decider, the embedded model)")
    parser.add_argument("--data", type=Path, help="a TREC run file of queries with hits (bm25_top100.json)")
    parser.add_argument("--requests", type=int, default=24, help="timed requests per document count")
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight at once")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    port = free_port()
    url = f"http://{HOST}:{port}"
    with tempfile.TemporaryDirectory(prefix="decirank-bench-") as home:
        # The decision cache stays off: a repeated question would measure the cache, not the model.
        env = {**os.environ, "DECIRANK_HOME": home, "DECIRANK_CACHE": "off"}
        command = [sys.executable, "-m", "decirank", "serve", "--port", str(port), "--model", args.model]
        server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
        try:
            wait_until_ready(url, server)
            results = [
                asyncio.run(measure(url, load_queries(args.data, size), args.requests, args.concurrency))
                for size in SIZES
            ]
        finally:
            server.terminate()
            server.wait(timeout=30)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"decirank serve --model {args.model}: /v1/rerank answered by {results[0]['model']}, {os.cpu_count()} CPUs")
    print(f"{'docs':>5} {'requests':>8} {'in flight':>9} {'req/s':>8} {'docs/s':>8} {'p50 ms':>8} {'p95 ms':>8}")
    for row in results:
        print(
            f"{row['documents']:>5} {row['requests']:>8} {row['concurrency']:>9} {row['requests_per_second']:>8}"
            f" {row['documents_per_second']:>8} {row['p50_ms']:>8} {row['p95_ms']:>8}"
        )


if __name__ == "__main__":
    main()

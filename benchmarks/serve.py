"""Throughput, latency, scaling and overload of ``decirank serve``'s /v1/rerank, in one run.

Each server runs on a free loopback port with its user state (run log
included) in a temporary directory and the decision cache off. Every
request carries new text (its query and documents are numbered), so the
embedded model's own cache never answers for it: what is measured is the
model and the server, not a cache.

1. Scaling: ``--workers 1 --threads 1``, ``--workers 2 --threads 1`` and the
   default (one worker, every core), each sent the same 20-document
   requests with a fixed number in flight: requests per second, p50/p95,
   seconds from start to ready, and each worker's resident memory at rest.
   The default is also sent 100-document requests.
2. Overload: one worker with ``--max-concurrency 4``, its p50/p95 with 1
   client and with 4 (its limit, nothing refused), then 64 clients that
   honour Retry-After: accepted and refused (503) requests, any other 5xx,
   and the accepted requests' p95 against the 4-client one.

    python benchmarks/serve.py --data path/to/trec-dl19/bm25_top100.json
    python benchmarks/serve.py --requests 12 --json

Documents are the BM25 top 100 of the DL19 queries when ``--data`` is
given, else generated sentences.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

HOST = "127.0.0.1"
WARMUP_REQUESTS = 2
#: The configurations compared for scaling, by the options that make them.
SCALING = (
    ("--workers 1 --threads 1", ["--workers", "1", "--threads", "1"]),
    ("--workers 2 --threads 1", ["--workers", "2", "--threads", "1"]),
    ("default (1 worker, every core)", []),
)
OVERLOAD_LIMIT = 4
OVERLOAD_CLIENTS = 64


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


class Bodies:
    """Request bodies, each with text no earlier request had (numbered), cycling through the queries."""

    def __init__(self, queries: list[tuple[str, list[str]]]) -> None:
        self.queries = queries
        self.count = itertools.count()

    def next(self) -> dict[str, Any]:
        n = next(self.count)
        query, documents = self.queries[n % len(self.queries)]
        return {
            "query": f"{query} (request {n})",
            "documents": [f"{document} (request {n})" for document in documents],
            "timeout": 300,
        }


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile."""
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]


def latency_figures(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    return {"p50_ms": round(percentile(ordered, 0.50) * 1000, 1), "p95_ms": round(percentile(ordered, 0.95) * 1000, 1)}


async def measure(url: str, bodies: Bodies, requests: int, concurrency: int) -> dict[str, Any]:
    """``requests`` requests with ``concurrency`` in flight, after a warm-up: throughput and latency."""
    latencies: list[float] = []
    async with httpx.AsyncClient(base_url=url, timeout=600) as client:

        async def send() -> str:
            started = time.perf_counter()
            response = await client.post("/v1/rerank", json=bodies.next())
            response.raise_for_status()
            latencies.append(time.perf_counter() - started)
            return response.json()["meta"]["model"]

        for _ in range(WARMUP_REQUESTS):
            answered_by = await send()
        latencies.clear()
        remaining = itertools.count()

        async def worker() -> None:
            while next(remaining) < requests:
                await send()

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    documents = len(bodies.queries[0][1])
    return {
        "model": answered_by,
        "documents": documents,
        "requests": requests,
        "concurrency": concurrency,
        "seconds": round(elapsed, 3),
        "requests_per_second": round(requests / elapsed, 2),
        "documents_per_second": round(requests * documents / elapsed, 1),
        **latency_figures(latencies),
    }


async def overload(url: str, bodies: Bodies, accepted_target: int, clients: int) -> dict[str, Any]:
    """``clients`` clients at once until ``accepted_target`` requests are answered; each honours Retry-After."""
    accepted: list[float] = []
    statuses: dict[int, int] = {}
    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:

        async def one_client() -> None:
            while len(accepted) < accepted_target:
                started = time.perf_counter()
                response = await client.post("/v1/rerank", json=bodies.next())
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
                if response.status_code == 200:
                    accepted.append(time.perf_counter() - started)
                elif response.status_code == 503:
                    await asyncio.sleep(float(response.headers.get("retry-after", "1")))

        started = time.perf_counter()
        await asyncio.gather(*(one_client() for _ in range(clients)))
        elapsed = time.perf_counter() - started
    return {
        "clients": clients,
        "accepted": len(accepted),
        "refused_503": statuses.get(503, 0),
        "other_5xx": sum(n for status, n in statuses.items() if status >= 500 and status != 503),
        "seconds": round(elapsed, 3),
        "accepted_per_second": round(len(accepted) / elapsed, 2),
        **latency_figures(accepted),
    }


def resident_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def serving_processes(pid: int) -> list[int]:
    """The processes that answer: the workers under a supervisor, else the server itself."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    workers = [int(child) for child in children if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes()]
    return workers or [pid]


@contextlib.contextmanager
def server(model: str, options: list[str], home: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """A running ``decirank serve``, with its seconds from start to ready and its workers' memory at rest."""
    port = free_port()
    url = f"http://{HOST}:{port}"
    # The decision cache stays off: a repeated question would measure the cache, not the model.
    env = {**os.environ, "DECIRANK_HOME": home, "DECIRANK_CACHE": "off"}
    command = [sys.executable, "-m", "decirank", "serve", "--port", str(port), "--model", model, *options]
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
    try:
        while True:
            if process.poll() is not None:
                raise SystemExit(f"decirank serve exited with {process.returncode}")
            try:
                if httpx.get(url + "/readyz", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.perf_counter() - started > 300:
                raise SystemExit(f"decirank serve was not ready at {url} within 300 s")
            time.sleep(0.02)
        ready = time.perf_counter() - started
        time.sleep(1.0)  # let every worker finish starting before its memory is read
        memory = [resident_mb(pid) for pid in serving_processes(process.pid)]
        yield url, {"start_to_ready_s": round(ready, 2), "idle_rss_mb": memory}
    finally:
        process.terminate()
        process.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="decider", help="the server's model (default: decider, the embedded model)")
    parser.add_argument("--data", type=Path, help="a TREC run file of queries with hits (bm25_top100.json)")
    parser.add_argument("--requests", type=int, default=24, help="timed requests per measurement")
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight at once")
    parser.add_argument("--skip-overload", action="store_true", help="measure scaling only")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    small, large = Bodies(load_queries(args.data, 20)), Bodies(load_queries(args.data, 100))
    scaling: list[dict[str, Any]] = []
    overloaded: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="decirank-bench-") as home:
        for label, options in SCALING:
            with server(args.model, options, home) as (url, started):
                rows = [asyncio.run(measure(url, small, args.requests, args.concurrency))]
                if not options:
                    rows.append(asyncio.run(measure(url, large, args.requests, args.concurrency)))
            scaling += [{"server": label, **started, **row} for row in rows]
        if not args.skip_overload:
            limit = ["--workers", "1", "--max-concurrency", str(OVERLOAD_LIMIT)]
            with server(args.model, limit, home) as (url, _):
                alone = asyncio.run(measure(url, small, args.requests, 1))
                at_limit = asyncio.run(measure(url, small, args.requests, OVERLOAD_LIMIT))
                flooded = asyncio.run(overload(url, small, args.requests * 2, OVERLOAD_CLIENTS))
            overloaded = {
                "one_client": alone,
                "at_limit": at_limit,
                "overloaded": flooded,
                "p95_ratio_to_at_limit": round(flooded["p95_ms"] / at_limit["p95_ms"], 2),
                "p95_ratio_to_one_client": round(flooded["p95_ms"] / alone["p95_ms"], 2),
            }
    by_label = {row["server"]: row for row in scaling if row["documents"] == 20}
    one, two, default = (by_label[label]["requests_per_second"] for label, _ in SCALING)
    ratios = {"two_workers_over_one": round(two / one, 2), "two_workers_over_default": round(two / default, 2)}
    figures = {"cpus": len(os.sched_getaffinity(0)), "scaling": scaling, "ratios": ratios, "overload": overloaded}
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"decirank serve --model {args.model}: /v1/rerank answered by {scaling[0]['model']}, {figures['cpus']} CPUs")
    header = f"{'server':<32} {'docs':>4} {'req/s':>7} {'docs/s':>7} {'p50 ms':>8} {'p95 ms':>8} {'ready s':>7}  RSS MB"
    print(header)
    for row in scaling:
        print(
            f"{row['server']:<32} {row['documents']:>4} {row['requests_per_second']:>7}"
            f" {row['documents_per_second']:>7} {row['p50_ms']:>8} {row['p95_ms']:>8}"
            f" {row['start_to_ready_s']:>7}  {row['idle_rss_mb']}"
        )
    print(
        f"--workers 2 --threads 1 over --workers 1 --threads 1: {ratios['two_workers_over_one']}x; "
        f"over the default: {ratios['two_workers_over_default']}x"
    )
    if overloaded:
        flooded = overloaded["overloaded"]
        print(
            f"--max-concurrency {OVERLOAD_LIMIT}, 20 docs: p95 {overloaded['one_client']['p95_ms']} ms with 1 client, "
            f"{overloaded['at_limit']['p95_ms']} ms with {OVERLOAD_LIMIT}; with {OVERLOAD_CLIENTS} clients "
            f"{flooded['accepted']} accepted (p95 {flooded['p95_ms']} ms, {overloaded['p95_ratio_to_at_limit']}x the "
            f"{OVERLOAD_LIMIT}-client p95), {flooded['refused_503']} refused with 503, {flooded['other_5xx']} other 5xx"
        )


if __name__ == "__main__":
    main()

"""Two ``decirank serve`` replicas on one PostgreSQL run log, one killed with SIGKILL under load.

Starts two replicas on free loopback ports, both writing the run log at
``--database-url`` (an empty database), and sends ``--requests`` rerank
requests from ``--clients`` clients, each request to the replica next in
turn; a client whose replica fails sends the request to the other, as a load
balancer would. When a third of the requests are answered, one replica is
killed with SIGKILL. Then the log is read: every acknowledged run must be
there, successful; a new replica is started, and the killed one's open runs
must now be ``interrupted``.

    python benchmarks/replicas.py --database-url postgresql://user@127.0.0.1:5432/empty_db
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any

import httpx

from decirank.stores.runlog import RunLog

HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def start(database_url: str, home: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "DECIRANK_HOME": home, "DECIRANK_DATABASE_URL": database_url, "DECIRANK_CACHE": "off"}
    command = [sys.executable, "-m", "decirank", "serve", "--port", str(port), "--model", "lexical"]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, start_new_session=True)
    url = f"http://{HOST}:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(url + "/readyz", timeout=5).status_code == 200:
                return process, url
        except httpx.TransportError:
            if time.monotonic() > deadline or process.poll() is not None:
                raise SystemExit(f"decirank serve did not become ready at {url}") from None
        time.sleep(0.05)


async def load(urls: list[str], requests: int, clients: int, kill_after: int, victim: subprocess.Popen) -> dict:
    acknowledged: list[str] = []
    failed_over = 0
    numbers = itertools.count()
    turn = itertools.cycle(range(len(urls)))
    killed_at: float | None = None
    async with httpx.AsyncClient(timeout=60) as client:

        async def one_client() -> None:
            nonlocal failed_over, killed_at
            while (n := next(numbers)) < requests:
                body = {"query": f"fleas on pets {n}", "documents": ["cats get fleas", "bread baking", f"flea {n}"]}
                first = next(turn)
                for attempt in range(len(urls)):
                    try:
                        response = await client.post(urls[(first + attempt) % len(urls)] + "/v1/rerank", json=body)
                    except httpx.TransportError:
                        failed_over += 1
                        continue
                    if response.status_code == 200:
                        acknowledged.append(response.json()["id"])
                        break
                    failed_over += 1
                if len(acknowledged) >= kill_after and killed_at is None:
                    killed_at = time.perf_counter()
                    os.killpg(victim.pid, signal.SIGKILL)

        started = time.perf_counter()
        await asyncio.gather(*(one_client() for _ in range(clients)))
        elapsed = time.perf_counter() - started
    return {"acknowledged": acknowledged, "failed_over": failed_over, "seconds": round(elapsed, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", required=True, help="a postgresql:// URL of an empty database")
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=8)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="decirank-replicas-") as home:
        victim, first = start(args.database_url, home)
        survivor, second = start(args.database_url, home)
        try:
            result = asyncio.run(load([first, second], args.requests, args.clients, args.requests // 3, victim))
            victim.wait()
            runlog = RunLog.open(args.database_url)
            statuses = {run["id"]: run["status"] for run in runlog.runs(limit=None)}
            left_open = [run_id for run_id, status in statuses.items() if status == "running"]
            restarted, _ = start(args.database_url, home)  # opening the log closes the killed replica's runs
            restarted.terminate()
            restarted.wait(timeout=60)
            interrupted = sum(runlog.run(run_id)["status"] == "interrupted" for run_id in left_open)
        finally:
            survivor.terminate()
            survivor.wait(timeout=60)
    acknowledged = result["acknowledged"]
    figures: dict[str, Any] = {
        "requests": args.requests,
        "clients": args.clients,
        "acknowledged": len(acknowledged),
        "lost": sum(statuses.get(run_id) != "success" for run_id in acknowledged),
        "failed_over": result["failed_over"],
        "left_running_by_the_killed_replica": len(left_open),
        "interrupted_on_reopen": interrupted,
        "seconds": result["seconds"],
    }
    print(json.dumps(figures, indent=2))
    if figures["lost"] or figures["acknowledged"] != args.requests:
        raise SystemExit("an acknowledged run was lost, or a request went unanswered")


if __name__ == "__main__":
    main()

"""Memory of ``decirank serve`` under a long run of small requests: does its resident set level off?

One server (``--model local`` by default) on a free loopback port, its user
state (run log included) in a temporary directory. A few clients send small
``/v1/rerank`` and ``/v1/score`` requests, each with text never sent before,
so every request reaches the model and the run log; the server's resident
memory (VmRSS, with its children's) is printed at rest and every
``--every`` requests.

    python benchmarks/soak.py                        # 20,000 requests, 4 clients
    python benchmarks/soak.py --requests 3000 --every 500
    python benchmarks/soak.py --json soak.json

The last line says whether the curve levelled off: the growth over the
last half of the run against the first half's, and the peak against
``--ceiling-mb`` (500).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

HOST = "127.0.0.1"
WORDS = (
    "invoice refund router outage password printer laptop shipping delay warranty login crash "
    "billing upgrade contract network battery screen update backup license"
).split()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its children, in MB (workers are children of the supervisor)."""
    total = 0
    pids = [pid]
    children = Path(f"/proc/{pid}/task/{pid}/children")
    if children.exists():
        pids += [int(child) for child in children.read_text().split()]
    for each in pids:
        try:
            for line in Path(f"/proc/{each}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except FileNotFoundError:
            continue
    return total / 1024


def text(n: int, words: int) -> str:
    """A short sentence no other request holds (its number is part of it)."""
    picked = [WORDS[(n * 7 + i * 3) % len(WORDS)] for i in range(words)]
    return f"ticket {n}: " + " ".join(picked)


def body(n: int) -> tuple[str, dict]:
    if n % 2:
        return "/v1/score", {"texts": [text(n, 8), text(n + 1, 6)], "question": f"is it urgent? ({n})"}
    return "/v1/rerank", {"query": f"{text(n, 3)}?", "documents": [text(n, 8), text(n + 2, 10), text(n + 3, 5)]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--every", type=int, default=1_000, help="print the resident memory every N requests")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--model", default="local")
    parser.add_argument("--ceiling-mb", type=float, default=500.0)
    parser.add_argument("--json", type=Path, help="also write the table here")
    parser.add_argument("serve_options", nargs="*", help="more options for decirank serve (after --)")
    options = parser.parse_args()

    home = tempfile.mkdtemp(prefix="decirank-soak-")
    port = free_port()
    url = f"http://{HOST}:{port}"
    command = [sys.executable, "-m", "decirank", "serve", "--port", str(port), "--model", options.model]
    environment = {**os.environ, "DECIRANK_HOME": home, "DECIRANK_CACHE": "off"}
    # The server's stderr (its access log: a line per request) to a file, which nothing has to keep reading.
    log = Path(home, "serve.log").open("w")
    server = subprocess.Popen([*command, *options.serve_options], env=environment, stderr=log, text=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            if server.poll() is not None:
                print(Path(home, "serve.log").read_text()[-4000:], file=sys.stderr)
                return 1
            try:
                if httpx.get(url + "/readyz", timeout=30).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("the server did not get ready within 180 s")
            time.sleep(0.1)
        rows = [{"requests": 0, "rss_mb": round(rss_mb(server.pid), 1), "seconds": 0.0}]
        print(f"decirank serve --model {options.model}: {options.requests} requests, {options.clients} clients")
        print(f"{'requests':>9} {'RSS MB':>8} {'change':>7} {'req/s':>7}")
        print(f"{0:>9} {rows[0]['rss_mb']:>8.1f} {'':>7} {'':>7}")
        numbers = itertools.count()
        lock = threading.Lock()
        done = 0
        failures: list[str] = []
        started = time.monotonic()
        last = (started, 0)

        def client() -> None:
            nonlocal done, last
            with httpx.Client(base_url=url, timeout=120) as session:
                while True:
                    with lock:
                        n = next(numbers)
                    if n >= options.requests:
                        return
                    path, payload = body(n)
                    response = session.post(path, json=payload)
                    with lock:
                        if response.status_code != 200:
                            failures.append(f"{path} {response.status_code}: {response.text[:200]}")
                        done += 1
                        if done % options.every == 0:
                            now = time.monotonic()
                            rss = round(rss_mb(server.pid), 1)
                            rate = (done - last[1]) / (now - last[0])
                            change = rss - rows[-1]["rss_mb"]
                            rows.append({"requests": done, "rss_mb": rss, "seconds": round(now - started, 1)})
                            print(f"{done:>9} {rss:>8.1f} {change:>+7.1f} {rate:>7.1f}", flush=True)
                            last = (now, done)

        threads = [threading.Thread(target=client) for _ in range(options.clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
    if failures:
        print(f"{len(failures)} requests failed; the first: {failures[0]}")
    if len(rows) >= 3:
        middle = rows[len(rows) // 2]
        first_half = middle["rss_mb"] - rows[1]["rss_mb"]
        second_half = rows[-1]["rss_mb"] - middle["rss_mb"]
        peak = max(row["rss_mb"] for row in rows)
        verdict = "levelled off" if second_half <= max(5.0, first_half / 2) and peak < options.ceiling_mb else "growing"
        print(
            f"at rest {rows[0]['rss_mb']:.0f} MB, peak {peak:.0f} MB (ceiling {options.ceiling_mb:.0f}); "
            f"after the first {rows[1]['requests']}: {first_half:+.1f} MB to the middle, "
            f"{second_half:+.1f} MB over the second half: {verdict}"
        )
    if options.json:
        options.json.write_text(json.dumps({"model": options.model, "clients": options.clients, "rows": rows}))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

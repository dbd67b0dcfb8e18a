"""Time and server memory of rerank requests carrying 1 MB documents.

    python benchmarks/large_documents.py [--requests 3]

Starts ``decirank serve`` (the embedded model) on a free loopback port with a
throwaway DECIRANK_HOME, sends requests of three distinct 1 MB documents each,
and prints each request's status, seconds and the server's resident memory.
A passage is read in at most 8 windows of 256 tokens, and a text is cut before it is
tokenized, so a large document costs about what eight pages of text do.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def resident_mb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) // 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3)
    requests = parser.parse_args().requests
    port = free_port()
    env = {**os.environ, "DECIRANK_HOME": tempfile.mkdtemp(prefix="decirank-bench-")}
    decirank = Path(sys.executable).with_name("decirank")
    server = subprocess.Popen([str(decirank), "serve", "--port", str(port)], env=env, stdout=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                httpx.get(f"{base}/healthz", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        print(f"idle: {resident_mb(server.pid)} MB")
        page = "fleas live for months on a host. " * 40000
        for i in range(requests):
            documents = [f"{page[:1_000_000]}{i}{suffix}" for suffix in "abc"]
            started = time.perf_counter()
            response = httpx.post(
                f"{base}/v1/rerank", json={"query": "how long do fleas live", "documents": documents}, timeout=120
            )
            print(
                f"request {i + 1}: {response.status_code} in {time.perf_counter() - started:.2f} s, "
                f"server {resident_mb(server.pid)} MB"
            )
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()

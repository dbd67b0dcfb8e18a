"""What the run log costs a tool call: rank calls with the lexical backend, log on vs off.

    python benchmarks/runlog_overhead.py [--calls 1000] [--rounds 7] [--threads 1]
    python benchmarks/runlog_overhead.py --baseline /path/to/old/src   # before vs after, in one run

The lexical backend answers in about 0.3 ms, so it shows the log's cost at
its most visible; with the embedded model or a hosted one the same cost
disappears into the model's time. Each round measures the log off, then on,
in a fresh process (a new log file); the medians over rounds are reported,
with the median of each round's difference as the overhead. CPU time (all
threads) is reported beside wall time: it is the steadier figure on a busy
machine.

``--threads N`` splits the calls over N threads, each with its own event
loop (the sync API runs every call on one loop): there, callers finishing
together share a commit. ``--baseline SRC`` runs
every round twice, alternately importing decirank from SRC (an older source
tree, the ``src`` folder of a checkout) and from this one, so load on the
machine falls on both alike.

Every call's rows are committed before the clock stops: the old writer is
flushed at the end of a round; the current one commits before a call returns.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ITEMS = [f"item number {n} about cats and cars" for n in range(10)]
HERE = Path(__file__).resolve().parent.parent / "src"


def measure(calls: int, threads: int) -> tuple[float, float]:
    """Wall and CPU microseconds per call, the run log's rows committed before the clock stops."""
    import decirank
    from decirank.stores.runlog import current_runlog

    def caller(first: int, count: int) -> None:
        if threads == 1:  # the sync API, as a script calls it
            for n in range(first, first + count):
                decirank.rank(ITEMS, "Which one purrs?", {"question": f"pets {n}"}, model="lexical")
            return

        async def calls() -> None:  # an event loop per thread, as several servers or workers in one process
            for n in range(first, first + count):
                await decirank.arank(ITEMS, "Which one purrs?", {"question": f"pets {n}"}, model="lexical")

        asyncio.run(calls())

    share = calls // threads
    workers = [threading.Thread(target=caller, args=(t * share, share)) for t in range(threads)]
    wall, cpu = time.perf_counter(), time.process_time()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    runlog = current_runlog()
    if runlog is not None:
        runlog.flush()
    done = share * threads
    return (time.perf_counter() - wall) / done * 1e6, (time.process_time() - cpu) / done * 1e6


def one_round(calls: int, threads: int) -> dict[str, float]:
    """Log off then on, in this process; a fresh log file."""
    os.environ["DECIRANK_HOME"] = tempfile.mkdtemp(prefix="decirank-bench-")
    from decirank.stores.runlog import current_runlog, reset_runlog, set_runlog

    measure(100, 1)  # warm up: imports, the log's file and schema
    set_runlog(None)
    off_wall, off_cpu = measure(calls, threads)
    reset_runlog()
    on_wall, on_cpu = measure(calls, threads)
    runlog = current_runlog()
    assert runlog is not None and runlog.count(kind="tool") == 100 + calls // threads * threads
    return {"off_wall": off_wall, "off_cpu": off_cpu, "on_wall": on_wall, "on_cpu": on_cpu}


def run_round(src: Path, calls: int, threads: int) -> dict[str, float]:
    environment = {**os.environ, "PYTHONPATH": str(src)}
    command = [sys.executable, __file__, "--one-round", "--calls", str(calls), "--threads", str(threads)]
    result = subprocess.run(command, env=environment, capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def report(name: str, rounds: list[dict[str, float]]) -> None:
    def median(key: str) -> float:
        return statistics.median(r[key] for r in rounds)

    wall = statistics.median(r["on_wall"] - r["off_wall"] for r in rounds)
    cpu = statistics.median(r["on_cpu"] - r["off_cpu"] for r in rounds)
    print(
        f"{name:>9}: off {median('off_wall'):5.0f} us wall {median('off_cpu'):5.0f} us CPU | "
        f"on {median('on_wall'):5.0f} us wall {median('on_cpu'):5.0f} us CPU | "
        f"overhead {wall:4.0f} us wall {cpu:4.0f} us CPU per call (medians of {len(rounds)} rounds)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--baseline", type=Path, help="an older source tree to compare with, round by round")
    parser.add_argument("--one-round", action="store_true", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.one_round:
        print(json.dumps(one_round(arguments.calls, arguments.threads)))
        return
    trees = {"current": HERE} if arguments.baseline is None else {"baseline": arguments.baseline, "current": HERE}
    results: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for _ in range(arguments.rounds):
        for name, src in trees.items():
            results[name].append(run_round(src, arguments.calls, arguments.threads))
    print(f"{arguments.calls} rank calls per round, {arguments.threads} thread(s), lexical backend")
    for name, rounds in results.items():
        report(name, rounds)


if __name__ == "__main__":
    main()

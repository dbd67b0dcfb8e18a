"""What the run log costs a tool call: 1,000 rank calls with the lexical backend, log on vs off.

    python benchmarks/runlog_overhead.py [--calls 1000] [--rounds 5]

The lexical backend answers in about 0.3 ms, so it shows the log's cost at
its most visible; with the embedded model or a hosted one the same cost
disappears into the model's time. Rounds alternate off and on, and the best
round of each is kept, because other load on the machine only ever adds
time. CPU time (all threads) is reported beside wall time: it is the steadier
figure on a busy machine.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

ITEMS = [f"item number {n} about cats and cars" for n in range(10)]


def measure(calls: int) -> tuple[float, float]:
    """Wall and CPU microseconds per call, the run log's rows committed before the clock stops."""
    import decirank
    from decirank.stores.runlog import current_runlog

    wall, cpu = time.perf_counter(), time.process_time()
    for n in range(calls):
        decirank.rank(ITEMS, "Which one purrs?", {"question": f"pets {n}"}, model="lexical")
    runlog = current_runlog()
    if runlog is not None:
        runlog.flush()
    return (time.perf_counter() - wall) / calls * 1e6, (time.process_time() - cpu) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    arguments = parser.parse_args()
    os.environ["DECIRANK_HOME"] = tempfile.mkdtemp(prefix="decirank-bench-")
    from decirank.stores.runlog import current_runlog, reset_runlog, set_runlog

    measure(100)  # warm up: imports, the log's file and schema
    best = {"off": (float("inf"), float("inf")), "on": (float("inf"), float("inf"))}
    for _ in range(arguments.rounds):
        for mode in ("off", "on"):
            if mode == "off":
                set_runlog(None)
            else:
                reset_runlog()
            wall, cpu = measure(arguments.calls)
            best[mode] = (min(best[mode][0], wall), min(best[mode][1], cpu))
    for mode, (wall, cpu) in best.items():
        print(f"run log {mode:>3}: {wall:6.0f} us wall, {cpu:6.0f} us CPU per rank call")
    print(
        f"overhead: {best['on'][0] - best['off'][0]:.0f} us wall, {best['on'][1] - best['off'][1]:.0f} us CPU "
        f"per tool call ({current_runlog().count(kind='tool')} runs written to {current_runlog().location})"
    )


if __name__ == "__main__":
    main()

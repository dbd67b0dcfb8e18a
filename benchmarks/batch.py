"""``decirank batch`` on one machine and on a local Ray: rows per second, peak memory per worker, resume.

Generates ROWS short texts (support tickets, seeded, every one different),
then runs ``decirank batch filter`` on them as a user would (the CLI in a
subprocess, its user state in a temporary folder) with:

- 1 worker process on 1 core, 1 worker on every core, N workers (one per core):
  rows per second, and the scaling from 1 to N;
- ``--engine ray`` on a local Ray instance with N actors: its overhead against
  the plain N-worker run (start-up included, as a user pays it);
- a run killed with SIGKILL part-way and run again: its output must equal the
  uninterrupted one byte for byte (and so must Ray's).

Peak memory is each worker's (and the driver's) high-water resident set,
read from /proc while the run goes. Prints a table, or ``--json``.

    python benchmarks/batch.py                 # 20,000 rows, the embedded model
    python benchmarks/batch.py --rows 2000 --model lexical --no-ray
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

QUESTION = "Is the customer asking about a refund or a payment?"

_WHO = ["I", "My wife", "We", "My son", "Our team", "The shop", "My landlord", "A friend", "My manager", "Grandma"]
_WHAT = [
    "was charged twice for",
    "never received",
    "cannot log in to see",
    "want a refund for",
    "love",
    "returned",
    "got a broken screen on",
    "waited three weeks for",
    "cannot cancel",
    "was billed late for",
    "need an invoice for",
    "cannot update the address on",
    "lost the password for",
    "got the wrong size of",
    "have a question about",
]
_THING = [
    "the blue jacket",
    "order 4471",
    "my subscription",
    "the phone case",
    "the gift card",
    "a birthday cake",
    "the annual plan",
    "the running shoes",
    "the kitchen table",
    "the app's premium tier",
    "a concert ticket",
    "the coffee machine",
    "my last payment",
    "the delivery fee",
    "the spare battery",
    "the hotel booking",
]
_TAIL = [
    "yesterday",
    "last month",
    "twice now",
    "since Monday",
    "after the update",
    "and nobody answers",
    "please help",
    "what should I do",
    "is this normal",
    "thanks in advance",
    "again",
    "this morning",
]


def generate(path: Path, rows: int, seed: int = 7) -> None:
    """``rows`` short tickets ``{"id", "text"}``, no two alike."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as file:
        for index in range(rows):
            text = f"{rng.choice(_WHO)} {rng.choice(_WHAT)} {rng.choice(_THING)} {rng.choice(_TAIL)} (ticket {index})"
            file.write(json.dumps({"id": index, "text": text}) + "\n")


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as file:
            return [int(child) for child in file.read().split()]
    except OSError:
        return []


def _status(pid: int) -> tuple[str, int] | None:
    """(command line, high-water RSS in bytes) of a process, None when it is gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            command = file.read().replace(b"\0", b" ").decode(errors="replace")
        with open(f"/proc/{pid}/status", encoding="ascii") as file:
            for line in file:
                if line.startswith("VmHWM:"):
                    return command, int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


class MemoryWatch:
    """Samples the high-water RSS of a process tree every 0.2 s, by process kind."""

    def __init__(self, *roots: int) -> None:
        self.roots = roots
        self.peaks: dict[int, tuple[str, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            stack = list(self.roots)
            while stack:
                pid = stack.pop()
                status = _status(pid)
                if status is not None:
                    self.peaks[pid] = (status[0], max(status[1], self.peaks.get(pid, ("", 0))[1]))
                stack.extend(_children(pid))
            self._stop.wait(0.2)

    def stop(self) -> dict[str, float | None]:
        self._stop.set()
        self._thread.join()

        def peak(match) -> float | None:
            values = [rss for command, rss in self.peaks.values() if match(command)]
            return round(max(values) / 2**20) if values else None

        return {
            "driver_mb": peak(lambda c: "decirank" in c and "batch" in c and "spawn" not in c),
            "worker_mb": peak(lambda c: "multiprocessing.spawn" in c or c.startswith("ray::MapWorker")),
        }


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _descendants(pid: int) -> list[int]:
    found, stack = [], [pid]
    while stack:
        for child in _children(stack.pop()):
            found.append(child)
            stack.append(child)
    return found


#: A head on the loopback for one benchmark run: no token to share between it and the batch.
RAY_LOOPBACK = {**os.environ, "RAY_AUTH_MODE": "disabled"}


class RayHead:
    """A Ray instance of our own, as a cluster's head runs it (``ray start --head --block``), ended by PID."""

    def __init__(self, cpus: int) -> None:
        self.port = _free_port()
        ray = str(Path(sys.executable).with_name("ray"))
        self.process = subprocess.Popen(
            [
                ray,
                "start",
                "--head",
                "--block",
                f"--port={self.port}",
                f"--num-cpus={cpus}",
                "--include-dashboard=false",
                "--disable-usage-stats",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env=RAY_LOOPBACK,
        )
        self.address = f"127.0.0.1:{self.port}"
        deadline = time.monotonic() + 60
        while not any("raylet" in (_status(pid) or ("", 0))[0] for pid in _descendants(self.process.pid)):
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise SystemExit("ray start --head did not come up")
            time.sleep(0.5)
        time.sleep(3)  # the raylet registers with the GCS

    def stop(self) -> None:
        # Only the processes this head started: other Ray instances on the machine are left alone.
        pids = _descendants(self.process.pid) + [self.process.pid]
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            time.sleep(2)
        self.process.wait()
        # ray start leaves the head's address for a later ray.init() to join: it is gone now.
        current = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
        try:
            if current.read_text().strip().endswith(f":{self.port}"):
                current.unlink()
        except OSError:
            pass


def run_batch(
    data: Path,
    out: Path,
    home: Path,
    *,
    model: str,
    workers: int,
    engine: str = "local",
    cores: set[int] | None = None,
    kill_after_chunks: int | None = None,
    batch_size: int | None = None,
    address: str | None = None,
    also_watch: tuple[int, ...] = (),
) -> dict[str, Any]:
    command = [
        sys.executable,
        "-m",
        "decirank",
        "batch",
        "filter",
        str(data),
        "--out",
        str(out),
        "--question",
        QUESTION,
        "--text",
        "text",
        "--model",
        model,
        "--workers",
        str(workers),
        "--engine",
        engine,
        "--json",
    ]
    if batch_size:
        command += ["--batch-size", str(batch_size)]
    if address:
        command += ["--address", address]
    environment = {**(RAY_LOOPBACK if address else os.environ), "DECIRANK_HOME": str(home)}
    started = time.perf_counter()
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environment,
        text=True,
        preexec_fn=(lambda: os.sched_setaffinity(0, cores)) if cores else None,
    )
    watch = MemoryWatch(process.pid, *also_watch)
    if kill_after_chunks is not None:
        journal = out.with_name(out.name + ".progress") / "done.jsonl"
        while process.poll() is None:
            if journal.exists() and journal.read_bytes().count(b"\n") >= kill_after_chunks:
                process.send_signal(signal.SIGKILL)  # the driver only: its workers must notice and go
                break
            time.sleep(0.05)
    stdout, stderr = process.communicate()
    wall = time.perf_counter() - started
    memory = watch.stop()
    if kill_after_chunks is not None:
        done = (out.with_name(out.name + ".progress") / "done.jsonl").read_bytes().count(b"\n")
        return {"killed": process.returncode == -signal.SIGKILL, "chunks_done": done, "wall_s": round(wall, 1)}
    if process.returncode != 0:
        raise SystemExit(f"decirank batch failed ({process.returncode}): {stderr.strip()[-2000:]}")
    result = json.loads(stdout)
    return {
        "engine": engine,
        "workers": workers,
        "cores": len(cores) if cores else len(os.sched_getaffinity(0)),
        "rows": result["rows"],
        "seconds": result["seconds"],
        "wall_s": round(wall, 1),
        "rows_per_second": result["rows_per_second"],
        **memory,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--model", default="local")
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray run")
    parser.add_argument("--json", action="store_true")
    arguments = parser.parse_args()
    cores = sorted(os.sched_getaffinity(0))
    workers = len(cores)
    results: dict[str, Any] = {"rows": arguments.rows, "model": arguments.model, "cores": workers, "runs": []}
    with tempfile.TemporaryDirectory(prefix="decirank-bench-batch-") as folder:
        root = Path(folder)
        data = root / "tickets.jsonl"
        generate(data, arguments.rows)

        def run(name: str, **options: Any) -> dict[str, Any]:
            out = root / f"{name}.jsonl"
            measured = run_batch(data, out, root / f"home-{name}", model=arguments.model, **options)
            measured["name"] = name
            results["runs"].append(measured)
            print(f"  {name}: {measured['rows_per_second']} rows/s", file=sys.stderr)
            return measured

        one_core = run("1 worker, 1 core", workers=1, cores={cores[0]})
        run("1 worker, all cores", workers=1)
        plain = run(f"{workers} workers", workers=workers)
        results["scaling"] = round(plain["rows_per_second"] / one_core["rows_per_second"], 2)
        results["rows_per_second_per_core"] = round(plain["rows_per_second"] / workers, 1)

        reference = (root / f"{workers} workers.jsonl").read_bytes()
        if not arguments.no_ray:
            ray = run(f"ray, {workers} actors, Ray started by the batch", workers=workers, engine="ray")
            results["ray_overhead"] = round(ray["seconds"] / plain["seconds"] - 1, 3)
            head = RayHead(workers)
            try:
                running = run(
                    f"ray, {workers} actors, a running Ray (--address)",
                    workers=workers,
                    engine="ray",
                    address=head.address,
                    also_watch=(head.process.pid,),
                )
            finally:
                head.stop()
            results["ray_overhead_running"] = round(running["seconds"] / plain["seconds"] - 1, 3)
            results["ray_output_identical"] = all(
                (root / f"{measured['name']}.jsonl").read_bytes() == reference
                for measured in results["runs"]
                if measured["engine"] == "ray"
            )

        # Resume: kill the driver with SIGKILL once a third of the chunks are done, then run it again.
        resumed_out = root / "resumed.jsonl"
        chunks = -(-arguments.rows // 256)
        killed = run_batch(
            data,
            resumed_out,
            root / "home-resume",
            model=arguments.model,
            workers=workers,
            kill_after_chunks=max(1, chunks // 3),
        )
        again = run_batch(data, resumed_out, root / "home-resume", model=arguments.model, workers=workers)
        results["resume"] = {
            **killed,
            "rerun_rows_per_second": again["rows_per_second"],
            "identical": resumed_out.read_bytes() == reference,
        }
    if arguments.json:
        print(json.dumps(results, indent=2))
        return
    print(f"decirank batch filter, {results['rows']} short texts, model {results['model']}, {workers} cores\n")
    print("| run | rows/s | seconds (wall) | peak MB per worker | peak MB driver |")
    print("|-----|--------|----------------|--------------------|----------------|")
    for measured in results["runs"]:
        print(
            f"| {measured['name']} | {measured['rows_per_second']:.0f} "
            f"| {measured['seconds']:.1f} ({measured['wall_s']}) | {measured['worker_mb']} | {measured['driver_mb']} |"
        )
    print(
        f"\nscaling 1 -> {workers} workers: x{results['scaling']}; "
        f"{results['rows_per_second_per_core']} rows/s per core"
    )
    if "ray_overhead" in results:
        print(
            f"ray overhead against {workers} plain workers: {results['ray_overhead']:+.1%} starting Ray, "
            f"{results['ray_overhead_running']:+.1%} on a running Ray; "
            f"output identical: {results['ray_output_identical']}"
        )
    resume = results["resume"]
    print(
        f"resume: killed (SIGKILL) after {resume['chunks_done']} of {chunks} chunks; rerun output identical "
        f"to the uninterrupted one: {resume['identical']}"
    )


if __name__ == "__main__":
    main()

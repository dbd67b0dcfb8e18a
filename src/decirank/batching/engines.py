"""Where chunks are answered: in this process, in worker processes on this machine, or on Ray.

An engine takes the prepared chunks lazily and yields each with its outcome
as it finishes, in any order; the driver records them. Every engine answers
a chunk with the same function (:func:`~.chunks.answer_chunk`), so they give
the same answers.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from .chunks import ChunkOutcome, Item, answer_chunk, prepare_worker, worker_chunk
from .job import Task

__all__ = ["InlineEngine", "Prepared", "ProcessEngine", "usable_cores"]


@dataclass
class Prepared:
    """A chunk ready to be asked: the rows that can be, and the rows that cannot with why."""

    chunk: int
    start: int
    size: int
    items: list[Item]
    #: ``[offset, error type, message]`` for rows that cannot be asked (found by the driver).
    problems: list[list[Any]] = field(default_factory=list)


def usable_cores() -> list[int]:
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


class InlineEngine:
    """Every chunk in this process, one after another (``workers=0``): for tests and custom backends."""

    name = "inline"

    def __init__(self, task: Task) -> None:
        self.task = task
        self.workers = 0

    def run(self, chunks: Iterator[Prepared], fail_fast: bool) -> Iterator[tuple[Prepared, ChunkOutcome]]:
        for prepared in chunks:
            if not prepared.items:
                yield prepared, ChunkOutcome(prepared.chunk)
                continue
            yield prepared, answer_chunk(self.task, prepared.chunk, prepared.items, fail_fast)


def _start_worker(task: Task, cores: Any, parent: int) -> None:
    assigned = None
    if cores is not None:
        try:
            assigned = cores.get(timeout=1)
        except Exception:  # no core set left (a replaced worker): it runs anywhere
            pass
    prepare_worker(task, assigned, parent)


class ProcessEngine:
    """Worker processes on this machine, each with the model loaded once.

    With several workers each is pinned to its share of the cores, so the
    embedded model's threads do not fight over them; ``pin=False`` leaves
    them to the operating system.
    """

    name = "local"

    def __init__(self, task: Task, workers: int, *, pin: bool = True) -> None:
        self.task = task
        self.workers = workers
        self.pin = pin

    def _core_sets(self) -> list[list[int]] | None:
        cores = usable_cores()
        if not self.pin or self.workers < 2 or self.workers > len(cores):
            return None
        return [cores[index :: self.workers] for index in range(self.workers)]

    def run(self, chunks: Iterator[Prepared], fail_fast: bool) -> Iterator[tuple[Prepared, ChunkOutcome]]:
        context = multiprocessing.get_context("spawn")
        core_sets = self._core_sets()
        core_queue = context.Queue() if core_sets else None
        for cores in core_sets or []:
            core_queue.put(cores)
        pool = ProcessPoolExecutor(
            self.workers, mp_context=context, initializer=_start_worker, initargs=(self.task, core_queue, os.getpid())
        )
        in_flight: dict[Future[ChunkOutcome], Prepared] = {}
        finished = False
        try:
            for prepared in chunks:
                if not prepared.items:
                    yield prepared, ChunkOutcome(prepared.chunk)
                    continue
                while len(in_flight) >= 2 * self.workers:
                    yield from self._collect(in_flight)
                in_flight[pool.submit(worker_chunk, prepared.chunk, prepared.items, fail_fast)] = prepared
            while in_flight:
                yield from self._collect(in_flight)
            finished = True
        finally:
            if not finished:
                # Stopped early (a failure, fail-fast, Ctrl-C, the caller closed us): end the workers now.
                for process in list(getattr(pool, "_processes", {}).values()):
                    process.terminate()
            pool.shutdown(wait=True, cancel_futures=True)
            if core_queue is not None:
                core_queue.close()

    @staticmethod
    def _collect(in_flight: dict[Future[ChunkOutcome], Prepared]) -> Iterator[tuple[Prepared, ChunkOutcome]]:
        done, _ = wait(list(in_flight), return_when=FIRST_COMPLETED)
        for future in done:
            prepared = in_flight.pop(future)
            yield prepared, future.result()

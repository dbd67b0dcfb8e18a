"""``engine="ray"``: the chunks answered by Ray Data, on a local Ray instance or a cluster.

The driver reads the input and sends the chunks not yet done, in waves of
about :data:`WAVE_ROWS` rows (so its memory stays bounded on any input), as a
Ray Data dataset of one block per chunk; ``map_batches`` runs them through a
pool of actors, one chunk per call, each actor holding its own model (loaded
once, in its constructor). Outcomes stream back to the driver as they finish,
which records them exactly as the local engine's: resuming, the output and
the run log work the same on both. Each chunk's tool run is written by the
actor that asked it, to the run log the ``DECIRANK_*`` variables name: set
``DECIRANK_DATABASE_URL`` so every node logs to one PostgreSQL.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Iterator
from typing import Any

from ..errors import MissingAssetError
from .chunks import BatchStopped, ChunkOutcome, answer_chunk, prepare_worker
from .engines import Prepared
from .job import Task

__all__ = ["WAVE_ROWS", "RayEngine", "check_ray"]

#: Rows sent to the cluster at once; each wave starts its actors (and loads their model) anew.
WAVE_ROWS = 200_000


def _ray():
    try:
        import ray
        import ray.data
    except ImportError:
        raise MissingAssetError("Ray Data, for --engine ray", "pip install 'decirank[ray]'") from None
    return ray


def check_ray() -> None:
    """Raise :class:`MissingAssetError` unless Ray Data can be imported: checked before a batch starts."""
    _ray()


class ChunkActor:
    """One Ray actor: the model loaded once, then one chunk per call."""

    def __init__(self, task: Task, fail_fast: bool) -> None:
        prepare_worker(task)
        self.task = task
        self.fail_fast = fail_fast

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        outcomes = []
        for chunk, items in zip(batch["chunk"], batch["items"], strict=True):
            decoded = [(int(offset), text, query) for offset, text, query in json.loads(items)]
            outcome = answer_chunk(self.task, int(chunk), decoded, self.fail_fast)
            outcomes.append(json.dumps(outcome.to_dict(), ensure_ascii=True))
        return {"chunk": np.asarray(batch["chunk"]), "outcome": np.asarray(outcomes, dtype=object)}


class RayEngine:
    name = "ray"

    def __init__(self, task: Task, workers: int | None, *, address: str | None, chunk_rows: int) -> None:
        self.task = task
        self.address = address
        self.chunk_rows = chunk_rows
        ray = _ray()
        self._started_ray = False
        if not ray.is_initialized():
            options: dict[str, Any] = {
                "include_dashboard": False,
                "log_to_driver": False,
                "logging_level": logging.ERROR,
                "ignore_reinit_error": True,
            }
            if address is None and workers:
                options["num_cpus"] = workers
            try:
                # "local" starts an instance of our own, never joining one another user left running.
                ray.init(address=address or "local", **options)
            except (ConnectionError, ValueError, RuntimeError, TimeoutError) as error:
                what = f"Ray at {address!r}" if address else "a local Ray instance"
                raise BatchStopped(f"cannot start or reach {what}: {error}", error_type=type(error).__name__) from None
            self._started_ray = True
        if workers is None:
            workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self.workers = workers
        logging.getLogger("ray.data").setLevel(logging.ERROR)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            context = ray.data.DataContext.get_current()
            context.enable_progress_bars = False
            if hasattr(context, "print_on_execution_start"):
                context.print_on_execution_start = False

    def _wave(self, wave: list[Prepared], fail_fast: bool) -> Iterator[tuple[Prepared, ChunkOutcome]]:
        with warnings.catch_warnings():
            # Ray's deprecations of its own settings (remote args passed by name, as Ray Data still
            # takes them; DataContext fields it reads itself) are not the user's to act on.
            warnings.simplefilter("ignore", DeprecationWarning)
            yield from self._answer(wave, fail_fast)

    def _answer(self, wave: list[Prepared], fail_fast: bool) -> Iterator[tuple[Prepared, ChunkOutcome]]:
        ray = _ray()
        by_chunk = {prepared.chunk: prepared for prepared in wave}
        dataset = ray.data.from_items(
            [{"chunk": p.chunk, "items": json.dumps(p.items, ensure_ascii=True)} for p in wave],
            override_num_blocks=len(wave),
        )
        # On a cluster, Ray Data restarts a lost actor and retries its chunk. On a local instance
        # there is no node to lose, and restartable actors make Ray warn on stderr: a crashed
        # actor stops the batch instead, whose rows done stay done for the rerun.
        restarts: dict[str, Any] = {} if self.address else {"max_restarts": 0}
        answered = dataset.map_batches(
            ChunkActor,
            fn_constructor_args=(self.task, fail_fast),
            batch_size=1,
            batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=min(self.workers, len(wave))),
            num_cpus=1,
            **restarts,
        )
        for row in answered.iter_rows():
            outcome = ChunkOutcome.from_dict(json.loads(row["outcome"]))
            yield by_chunk[outcome.chunk], outcome

    def run(self, chunks: Iterator[Prepared], fail_fast: bool) -> Iterator[tuple[Prepared, ChunkOutcome]]:
        wave_chunks = max(4 * self.workers, WAVE_ROWS // max(1, self.chunk_rows))
        wave: list[Prepared] = []
        try:
            for prepared in chunks:
                if not prepared.items:
                    yield prepared, ChunkOutcome(prepared.chunk)
                    continue
                wave.append(prepared)
                if len(wave) >= wave_chunks:
                    yield from self._wave(wave, fail_fast)
                    wave = []
            if wave:
                yield from self._wave(wave, fail_fast)
        finally:
            if self._started_ray:
                _ray().shutdown()

"""The batch as one run in the run log, across restarts.

The run is opened when the batch starts (a resumed batch reopens its own run,
so the whole batch stays one run however often it was restarted), its
progress is written every few seconds while it runs, and it is closed with
its counts, the usage of every model that answered (by model), and the first
failed rows (all of them are in the errors file). Each chunk's tool call is
a child run of it, written by whichever worker asked it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ..errors import error_record
from ..stores.runlog import RunLog, current_runlog, summarize
from ..types.answers import Usage

__all__ = ["BatchRecord"]

TICK_SECONDS = 5.0


class BatchRecord:
    def __init__(self, run_id: str, *, started: float, model: str, inputs: dict[str, Any]) -> None:
        self.run_id = run_id
        self.runlog: RunLog | None = current_runlog()
        self._started = started
        self._last_tick = 0.0
        if self.runlog is not None:
            self.runlog.start_run(
                run_id, tool="batch", role=model, inputs=summarize(inputs, max_items=10), started=started
            )

    @property
    def enabled(self) -> bool:
        return self.runlog is not None

    def _write(
        self, status: str, outputs: dict[str, Any], usage: Usage, models: str | None, error: BaseException | None
    ) -> None:
        assert self.runlog is not None
        self.runlog.finish_run(
            self.run_id,
            status=status,
            models=models,
            outputs=summarize(outputs, max_items=10),
            error=error_record(error) if error is not None else None,
            usage=usage.to_dict(),
            ended=time.time(),
            duration=time.time() - self._started,
        )

    def due(self) -> bool:
        """Whether progress is to be written now: a run log is kept and the last write is a few seconds old."""
        return self.runlog is not None and time.perf_counter() - self._last_tick >= TICK_SECONDS

    def tick(self, outputs: dict[str, Any], usage: Usage, models: str | None) -> None:
        """Progress so far (when :meth:`due`); the run stays ``running``."""
        if self.runlog is None:
            return
        self._last_tick = time.perf_counter()
        self._write("running", outputs, usage, models, None)

    def close(self, outputs: dict[str, Any], usage: Usage, models: str | None, error: BaseException | None) -> None:
        if self.runlog is None:
            return
        if error is None:
            status = "success"
        elif isinstance(error, asyncio.CancelledError | KeyboardInterrupt):
            status, error = "cancelled", None
        else:
            status = "failed"
        self._write(status, outputs, usage, models, error)

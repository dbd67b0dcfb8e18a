"""The batch driver: reads the input, hands chunks to an engine, records them, writes the output.

Rows are cut into fixed chunks by row number (``chunk_rows`` each, the
model's questions per call by default). The driver turns each row into what
a worker asks (its text, its query) or a row error; an engine answers the
chunks; each finished chunk is appended to the progress journal, counted,
shown on the progress bar and, every few seconds, written to the batch's run.
When every chunk is done the output and the errors file are written in input
order and the progress folder is removed.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..calibration._guarantees import Cutoff
from ..decisions.decider import Decider
from ..errors import InvalidInputError
from ..tools._calibrated import check_first_model
from ..tools._checks import check_count
from ..types.answers import Usage
from .chunks import BatchStopped, ChunkOutcome
from .engines import InlineEngine, Prepared, ProcessEngine, usable_cores
from .files import RowWriter, check_readable, count_rows, file_format, input_columns, output_layout, read_rows
from .job import Job, RowProblem, row_item
from .progress import Progress
from .record import BatchRecord

__all__ = ["DEFAULT_CHUNK_ROWS", "ENGINES", "BatchProgress", "BatchResult", "errors_path_for", "run_batch"]

#: Rows per chunk when the model declares no questions-per-call limit.
DEFAULT_CHUNK_ROWS = 64
#: More worker processes or actors than any machine could run; a larger number is a typo.
MAX_WORKERS = 4096
ENGINES = ("local", "ray")


@dataclass(frozen=True)
class BatchProgress:
    """Where a batch stands: rows done (answered or failed, resumed ones included) of ``total``."""

    total: int
    done: int
    failed: int
    resumed: int


@dataclass(frozen=True)
class BatchResult:
    tool: str
    input: str
    output: str
    #: The errors file, when some rows failed; else None.
    errors: str | None
    #: Data rows read from the input.
    rows: int
    answered: int
    failed: int
    #: Rows done by an earlier, interrupted run of the same batch.
    resumed: int
    seconds: float
    run_id: str | None
    engine: str
    workers: int
    chunk_rows: int
    usage: Usage = field(default_factory=Usage)
    #: Rows written to the output: fewer than ``rows`` with ``kept_only``, or where a row could not be read.
    written: int | None = None
    #: Usage by the model(s) that answered.
    models: dict[str, Usage] = field(default_factory=dict)
    #: The calibration the probabilities went through, by name, or None.
    calibration: str | None = None
    #: filter with a target: the one cut-off every row was kept by, and what it promises.
    promise: Cutoff | None = None

    @property
    def rows_per_second(self) -> float:
        asked = self.rows - self.resumed
        return asked / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "input": self.input,
            "output": self.output,
            "errors": self.errors,
            "rows": self.rows,
            "written": self.written,
            "answered": self.answered,
            "failed": self.failed,
            "resumed": self.resumed,
            "seconds": round(self.seconds, 3),
            "rows_per_second": round(self.rows_per_second, 1),
            "run_id": self.run_id,
            "engine": self.engine,
            "workers": self.workers,
            "chunk_rows": self.chunk_rows,
            "usage": self.usage.to_dict(),
            "models": {model: usage.to_dict() for model, usage in self.models.items()},
            "calibration": self.calibration,
            "promise": None if self.promise is None else self.promise.to_dict(),
        }


def errors_path_for(output: Path) -> Path:
    """``out.jsonl`` -> ``out.errors.jsonl`` (any output format)."""
    return output.with_name(output.stem + ".errors.jsonl")


def _check_paths(input: Any, output: Any, errors: Any) -> tuple[Path, str, Path, str, Path]:
    for name, value in (("input", input), ("output", output)):
        if not isinstance(value, str | os.PathLike) or not os.fspath(value):
            raise InvalidInputError(name, "a file path", got=value)
    input_path, output_path = Path(input), Path(output)
    in_fmt = file_format(input_path, "input")
    out_fmt = file_format(output_path, "output")
    if not input_path.is_file():
        kind = "is not a regular file" if input_path.exists() else "does not exist"
        raise InvalidInputError(
            "input", "a JSON Lines, CSV or Parquet file", detail=f"{os.fspath(input_path)!r} {kind}"
        )
    if not output_path.parent.is_dir():
        raise InvalidInputError(
            "output", "a path in an existing folder", detail=f"no folder {os.fspath(output_path.parent)!r}"
        )
    if output_path.exists() and output_path.resolve() == input_path.resolve():
        raise InvalidInputError("output", "a file other than the input", detail=f"both are {os.fspath(input_path)!r}")
    errors_path = errors_path_for(output_path) if errors is None else Path(errors)
    if errors is not None and file_format(errors_path, "errors") != "jsonl":
        raise InvalidInputError("errors", "a .jsonl file", detail=f"got {os.fspath(errors_path)!r}")
    if errors_path.resolve() in (input_path.resolve(), output_path.resolve()):
        raise InvalidInputError("errors", "a file other than the input and the output", got=os.fspath(errors_path))
    if not errors_path.parent.is_dir():
        raise InvalidInputError(
            "errors", "a path in an existing folder", detail=f"no folder {os.fspath(errors_path.parent)!r}"
        )
    return input_path, in_fmt, output_path, out_fmt, errors_path


def _check_columns(job: Job, columns: list[str] | None, input_path: Path) -> None:
    """Against a file that declares its columns (CSV, Parquet): the named columns exist, no answer column clashes."""
    if columns is None:
        return
    shown = ", ".join(columns[:20]) + (" ..." if len(columns) > 20 else "")
    for name, column in (("text", job.text), ("query_field", job.query_field)):
        if column is not None and column not in columns:
            raise InvalidInputError(
                name, f"a column of {os.fspath(input_path)!r}", detail=f"no column {column!r}; it has {shown}"
            )
    clash = [column for column in job.columns if column in columns]
    if clash:
        raise InvalidInputError(
            "input",
            f"no column named like an answer column ({', '.join(job.columns)})",
            detail=f"{os.fspath(input_path)!r} already has {', '.join(map(repr, clash))}",
        )


def _prepare(
    job: Job, input_path: Path, fmt: str, chunk_rows: int, done: dict[int, Any], fail_fast: bool
) -> Iterator[Prepared]:
    """The chunks not yet done, each with its askable rows and its row errors."""
    current: Prepared | None = None
    for row in read_rows(input_path, fmt):
        chunk, offset = divmod(row.index, chunk_rows)
        if current is None or current.chunk != chunk:
            if current is not None and current.chunk not in done:
                yield current
            current = Prepared(chunk, chunk * chunk_rows, 0, [])
        current.size += 1
        if chunk in done:
            continue
        try:
            if row.value is None:
                raise RowProblem(row.problem or "the row could not be read", "UnreadableRow")
            if row.problem is not None:
                raise RowProblem(row.problem, "InvalidRow")
            clash = [column for column in job.columns if column in row.value]
            if clash:
                raise RowProblem(
                    f"the row already has {', '.join(map(repr, clash))}, a column the answers go in", "InvalidRow"
                )
            text, query = row_item(job, row.value)
        except RowProblem as problem:
            if fail_fast:
                raise BatchStopped(f"row {row.index} cannot be asked ({problem.kind}: {problem}); stopped by fail-fast")
            current.problems.append([offset, problem.kind, str(problem)])
            continue
        current.items.append((offset, text, query))
    if current is not None and current.chunk not in done:
        yield current


def _stop_message(prepared: Prepared, stop: list[Any], done_rows: int) -> str:
    error_type, message = stop[0], stop[1]
    first, last = prepared.start + int(stop[2]), prepared.start + int(stop[3])
    rows = f"row {first}" if first == last else f"rows {first}-{last}"
    return (
        f"{rows}: {error_type}: {message}; the batch stopped with {done_rows} rows done, "
        "kept: run the same command again to resume"
    )


def _assemble(
    job: Job,
    progress: Progress,
    input_path: Path,
    in_fmt: str,
    output_path: Path,
    out_fmt: str,
    errors_path: Path,
    kept_only: bool = False,
) -> int:
    """Write the output (and the errors file) from the input and the finished chunks; returns the rows written.

    ``kept_only`` (filter) writes only the rows kept; the others are still answered and counted.
    A row that could not be read is not written: it is in the errors file.
    """
    chunk_rows = progress.chunk_rows
    ranks: dict[int, int] = {}
    if job.tool == "rerank":
        groups: dict[str, list[tuple[float, int]]] = defaultdict(list)
        for outcome in progress.outcomes():
            for offset, answer in outcome.answers.items():
                groups[answer["query"]].append((-answer["relevance_score"], outcome.chunk * chunk_rows + offset))
        for members in groups.values():
            members.sort()
            ranks.update({row: rank for rank, (_, row) in enumerate(members, start=1)})
    columns, schema = output_layout(input_path, in_fmt, read_rows(input_path, in_fmt), out_fmt)
    output_temporary = progress.temporary("output" + output_path.suffix)
    errors_temporary = progress.temporary("errors.jsonl")
    writer = RowWriter(output_temporary, out_fmt, answer_columns=job.columns, columns=columns, schema=schema)
    failed = written = 0
    outcomes = progress.outcomes()
    outcome: ChunkOutcome | None = None
    errors_by_offset: dict[int, list[Any]] = {}
    with open(errors_temporary, "wb") as errors_file:
        for row in read_rows(input_path, in_fmt):
            chunk, offset = divmod(row.index, chunk_rows)
            while outcome is None or outcome.chunk < chunk:
                outcome = next(outcomes)
                errors_by_offset = {error[0]: error for error in outcome.errors}
            if outcome.chunk != chunk:
                raise RuntimeError(f"chunk {chunk} is missing from the batch's progress")
            answers = outcome.answers.get(offset)
            if answers is not None and job.tool == "rerank":
                answers = {**answers, "rank": ranks[row.index]}
            if row.value is not None and not (kept_only and not (answers or {}).get("kept")):
                writer.write(row.value, answers)
                written += 1
            error = errors_by_offset.get(offset)
            if error is not None:
                failed += 1
                record = {
                    "row": row.index,
                    "error": error[1],
                    "message": error[2],
                    "input": row.value if row.value is not None else row.raw,
                }
                line = json.dumps(record, ensure_ascii=True, default=str)
                errors_file.write(line.encode("ascii") + b"\n")
    writer.close()
    os.replace(output_temporary, output_path)
    if failed:
        os.replace(errors_temporary, errors_path)
    elif errors_path.exists():
        errors_path.unlink()  # a stale file from an earlier batch would blame rows that did not fail
    return written


def run_batch(
    job: Job,
    input: Any,
    output: Any,
    *,
    engine: str = "local",
    workers: int | None = None,
    address: str | None = None,
    batch_size: int | None = None,
    errors: Any = None,
    fail_fast: bool = False,
    overwrite: bool = False,
    kept_only: bool = False,
    on_progress: Callable[[BatchProgress], None] | None = None,
) -> BatchResult:
    clock = time.perf_counter()
    if kept_only and job.tool != "filter":
        raise InvalidInputError("kept_only", "false unless the tool is filter", detail=f"{job.tool} keeps every row")
    if engine not in ENGINES:
        raise InvalidInputError("engine", f"one of {', '.join(ENGINES)}", got=engine)
    if address is not None and engine != "ray":
        raise InvalidInputError(
            "address", "an address only with engine ray", detail="the local engine runs on this machine"
        )
    if workers is not None:
        workers = check_count(workers, "workers", lowest=0 if engine == "local" else 1, highest=MAX_WORKERS)
    if batch_size is not None:
        batch_size = check_count(batch_size, "batch_size")
    input_path, in_fmt, output_path, out_fmt, errors_path = _check_paths(input, output, errors)
    check_readable(input_path, in_fmt, "input")
    _check_columns(job, input_columns(input_path, in_fmt), input_path)
    # An unknown model, a missing key or extra fails here, before any work and before the progress folder;
    # so does a calibration fitted for another model (in a worker it would fail every row instead).
    decider = Decider.resolve(job.task.model, base_url=job.task.base_url)
    check_first_model(job.calibration, decider)
    limits = decider.limits
    if engine == "ray":
        from .ray_engine import check_ray

        check_ray()
    default_rows = min(limits.max_questions or DEFAULT_CHUNK_ROWS, 256)
    total = count_rows(input_path, in_fmt)
    # A target's cut-off is for every row of the input, so it is chosen here, once; the chunks share it.
    job = job.for_rows(total)
    promise = job.task.cutoff
    progress = Progress.open(
        output_path,
        identity=job.identity(),
        input_path=input_path,
        chunk_rows=batch_size,
        default_chunk_rows=default_rows,
        overwrite=overwrite,
    )
    chunk_rows = progress.chunk_rows
    resumed = progress.rows_done
    inputs = {
        "tool": job.tool,
        "input": os.fspath(input_path),
        "output": os.fspath(output_path),
        "rows": total,
        "chunk_rows": chunk_rows,
        "engine": engine,
        "job": job.summary(),
    }
    if promise is not None:
        inputs["promise"] = promise.to_dict()
    record = BatchRecord(progress.run_id, started=progress.started, model=job.task.model, inputs=inputs)
    environment = {name: value for name, value in os.environ.items() if name.startswith("DECIRANK_")}
    job = job.with_run(progress.run_id if record.enabled else None, environment)

    def totals() -> tuple[Usage, str | None]:
        usage = Usage()
        for used in progress.usage.values():
            usage = usage + used
        return usage, ", ".join(sorted(progress.usage)) or None

    def outputs(**extra: Any) -> dict[str, Any]:
        return {
            "rows": total,
            "done": progress.rows_done,
            "answered": progress.answered,
            "failed": progress.failed,
            "resumed": resumed,
            "models": {model: used.to_dict() for model, used in progress.usage.items()},
            "first_errors": list(progress.first_errors),
            **({"promise": promise.to_dict()} if promise is not None else {}),
            **extra,
        }

    def start_engine() -> Any:
        if engine == "ray":
            from .ray_engine import RayEngine

            return RayEngine(job.task, workers, address=address, chunk_rows=chunk_rows)
        if workers == 0:
            return InlineEngine(job.task)
        return ProcessEngine(job.task, workers or len(usable_cores()))

    runner: Any = None
    try:
        if on_progress is not None:
            on_progress(BatchProgress(total, progress.rows_done, progress.failed, resumed))
        chunks = _prepare(job, input_path, in_fmt, chunk_rows, dict(progress.done), fail_fast)
        first = next(chunks, None)
        # A batch whose chunks are all done (stopped while its engine shut down) only writes its
        # output: no worker is started, no Ray brought up for nothing.
        runner = start_engine() if first is not None else None
        answered_chunks = runner.run(itertools.chain([first], chunks), fail_fast) if runner is not None else ()
        for prepared, outcome in answered_chunks:
            if outcome.stop is not None:
                raise BatchStopped(
                    _stop_message(prepared, outcome.stop, progress.rows_done), error_type=outcome.stop[0]
                )
            outcome.errors = sorted(prepared.problems + outcome.errors, key=lambda error: error[0])
            if fail_fast and outcome.errors:
                offset, error_type, message = outcome.errors[0]
                raise BatchStopped(
                    f"row {prepared.start + offset} failed ({error_type}: {message}); stopped by fail-fast"
                )
            progress.append(outcome)
            if on_progress is not None:
                on_progress(BatchProgress(total, progress.rows_done, progress.failed, resumed))
            if record.due():  # the run's outputs are built only when they are written
                record.tick(outputs(), *totals())
        written = _assemble(job, progress, input_path, in_fmt, output_path, out_fmt, errors_path, kept_only)
    except BaseException as error:
        usage, models = totals()
        record.close(outputs(stopped=str(error)), usage, models, error)
        if progress.created and not progress.done:
            progress.remove()  # nothing was done: a rerun starts afresh, and no folder is left behind
        else:
            progress.close()
        raise
    seconds = time.perf_counter() - clock
    usage, models = totals()
    result = BatchResult(
        tool=job.tool,
        input=os.fspath(input_path),
        output=os.fspath(output_path),
        errors=os.fspath(errors_path) if progress.failed else None,
        rows=total,
        written=written,
        answered=progress.answered,
        failed=progress.failed,
        resumed=resumed,
        seconds=seconds,
        run_id=progress.run_id if record.enabled else None,
        engine=runner.name if runner is not None else engine,
        workers=runner.workers if runner is not None else 0,
        chunk_rows=chunk_rows,
        usage=usage,
        models=dict(progress.usage),
        calibration=None if job.calibration is None else job.calibration.name,
        promise=promise,
    )
    record.close(
        outputs(
            output=result.output,
            errors=result.errors,
            engine=result.engine,
            workers=result.workers,
            rows_per_second=round(result.rows_per_second, 1),
        ),
        usage,
        models,
        None,
    )
    progress.remove()
    return result

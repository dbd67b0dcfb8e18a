"""``decirank batch``: a tool on every row of a JSON Lines, CSV or Parquet file, resumable, on one machine or Ray."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperCommand

from ..errors import InvalidInputError
from ._app import app
from ._options import (
    CalibrationOption,
    ConfidenceOption,
    FalseOption,
    NoneOption,
    OptionsOption,
    StateOption,
    TargetPrecisionOption,
    TargetRecallOption,
    TrueOption,
    for_tool,
)
from ._output import (
    as_command_line_error,
    check_base_url,
    command_line_names,
    console,
    cost_text,
    error_console,
    json_or_text,
    options_value,
    print_json,
)

__all__ = ["batch"]

#: The exit status of a command stopped by Ctrl-C (128 + SIGINT), as shells report it.
EXIT_INTERRUPTED = 130

# The fields that batch passes on to the library under another name than its own parameter's.
_ALIASES = {"output": "out"}

# filter's own options, their help naming it, so that ``decirank batch score --help`` leaves them out.
FilterTargetRecallOption = for_tool("filter", TargetRecallOption)
FilterTargetPrecisionOption = for_tool("filter", TargetPrecisionOption)
FilterConfidenceOption = for_tool("filter", ConfidenceOption)


class Tool(str, Enum):
    filter = "filter"
    classify = "classify"
    rerank = "rerank"
    score = "score"


class Engine(str, Enum):
    local = "local"
    ray = "ray"


def _interrupted(out: str, progress: Any) -> str:
    """What Ctrl-C left: how far the batch got, and the command that resumes it."""
    from ..batching.progress import progress_folder

    folder = progress_folder(Path(out))
    if not folder.is_dir():
        return "interrupted before any rows were done; nothing was kept"
    done = f"{progress.done:,} of {progress.total:,} rows done" if progress is not None else "some rows done"
    command = shlex.join(["decirank", *sys.argv[1:]])
    return f"interrupted: {done}, kept in {os.fspath(folder)}; to resume, run the same command again:\n  {command}"


@contextmanager
def _progress_bar(label: str, seen: dict[str, Any]) -> Iterator[Any]:
    """Rows done of all, rows per second and the time left, on stderr when it is a terminal.

    ``seen["progress"]`` keeps the last progress reported, for what an interruption says.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeRemainingColumn
    from rich.text import Text

    class RateColumn(ProgressColumn):
        def render(self, task: Any) -> Text:
            speed = task.finished_speed or task.speed
            return Text(f"{speed:,.0f} rows/s" if speed else "… rows/s", style="cyan")

    bar = Progress(
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("rows"),
        RateColumn(),
        TimeRemainingColumn(),
        console=error_console,
        transient=True,
        disable=not error_console.is_terminal,
    )
    state: dict[str, Any] = {"task": None}

    def update(progress: Any) -> None:
        seen["progress"] = progress
        if state["task"] is None:
            # Rows done before (a resumed batch) start the bar without counting toward the speed.
            state["task"] = bar.add_task(label, total=progress.total, completed=progress.done)
        else:
            bar.update(state["task"], completed=progress.done)

    with bar:
        yield update


_HELP_TOOL = "decirank.batch.help_tool"


def _for_tools(parameter: Any) -> set[str] | None:
    """The tools (or engine) an option's help names before its colon ("filter, score: ..."), None for all."""
    prefix, colon, _ = (getattr(parameter, "help", None) or "").partition(":")
    names = {name.strip() for name in prefix.split(",")}
    return names if colon and names <= {*(tool.value for tool in Tool), "ray"} else None


class _BatchCommand(TyperCommand):
    """``decirank batch TOOL --help`` lists the options TOOL takes, not every tool's."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        # --help is eager: it is answered while parsing, before TOOL is; so TOOL is read from the raw words.
        ctx.meta[_HELP_TOOL] = args[0] if args and args[0] in {tool.value for tool in Tool} else None
        return super().parse_args(ctx, args)

    def format_help_text(self, ctx: Any, formatter: Any) -> None:
        tool = ctx.meta.get(_HELP_TOOL)
        if tool is None:
            super().format_help_text(ctx, formatter)
            return
        formatter.write_paragraph()
        with formatter.indentation():
            formatter.write_text(
                f"Run {tool} on every row of a file; killed, it resumes when run again with the same --out. "
                f"The options {tool} takes; decirank batch --help lists every tool's."
            )

    def format_options(self, ctx: Any, formatter: Any) -> None:
        tool = ctx.meta.get(_HELP_TOOL)
        every = self.params
        if tool is not None:
            self.params = [p for p in every if (_for_tools(p) or {tool, "ray"}) & {tool, "ray"}]
        try:
            super().format_options(ctx, formatter)
        finally:
            self.params = every


@app.command(cls=_BatchCommand)
def batch(
    tool: Annotated[
        Tool, typer.Argument(metavar="TOOL", help="filter, classify, rerank or score.", show_default=False)
    ],
    input: Annotated[str, typer.Argument(metavar="INPUT", help="A .jsonl, .csv or .parquet file.")],
    out: Annotated[str, typer.Option("--out", "-o", help="The output: .jsonl, .csv or .parquet (by extension).")],
    question: Annotated[
        str | None, typer.Option("--question", "-q", help="filter, classify, score: the question asked of each row.")
    ] = None,
    state: StateOption = None,
    options: OptionsOption = None,
    none: NoneOption = None,
    true: TrueOption = None,
    false: FalseOption = None,
    examples: Annotated[
        str | None,
        typer.Option(
            "--examples",
            metavar="FILE|NAME",
            help="filter, classify, score: labelled examples, a JSON or JSON Lines file or a stored set's name.",
        ),
    ] = None,
    min_confidence: Annotated[
        float | None, typer.Option("--min-confidence", help="filter: keep rows at least this likely (0.5).")
    ] = None,
    query: Annotated[str | None, typer.Option("--query", help="rerank: one query for every row.")] = None,
    query_field: Annotated[
        str | None, typer.Option("--query-field", help="rerank: the column holding each row's query.")
    ] = None,
    calibration: CalibrationOption = None,
    target_recall: FilterTargetRecallOption = None,
    target_precision: FilterTargetPrecisionOption = None,
    confidence: FilterConfidenceOption = None,
    text: Annotated[str | None, typer.Option("--text", help="The column each row shows (else the whole row).")] = None,
    describe: Annotated[
        str | None, typer.Option("--describe", "-d", help="A dot path into each row to show, e.g. meta.title.")
    ] = None,
    model: Annotated[str, typer.Option("--model", "-m", help="A role (decider) or a provider:model name.")] = "decider",
    base_url: Annotated[
        str | None, typer.Option("--base-url", callback=check_base_url, help="Base URL for an HTTP backend.")
    ] = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Time budget in seconds of each chunk's model calls.")
    ] = None,
    engine: Annotated[
        Engine, typer.Option("--engine", help="local (worker processes) or ray (Ray Data).")
    ] = Engine.local,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers", "-w", help="Worker processes (default: one per core; 0: in this process) or Ray actors."
        ),
    ] = None,
    address: Annotated[
        str | None, typer.Option("--address", help="ray: the cluster's address (default: start a local Ray).")
    ] = None,
    batch_size: Annotated[
        int | None, typer.Option("--batch-size", help="Rows per chunk (default: the model's questions per call).")
    ] = None,
    errors: Annotated[
        str | None, typer.Option("--errors", help="Where failed rows go (default: OUTPUT's name + .errors.jsonl).")
    ] = None,
    fail_fast: Annotated[bool, typer.Option("--fail-fast", help="Stop at the first row that fails.")] = False,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace an existing output, or start an unfinished batch over.")
    ] = False,
    kept_only: Annotated[bool, typer.Option("--kept-only", help="filter: write only the rows kept.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Run a tool on every row of a file; killed, it resumes when run again with the same --out."""
    from ..batching import batch as run
    from .examples import examples_value
    from .tools import print_promise

    seen: dict[str, Any] = {"progress": None}
    try:
        arguments = {
            "question": question,
            "state": None if state is None else json_or_text(state, "--state"),
            "options": options_value(options),
            "none": none,
            "true": true,
            "false": false,
            "examples": examples_value(examples),
            "min_confidence": min_confidence,
            "query": query,
            "query_field": query_field,
            "calibration": calibration,
            "target_recall": target_recall,
            "target_precision": target_precision,
            "confidence": confidence,
            "text": text,
            "describe": describe,
            "model": model,
            "base_url": base_url,
            "timeout": timeout,
            "engine": engine.value,
            "workers": workers,
            "address": address,
            "batch_size": batch_size,
            "errors": errors,
            "fail_fast": fail_fast,
            "overwrite": overwrite,
            "kept_only": kept_only,
        }
        with _progress_bar(tool.value, seen) as update:
            result = run(tool.value, input, out, on_progress=update, **arguments)
    except InvalidInputError as error:
        raise as_command_line_error(error, command_line_names(_ALIASES)) from None
    except KeyboardInterrupt:
        error_console.print(_interrupted(out, seen["progress"]), highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    data = result.to_dict()
    if as_json:
        print_json(data)
        return
    failed = f", {result.failed} failed (see {result.errors})" if result.failed else ""
    resumed = f", {result.resumed} done before" if result.resumed else ""
    written = result.rows if result.written is None else result.written
    read = f" of {result.rows:,} read" if written != result.rows else ""
    console.print(
        f"{result.tool}: {written:,} rows written to {result.output}{read}: {result.answered:,} answered{failed}"
        f"{resumed}",
        highlight=False,
    )
    if data["promise"] is not None:
        print_promise(data["promise"])
    if result.calibration is not None:
        console.print(f"probabilities calibrated by {result.calibration}", highlight=False)
    cost = cost_text(result.usage.cost, result.usage.calls, model=", ".join(result.models))
    run_id = f" · run {result.run_id[:12]}" if result.run_id else ""
    console.print(
        f"{result.rows_per_second:,.0f} rows/s · {result.workers} {result.engine} worker(s) · "
        f"models {', '.join(result.models) or 'none'} · {result.usage.calls} call(s) · cost {cost}{run_id}",
        style="dim",
        highlight=False,
    )
    if Path(result.input).suffix.lower() == ".csv" and Path(result.output).suffix.lower() == ".parquet":
        # The CSV reader infers no types: a column of numbers is read, and so written, as text.
        console.print(
            "note: a CSV's values are text, so its columns are strings in the Parquet output "
            "(cast them there, or give JSON Lines or Parquet input to keep numbers as numbers)",
            style="dim",
            highlight=False,
        )

"""``decirank runs``: list, show and sum up the run log; switch it off and on, prune it, say how it stands."""

from __future__ import annotations

import re
import time
from datetime import datetime
from typing import Annotated, Any

import typer
from rich.text import Text

from ..errors import ConfigError
from ..stores.runlog import (
    RUN_STATUSES,
    RunLog,
    configured_location,
    configured_texts,
    current_runlog,
    off_marker,
    retention_settings,
)
from ._app import app
from ._output import check_text, console, new_table, print_json, print_table, short_text

runs_app = typer.Typer(
    help="List, show and sum up recorded runs; switch the run log off and on, prune it.", no_args_is_help=True
)
app.add_typer(runs_app, name="runs")

JsonOption = Annotated[bool, typer.Option("--json", help="Print as JSON.")]


def _runlog() -> RunLog:
    runlog = current_runlog()
    if runlog is None:
        raise ConfigError(
            "the run log is off (DECIRANK_RUNLOG=off, decirank runs off, or [runlog] enabled = false); "
            "decirank runs on, or unset DECIRANK_RUNLOG, to record runs"
        )
    return runlog


#: The largest --limit: SQLite's (and PostgreSQL's bigint) largest integer.
MAX_LIMIT = 2**63 - 1

#: How much of a run id a table shows; ``runs show`` takes any unique prefix.
SHORT_ID = 12


def _when(timestamp: str | None, style: str = "%Y-%m-%d %H:%M:%S") -> str:
    if not timestamp:
        return "—"
    return datetime.fromisoformat(timestamp).astimezone().strftime(style)


def _milliseconds(value: float | None) -> str:
    return "—" if value is None else f"{value:,.1f} ms"


def _cost(row: dict[str, Any]) -> str:
    if row.get("cost") is None:
        return "—"
    return f"{row['cost']:.6f} {row.get('currency') or ''}".strip()


def _short_cost(row: dict[str, Any]) -> str:
    """The cost in as few characters as say it: ``$0``, ``$0.00123``, ``0.5 EUR``."""
    if row.get("cost") is None:
        return "—"
    amount = f"{row['cost']:.3g}"
    currency = row.get("currency") or ""
    return f"${amount}" if currency in ("USD", "") else f"{amount} {currency}"


def _short_milliseconds(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:,.1f} ms" if value < 10 else f"{value:,.0f} ms"


def _tokens(row: dict[str, Any]) -> str:
    """Input / output tokens."""
    return f"{row.get('input_tokens') or 0}/{row.get('output_tokens') or 0}"


@runs_app.command("list")
def list_runs(
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, max=MAX_LIMIT, help="Show at most this many runs.")
    ] = 20,
    tool: Annotated[
        str | None, typer.Option("--tool", "-t", help="Only runs of this tool (rank, rerank, plan, ...).")
    ] = None,
    status: Annotated[
        str | None, typer.Option("--status", "-s", help=f"Only runs with this status ({', '.join(RUN_STATUSES)}).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """List tool runs, newest first."""
    check_text(tool, "--tool", "UTF-8 text")
    check_text(status, "--status", "UTF-8 text")
    runs = _runlog().runs(limit=limit, tool=tool, status=status)
    if as_json:
        print_json(runs)
        return
    # The model that answered, else the role asked (a run that failed before any model answered).
    table = new_table("id", "started", "tool", "model", "status", "duration", "tokens", "cost", wrap=("tool", "model"))
    for run in runs:
        table.add_row(
            run["id"][:SHORT_ID],
            _when(run["started_at"], "%m-%d %H:%M"),
            run["tool"],
            run["model"] or run["role"] or "—",
            run["status"],
            _short_milliseconds(run["duration_ms"]),
            _tokens(run),
            _short_cost(run),
        )
    print_table(table)


@runs_app.command("show")
def show_run(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="A run's id, or enough of its start to be unique.")],
    as_json: JsonOption = False,
) -> None:
    """Show one run: its inputs, outputs, error, and every model call with its failover attempts."""
    run = _runlog().run(check_text(run_id, "run id", "UTF-8 text"))
    if as_json:
        print_json(run)
        return
    console.print(Text.assemble((run["tool"], "bold"), f" run {run['id']}"))
    details = [
        ("status", run["status"]),
        ("asked", run["role"] or "—"),
        ("answered by", run["model"] or "—"),
        ("started", _when(run["started_at"])),
        ("duration", _milliseconds(run["duration_ms"])),
        ("usage", f"{run['calls'] or 0} call(s), {_tokens(run)} tokens in/out, cost {_cost(run)}"),
    ]
    if run["parent_id"]:
        details.append(("part of", run["parent_id"]))
    if run.get("texts") == "hashes":
        details.append(("texts", "kept as SHA-256 and length only (DECIRANK_RUNLOG_TEXTS=hashes)"))
    if run["error_type"]:
        details.append(("error", f"{run['error_type']}: {run['error']}"))
    if run["inputs"] is not None:
        details.append(("inputs", short_text(run["inputs"], 200)))
    if run["outputs"] is not None:
        details.append(("outputs", short_text(run["outputs"], 200)))
    for label, value in details:
        console.print(f"  {label:<12} {value}", highlight=False)
    if not run["children"]:
        return
    table = new_table(
        "call", "kind", "model", "status", "duration", "tokens", "cost", "error", wrap=("kind", "model", "error")
    )
    for child in run["children"]:
        if child["kind"] == "model":
            step = f"{child['decision']}.{child['attempt']}"
            kind = "cache hit" if child["cached"] else "model call"
        else:
            step, kind = child["id"][:SHORT_ID], f"{child['tool']} run"
        error = f"{child['error_type']}: {child['error']}" if child["error_type"] else ""
        table.add_row(
            step,
            kind,
            child["model"] or "—",
            child["status"],
            _short_milliseconds(child["duration_ms"]),
            _tokens(child),
            _short_cost(child),
            short_text(error, 120) if error else "",
        )
    print_table(table)


@runs_app.command("stats")
def run_stats(as_json: JsonOption = False) -> None:
    """Count runs; per model: calls, failures, cache hits, tokens, cost, p50/p95 latency."""
    stats = _runlog().stats()
    if as_json:
        print_json(stats)
        return
    by_tool = ", ".join(f"{row['tool']} {row['status']}: {row['runs']}" for row in stats["by_tool"])
    console.print(f"{stats['runs']} run(s)" + (f" ({by_tool})" if by_tool else ""), highlight=False)
    table = new_table("model", "calls", "failed", "cache hits", "tokens", "cost", "p50", "p95", wrap=("model",))
    for row in stats["models"]:
        table.add_row(
            row["model"],
            str(row["calls"]),
            str(row["failed"]),
            str(row["cache_hits"]),
            _tokens(row),
            _short_cost(row),
            _short_milliseconds(row["p50_ms"]),
            _short_milliseconds(row["p95_ms"]),
        )
    print_table(table)


@runs_app.command("path")
def run_log_path() -> None:
    """Print where the run log is (a file or a database URL), or 'off'."""
    typer.echo(configured_location() or "off")


@runs_app.command("off")
def runs_off() -> None:
    """Stop recording runs, for every decirank of this user (DECIRANK_RUNLOG, when set, still wins)."""
    marker = off_marker()
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()
    typer.echo("the run log is off: no run is recorded until decirank runs on")


@runs_app.command("on")
def runs_on() -> None:
    """Record runs again after decirank runs off."""
    off_marker().unlink(missing_ok=True)
    location = configured_location()
    typer.echo(f"the run log is on: {location}" if location else "the run log is still off (DECIRANK_RUNLOG or [runlog] enabled)")


def _megabytes(value: float | None) -> str:
    return "—" if value is None else f"{value / 1024 / 1024:,.1f} MB"


@runs_app.command("status")
def runs_status(as_json: JsonOption = False) -> None:
    """Where the run log is, its size, rows and oldest run, what it keeps of texts, and its retention."""
    location = configured_location()
    if location is None:
        keep_days, max_mb = retention_settings()
        status: dict[str, Any] = {"location": None, "on": False, "texts": configured_texts()}
        status.update({"keep_days": keep_days, "max_mb": max_mb})
    else:
        status = {"on": True, **_runlog().status()}
    if as_json:
        print_json(status)
        return
    if not status["on"]:
        console.print("run log    off (decirank runs on records runs again)", highlight=False)
        return
    retention = []
    if status["keep_days"] is not None:
        retention.append(f"runs older than {status['keep_days']:g} days")
    if status["max_mb"] is not None:
        retention.append(f"the oldest past {status['max_mb']:g} MB")
    lines = [
        ("run log", status["location"]),
        ("size", _megabytes(status["bytes"]) + (f" (files {_megabytes(status['file_bytes'])})" if status["file_bytes"] else "")),
        ("rows", f"{status['runs']} run(s), {status['model_calls']} model call(s), {status['stored_texts']} stored text(s)"),
        ("oldest run", _when(status["oldest"])),
        ("texts", "kept in full" if status["texts"] == "full" else "kept as SHA-256 and length only"),
        ("retention", "removes " + " and ".join(retention) if retention else "none: runs are kept until pruned"),
    ]
    for label, value in lines:
        console.print(f"{label:<11} {value}", highlight=False)


_AGE = re.compile(r"(\d+(?:\.\d+)?)\s*(d|h|m|s|w)?")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}


def _age_seconds(value: str | None) -> float | None:
    """``30d``, ``12h``, ``90m``, ``2w`` or a bare number of days, in seconds."""
    if value is None:
        return None
    match = _AGE.fullmatch(value.strip())
    if match is None or float(match[1]) <= 0:
        raise typer.BadParameter(f"{value!r} is not an age such as 30d, 12h or 90m", param_hint="--older-than")
    return float(match[1]) * _UNIT_SECONDS[match[2] or "d"]


@runs_app.command("prune")
def runs_prune(
    older_than: Annotated[
        str | None, typer.Option("--older-than", help="Remove runs started longer ago than this: 30d, 12h, 90m.")
    ] = None,
    max_mb: Annotated[
        float | None, typer.Option("--max-mb", min=0, help="Remove the oldest runs until the log takes at most this.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Remove finished runs, each with its model calls; a running run is never removed."""
    age = _age_seconds(older_than)
    if age is None and max_mb is None:
        raise typer.BadParameter("give --older-than, --max-mb or both", param_hint="--older-than")
    runlog = _runlog()
    before = runlog.status()
    removed = runlog.prune(
        before=time.time() - age if age is not None else None,
        max_bytes=int(max_mb * 1024 * 1024) if max_mb is not None else None,
    )
    runlog.compact()
    after = runlog.status()
    result = {**removed, "bytes_before": before["bytes"], "bytes_after": after["bytes"], "runs_left": after["runs"]}
    if as_json:
        print_json(result)
        return
    console.print(
        f"removed {removed['runs']} row(s) and {removed['texts']} stored text(s); "
        f"{after['runs']} run(s) left, {_megabytes(after['bytes'])} (was {_megabytes(before['bytes'])})",
        highlight=False,
    )

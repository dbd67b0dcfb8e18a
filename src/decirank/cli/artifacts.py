"""``decirank artifacts`` (the artifact store) and ``decirank score-list`` (ranking what it holds)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.text import Text

from ..errors import InvalidInputError
from ..stores.artifacts import ArtifactStore, check_ref
from ..tools._evaluators import DEFAULT_EXEC_TIMEOUT
from ..tools.score_list import DEFAULT_MAX_CONCURRENCY, Verdict, parse_refs, register_validation_type, score_list
from ._app import app
from ._output import (
    check_base_url,
    console,
    error_console,
    new_table,
    parse_json,
    print_json,
    print_table,
    progress_bar,
    read_json_list,
    read_text,
    short_text,
)

artifacts_app = typer.Typer(
    help="The artifact store: text under refs run_id/agent_id, and the stamps scoring leaves on them.",
    no_args_is_help=True,
)
app.add_typer(artifacts_app, name="artifacts")
types_app = typer.Typer(help="Types for validate:<type> that a decision model judges.", no_args_is_help=True)
artifacts_app.add_typer(types_app, name="types")

RefArgument = Annotated[str, typer.Argument(metavar="REF", help="A ref: run_id/agent_id.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print as JSON.")]

_VERDICT_STYLES = {Verdict.VALID: "green", Verdict.PARTIAL: "yellow", Verdict.INVALID: "red", Verdict.UNKNOWN: "dim"}


def _missing(ref: str) -> InvalidInputError:
    detail = f"no artifact {ref!r}; decirank artifacts ls lists them"
    return InvalidInputError("ref", "a stored artifact", detail=detail)


@artifacts_app.command()
def put(
    ref: RefArgument,
    source: Annotated[str, typer.Argument(metavar="FILE|-", help="The artifact's text: a file, or - for stdin.")],
) -> None:
    """Store a file's text under a ref, replacing what was there."""
    check_ref(ref)
    text = read_text(source, "file", "a text file, or - for standard input")
    store = ArtifactStore()
    store.put(ref, text)
    error_console.print(f"stored {ref} ({len(text)} characters) in {store.path}", highlight=False)


@artifacts_app.command()
def get(ref: RefArgument) -> None:
    """Print the text stored under a ref, exactly as stored."""
    text = ArtifactStore().get(ref)
    if text is None:
        raise _missing(ref)
    sys.stdout.write(text)


@artifacts_app.command("ls")
def list_artifacts(
    prefix: Annotated[str, typer.Argument(metavar="PREFIX", help="Only refs starting with this, e.g. a run id.")] = "",
    as_json: JsonOption = False,
) -> None:
    """List stored artifacts, by ref."""
    listed = ArtifactStore().list(prefix)
    if as_json:
        print_json([info.to_dict() for info in listed])
        return
    table = new_table("ref", "characters", "updated")
    for info in listed:
        table.add_row(info.ref, str(info.size), info.updated_at.strftime("%Y-%m-%d %H:%M:%S"))
    print_table(table)
    console.print(f"{len(listed)} artifact(s)", style="dim")


@artifacts_app.command("rm")
def remove(ref: RefArgument) -> None:
    """Remove an artifact and its stamps."""
    if not ArtifactStore().delete(ref):
        raise _missing(ref)
    error_console.print(f"removed {ref}", highlight=False)


@artifacts_app.command()
def stamps(ref: RefArgument, as_json: JsonOption = False) -> None:
    """Show what each scoring run said about a ref, oldest first."""
    found = ArtifactStore().stamps(ref)
    if as_json:
        print_json([stamp.to_dict() for stamp in found])
        return
    table = new_table(
        "when", "run", "evaluator", "score", "verdict", "rank", "pruned", "reason", wrap=("evaluator", "reason")
    )
    for stamp in found:
        table.add_row(
            stamp.created_at.strftime("%Y-%m-%d %H:%M") if stamp.created_at else "",
            stamp.run_id[:12],
            short_text(stamp.evaluator, 40),
            "—" if stamp.score is None else f"{stamp.score:.3f}",
            stamp.verdict,
            str(stamp.beam_rank),
            "yes" if stamp.pruned else "no",
            short_text(stamp.reason, 80),
        )
    print_table(table)


@types_app.command("add")
def add_type(
    name: Annotated[str, typer.Argument(metavar="NAME", help="The type's name, used as validate:NAME.")],
    description: Annotated[str, typer.Argument(metavar="DESCRIPTION", help="What a valid artifact of this type is.")],
) -> None:
    """Register a type (or change its description) for validate:NAME."""
    register_validation_type(name, description)
    error_console.print(f"registered validate:{name}", highlight=False)


@types_app.command("ls")
def list_types(as_json: JsonOption = False) -> None:
    """List the registered types."""
    registered = ArtifactStore().types()
    if as_json:
        print_json([entry.to_dict() for entry in registered])
        return
    table = new_table("type", "description")
    for entry in registered:
        table.add_row(entry.name, entry.description)
    print_table(table)


@types_app.command("rm")
def remove_type(name: Annotated[str, typer.Argument(metavar="NAME", help="The type's name.")]) -> None:
    """Unregister a type."""
    if not ArtifactStore().delete_type(name):
        detail = f"no type {name!r}; decirank artifacts types ls lists them"
        raise InvalidInputError("name", "a registered type", detail=detail)
    error_console.print(f"removed validate:{name}", highlight=False)


def _refs_value(value: str) -> object:
    """An inline JSON array is parsed here, with the same protections as a file; ``-`` and file names are read."""
    if value.lstrip().startswith("["):
        return parse_json(value, "--refs", "a JSON array of refs")
    return read_json_list(value, "refs")


@app.command("score-list")
def score_list_command(
    refs: Annotated[
        str,
        typer.Option(
            "--refs",
            help='The refs: a JSON array (["run/agent", ...] or [{"ref": ...}, ...]), '
            "a JSON or JSON Lines file, or - for stdin.",
        ),
    ],
    evaluator: Annotated[
        str, typer.Option("--evaluator", "-e", help="exec:<command>, score:<criterion> or validate:<type>.")
    ],
    top_k: Annotated[int, typer.Option("--top-k", "-k", help="Keep the best k; 0 ranks only.")] = 0,
    max_concurrency: Annotated[
        int, typer.Option("--max-concurrency", help="Evaluations running at once.")
    ] = DEFAULT_MAX_CONCURRENCY,
    model: Annotated[
        str, typer.Option("--model", "-m", help="A role (decider) or a provider:model name, for score: and validate:.")
    ] = "decider",
    exec_timeout: Annotated[
        float, typer.Option("--exec-timeout", help="Seconds each exec: command may run.")
    ] = DEFAULT_EXEC_TIMEOUT,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Time budget in seconds for all model calls together.")
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url", callback=check_base_url, help="Base URL for an HTTP backend, e.g. http://127.0.0.1:8000."
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Score stored artifacts with an evaluator, rank them, and keep the top k."""
    ref_list = parse_refs(_refs_value(refs))
    with progress_bar(evaluator, len(ref_list)) as advance:
        result = score_list(
            ref_list,
            evaluator,
            top_k=top_k,
            max_concurrency=max_concurrency,
            model=model,
            exec_timeout=exec_timeout,
            timeout=timeout,
            base_url=base_url,
            on_progress=advance,
        )
    if as_json:
        print_json(result.to_dict())
        return
    table = new_table("rank", "ref", "score", "verdict", "pruned", "issues")
    for entry in result.ranked:
        table.add_row(
            str(entry.rank),
            entry.ref,
            "—" if entry.score is None else f"{entry.score:.3f}",
            Text(entry.verdict.value, style=_VERDICT_STYLES[entry.verdict]),
            "yes" if entry.pruned else "no",
            short_text("; ".join(entry.issues), 100) if entry.issues else "",
        )
    print_table(table)
    winners = ", ".join(result.winners) or "none"
    console.print(f"winners: {winners}", highlight=False)
    details = f"run {result.run_id} · {result.total} ref(s) · top_k {result.top_k or 'all (rank only)'}"
    if result.model:
        details += f" · model {result.model}"
    console.print(details, style="dim", highlight=False)

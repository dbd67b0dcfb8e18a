"""``decirank rank``, ``rerank``, ``filter``, ``classify`` and ``score``: the tools on the command line."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from ..stores.runlog import current_runlog
from ..tools.classify import classify as classify_texts
from ..tools.filter import DEFAULT_MIN_CONFIDENCE
from ..tools.filter import filter as filter_items
from ..tools.rank import rank as rank_items
from ..tools.rerank import rerank as rerank_documents
from ..tools.score import DEFAULT_MAX_CONCURRENCY as DEFAULT_SCORE_CONCURRENCY
from ..tools.score import score as score_texts
from ._app import app
from ._options import CalibrationOption, ConfidenceOption, TargetPrecisionOption, TargetRecallOption
from ._output import (
    check_base_url,
    console,
    cost_text,
    error_console,
    json_or_text,
    names_options_in_errors,
    new_table,
    options_value,
    print_json,
    print_table,
    probability_bar,
    read_json_list,
    short_text,
    shown_item,
)

#: The exit status of a command stopped by Ctrl-C (128 + SIGINT), as batch's.
EXIT_INTERRUPTED = 130


def interrupted_message(tool: str, since: datetime) -> str:
    """What a Ctrl-C stopped, and what the run log recorded of it (the run a tool call started after ``since``)."""
    runlog = current_runlog()
    if runlog is None:
        return f"interrupted: {tool} was cancelled; the run log is off, so nothing was recorded"
    newest = runlog.runs(limit=1, tool=tool)
    if not newest or datetime.fromisoformat(newest[0]["started_at"]) < since:
        return f"interrupted: {tool} was cancelled before it asked a model; the run log recorded nothing"
    run = runlog.run(newest[0]["id"])
    answered = sum(child["status"] == "success" for child in run["children"])
    short = run["id"][:12]
    return (
        f"interrupted: {tool} was cancelled after {answered} of its model calls had answered; the run log recorded "
        f"run {short} as {run['status']} (decirank runs show {short})"
    )


def tells_when_interrupted(tool: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A tool command that, on Ctrl-C, says what was interrupted and what the run log recorded, then exits 130.

    Its bad input is reported by the option's name (``--min-confidence``), not the Python argument's.

    Typer turns a KeyboardInterrupt into a silent exit 130 before decirank's own handler sees it,
    so the command catches it itself.
    """

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        named = names_options_in_errors(command)

        @functools.wraps(command)
        def run(*args: Any, **kwargs: Any) -> None:
            since = datetime.now(UTC)
            try:
                named(*args, **kwargs)
            except KeyboardInterrupt:
                error_console.print(interrupted_message(tool, since), highlight=False, soft_wrap=True)
                raise typer.Exit(EXIT_INTERRUPTED) from None

        return run

    return decorate


ModelOption = Annotated[str, typer.Option("--model", "-m", help="A role (decider) or a provider:model name.")]
BaseUrlOption = Annotated[
    str | None,
    typer.Option(
        "--base-url", callback=check_base_url, help="Base URL for an HTTP backend, e.g. http://127.0.0.1:8000."
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
TimeoutOption = Annotated[float | None, typer.Option("--timeout", help="Time budget in seconds for the whole call.")]
ItemsArgument = Annotated[
    str, typer.Argument(metavar="ITEMS", help="A JSON array file, a JSON Lines file, or - for stdin.")
]
StateOption = Annotated[
    str | None, typer.Option("--state", "-s", help="The context as JSON (plain text is a string); optional.")
]
DescribeOption = Annotated[str | None, typer.Option("--describe", "-d", help="Dot path into each item to show.")]
TextsArgument = Annotated[
    str,
    typer.Argument(
        metavar="TEXTS",
        help="The texts (strings; others shown as JSON): a JSON array file, JSON Lines, or - for stdin.",
    ),
]


def _examples_option(answers: str) -> Any:
    return typer.Option(
        "--examples",
        metavar="FILE|NAME",
        help=f'Labelled texts: a JSON or JSON Lines file of {{"item": <text>, "answer": {answers}}} (or "state" for '
        '"item"), - for stdin, or a set stored with decirank examples add.',
    )


def _calibrated_column(data: dict[str, Any]) -> bool:
    return data.get("calibration") is not None


def print_promise(promise: dict[str, Any]) -> None:
    """What a target promised: the cut-off on the model's probability, and what the labelled rows showed at it."""
    target = "recall" if "target_recall" in promise else "precision"
    level = promise[f"target_{target}"]
    cut = "every item kept" if promise["threshold"] is None else f"model probability >= {promise['threshold']:.4f}"
    console.print(
        f"promise: {target} >= {level:g} with confidence {promise['confidence']:g} on new items; cut-off: {cut}",
        highlight=False,
    )
    observed = f"recall {promise['observed_recall']:.3f}"
    if promise["observed_precision"] is not None:
        observed += f", precision {promise['observed_precision']:.3f}"
    console.print(f"on the calibration's {promise['calibration_rows']} labelled rows: {observed}", highlight=False)
    console.print(f"method: {promise['method']}", style="dim", highlight=False)
    if promise.get("note"):
        console.print(f"note: {promise['note']}", style="yellow", highlight=False)


def usage_line(data: dict[str, Any]) -> str:
    usage = data["usage"]
    cost = cost_text(usage["cost"], usage["calls"])
    return f"model {data['model']} · {usage['calls']} call(s) · {usage['input_tokens']} input tokens · cost {cost}"


def _print_notes(data: dict[str, Any], what: str) -> None:
    """The model's notes under the table: which inputs it cut short, or read as not English."""
    for note in data.get("notes", []):
        where = "query" if note["index"] is None else f"{what} {note['index']}"
        console.print(f"note: {where}: {note['kind']}: {note['message']}", style="yellow")


@app.command()
@tells_when_interrupted("rank")
def rank(
    items: ItemsArgument,
    instructions: Annotated[str, typer.Option("--instructions", "-i", help="The choice question.")],
    state: StateOption = None,
    describe: DescribeOption = None,
    none: Annotated[str | None, typer.Option("--none", help="Text of a 'nothing fits' option.")] = None,
    top_k: Annotated[int | None, typer.Option("--top-k", "-k", help="Keep only the best k.")] = None,
    model: ModelOption = "decider",
    base_url: BaseUrlOption = None,
    timeout: TimeoutOption = None,
    as_json: JsonOption = False,
) -> None:
    """Rank a list against a question in one decision-model call."""
    result = rank_items(
        read_json_list(items, "items"),
        instructions,
        None if state is None else json_or_text(state, "--state"),
        describe=describe,
        none=none,
        top_k=top_k,
        model=model,
        base_url=base_url,
        timeout=timeout,
    )
    data = result.to_dict()
    if as_json:
        print_json(data)
        return
    table = new_table("#", "probability", "", "item")
    for position, entry in enumerate(result.ranked, start=1):
        probability = "—" if entry.probability is None else f"{entry.probability:.3f}"
        table.add_row(str(position), probability, probability_bar(entry.probability), shown_item(entry.item, describe))
    print_table(table)
    if result.none is not None:
        verdict = "nothing fits" if result.no_fit else "an item fits"
        console.print(f"none: {result.none:.3f} ({verdict})")
    console.print(usage_line(data), style="dim")


@app.command()
@tells_when_interrupted("rerank")
def rerank(
    documents: Annotated[
        str,
        typer.Argument(
            metavar="DOCUMENTS",
            help="Strings or {id, text, metadata} objects: a JSON array file, a JSON Lines file, or - for stdin.",
        ),
    ],
    query: Annotated[str, typer.Option("--query", "-q", help="The request the documents are scored against.")],
    top_k: Annotated[int | None, typer.Option("--top-k", "-k", help="Keep only the best k (0 keeps all).")] = None,
    min_relevance: Annotated[
        float | None,
        typer.Option("--min-relevance", help="Drop documents scored below this (0.3 suits local: see the README)."),
    ] = None,
    max_documents_per_call: Annotated[
        int | None, typer.Option("--per-call", help="Documents per model call when the model declares no limit.")
    ] = None,
    calibration: CalibrationOption = None,
    model: ModelOption = "decider",
    base_url: BaseUrlOption = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout", help="Time budget in seconds for the whole rerank (default: 15 s plus 20 ms per document)."
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Score each document's relevance to a query (one likelihood each) and sort."""
    result = rerank_documents(
        query,
        read_json_list(documents, "documents"),
        top_k=top_k,
        min_relevance=min_relevance,
        max_documents_per_call=max_documents_per_call,
        model=model,
        base_url=base_url,
        timeout="auto" if timeout is None else timeout,
        show_progress=True,  # on a terminal only
        calibration=calibration,
    )
    data = result.to_dict()
    if as_json:
        print_json(data)
        return
    table = new_table("rank", "relevance", "", "id", "document")
    for entry in result.results:
        text = entry.document if isinstance(entry.document, str) else entry.document.get("text", "")
        score = entry.relevance_score
        table.add_row(str(entry.rank), f"{score:.3f}", probability_bar(score), str(entry.id), short_text(text))
    print_table(table)
    _print_notes(data, "document")
    if result.calibration is not None:
        console.print(f"relevance calibrated by {result.calibration}", highlight=False)
    console.print(usage_line(data), style="dim")


@app.command(name="filter")
@tells_when_interrupted("filter")
def filter_command(
    items: ItemsArgument,
    question: Annotated[str, typer.Option("--question", "-q", help="The yes/no question asked of each item.")],
    state: StateOption = None,
    min_confidence: Annotated[
        float | None,
        typer.Option(
            "--min-confidence",
            help=f"Keep items at least this likely (default {DEFAULT_MIN_CONFIDENCE:g}; a target picks it instead).",
        ),
    ] = None,
    describe: DescribeOption = None,
    model: ModelOption = "decider",
    base_url: BaseUrlOption = None,
    timeout: TimeoutOption = None,
    examples: Annotated[
        str | None,
        typer.Option(
            "--examples",
            metavar="FILE|NAME",
            help='Labelled items: a JSON or JSON Lines file of {"item": ..., "answer": true/false} '
            '(or {"state": <item text>, "answer": ...}), - for stdin, or a set stored with decirank examples add.',
        ),
    ] = None,
    calibration: CalibrationOption = None,
    target_recall: TargetRecallOption = None,
    target_precision: TargetPrecisionOption = None,
    confidence: ConfidenceOption = None,
    as_json: JsonOption = False,
) -> None:
    """Keep the items for which a yes/no question is likely true (the decide gate)."""
    from .examples import examples_value

    examples_given = examples_value(examples)
    result = filter_items(
        read_json_list(items, "items"),
        question,
        {} if state is None else json_or_text(state, "--state"),
        min_confidence=min_confidence,
        describe=describe,
        model=model,
        base_url=base_url,
        timeout=timeout,
        examples=examples_given,
        show_progress=True,  # on a terminal only
        calibration=calibration,
        target_recall=target_recall,
        target_precision=target_precision,
        confidence=confidence,
    )
    data = result.to_dict()
    if as_json:
        print_json(data)
        return
    calibrated = _calibrated_column(data)
    table = new_table("kept", "probability", *(["raw"] if calibrated else []), "", "item")
    for decision in data["decisions"]:
        table.add_row(
            "yes" if decision["kept"] else "no",
            f"{decision['probability']:.3f}",
            *([f"{decision['raw_probability']:.3f}"] if calibrated else []),
            probability_bar(decision["probability"]),
            shown_item(decision["item"], describe),
        )
    print_table(table)
    _print_notes(data, "item")
    if data["promise"] is not None:
        print_promise(data["promise"])
        by = "the promise's cut-off"
    else:
        by = f"min confidence {result.min_confidence:g}"
    if calibrated:
        by += f", calibrated by {data['calibration']}"
    console.print(f"kept {data['count']}, dropped {data['dropped_count']} ({by})", highlight=False)
    console.print(usage_line(data), style="dim")


@app.command()
@tells_when_interrupted("classify")
def classify(
    texts: TextsArgument,
    question: Annotated[str, typer.Option("--question", "-q", help="The choice question asked of each text.")],
    options: Annotated[
        str,
        typer.Option(
            "--options",
            help="The labels: a JSON list, a JSON object of label to description, a JSON file, or a,b,c.",
        ),
    ],
    none: Annotated[str | None, typer.Option("--none", help="Text of a 'none of these' option (key none).")] = None,
    examples: Annotated[str | None, _examples_option("<option key>")] = None,
    calibration: CalibrationOption = None,
    coverage: Annotated[
        float | None,
        typer.Option(
            "--coverage",
            help="Give each text a prediction set holding its right option for at least this share of new texts "
            "(conformal); needs --calibration.",
        ),
    ] = None,
    confidence: Annotated[
        float | None, typer.Option("--confidence", help="How sure --coverage's promise is (default 0.9).")
    ] = None,
    model: ModelOption = "decider",
    base_url: BaseUrlOption = None,
    timeout: TimeoutOption = None,
    as_json: JsonOption = False,
) -> None:
    """Pick, for each text, the option a question asks for (one choice question per text)."""
    from .examples import examples_value

    given = read_json_list(texts, "texts")
    result = classify_texts(
        given,
        question,
        options_value(options),
        none=none,
        examples=examples_value(examples),
        model=model,
        base_url=base_url,
        timeout=timeout,
        calibration=calibration,
        coverage=coverage,
        confidence=confidence,
    )
    data = result.to_dict()
    if as_json:
        print_json(data)
        return
    sets = data["coverage"] is not None
    table = new_table("#", "choice", "probability", "", *(["set"] if sets else []), "text")
    for decision in result.decisions:
        probability = decision.probability
        shown_set = []
        if sets:
            members = ", ".join(decision.prediction_set or []) or "(empty)"
            shown_set = [members + (" · none fits" if decision.none_fits else "")]
        table.add_row(
            str(decision.index),
            decision.choice,
            f"{probability:.3f}",
            probability_bar(probability),
            *shown_set,
            short_text(given[decision.index]),
        )
    print_table(table)
    if sets:
        found = data["coverage"]
        mean = "—" if found["mean_set_size"] is None else f"{found['mean_set_size']:.2f}"
        console.print(
            f"prediction sets hold the right option for at least {found['coverage']:g} of new texts, "
            f"with confidence {found['confidence']:g} ({found['calibration_rows']} labelled rows; mean set size {mean})",
            highlight=False,
        )
    if data["calibration"] is not None:
        console.print(f"probabilities calibrated by {data['calibration']}", highlight=False)
    console.print(usage_line(data), style="dim")


@app.command()
@tells_when_interrupted("score")
def score(
    texts: TextsArgument,
    question: Annotated[str, typer.Option("--question", "-q", help="The yes/no question asked of each text.")],
    true: Annotated[str | None, typer.Option("--true", help="What a yes means.")] = None,
    false: Annotated[str | None, typer.Option("--false", help="What a no means.")] = None,
    examples: Annotated[str | None, _examples_option("true/false")] = None,
    calibration: CalibrationOption = None,
    model: ModelOption = "decider",
    base_url: BaseUrlOption = None,
    timeout: TimeoutOption = None,
    max_concurrency: Annotated[
        int,
        typer.Option(
            "--max-concurrency",
            min=1,
            help="Requests in flight at once where each text is its own request (a hosted model); "
            "the embedded model takes up to 256 texts a call.",
        ),
    ] = DEFAULT_SCORE_CONCURRENCY,
    as_json: JsonOption = False,
) -> None:
    """The probability that a yes/no question is true of each text (one likelihood question per text)."""
    from .examples import examples_value

    given = read_json_list(texts, "texts")
    result = score_texts(
        given,
        question,
        true=true,
        false=false,
        examples=examples_value(examples),
        model=model,
        base_url=base_url,
        timeout=timeout,
        max_concurrency=max_concurrency,
        calibration=calibration,
    )
    data = result.to_dict()
    if as_json:
        print_json(data)
        return
    calibrated = _calibrated_column(data)
    table = new_table("#", "probability", *(["raw"] if calibrated else []), "", "text")
    rows = zip(given, data["probabilities"], data["raw_probabilities"], strict=True)
    for index, (text, probability, raw) in enumerate(rows):
        raw_cell = [f"{raw:.3f}"] if calibrated else []
        table.add_row(str(index), f"{probability:.3f}", *raw_cell, probability_bar(probability), short_text(text))
    print_table(table)
    _print_notes(data, "text")
    if calibrated:
        console.print(f"probabilities calibrated by {data['calibration']}", highlight=False)
    console.print(usage_line(data), style="dim")

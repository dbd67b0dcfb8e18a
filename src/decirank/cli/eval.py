"""``decirank eval trec`` and ``decirank eval labels``: measure models on a reranking set or on labelled texts."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer

from ..evaluation.labels import (
    CHOICE_QUESTION,
    DEFAULT_CONCURRENCY,
    NOUL_QUESTION,
    build_task,
    evaluate_task,
    load_labelled,
    load_options,
)
from ..evaluation.trec import evaluate, load_qrels, load_run
from ._app import app
from ._output import console, error_console, new_table, print_json, print_table, progress_bar

eval_app = typer.Typer(help="Measure ranking quality, speed and memory.", no_args_is_help=True)
app.add_typer(eval_app, name="eval")


def _cell(value: object) -> str:
    """A measure as the tables show it: a float to 4 places, None as nothing."""
    if value is None:
        return ""
    return f"{value:.4f}" if isinstance(value, float) else str(value)


class EvalTool(str, Enum):
    rank = "rank"
    rank_query = "rank-query"
    rerank = "rerank"


@eval_app.command()
def trec(
    run_file: Annotated[str, typer.Argument(metavar="RUN.json", help="Queries with first-stage hits.")],
    qrels_file: Annotated[str, typer.Argument(metavar="QRELS.txt", help="Graded judgments: qid Q0 docid grade.")],
    model: Annotated[str, typer.Option("--model", "-m", help="A role or provider:model name.")] = "decider",
    tool: Annotated[
        EvalTool, typer.Option(
            "--tool",
            help="rank (one choice per query, the query in the state), rank-query (the query as the question, no "
            "state) or rerank (a likelihood per passage).",
        )
    ] = EvalTool.rank,
    queries: Annotated[int | None, typer.Option("--queries", min=1, help="Use only the first N queries.")] = None,
    warm: Annotated[bool, typer.Option("--warm", help="Also time a second pass over the same passages.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Rerank each query's candidates and report nDCG@10, seconds per query and peak memory."""
    loaded = load_run(run_file)[:queries]
    qrels = load_qrels(qrels_file)
    with progress_bar(f"{tool.value} with {model}", len(loaded), remaining=True) as advance:
        report = evaluate(loaded, qrels, tool=tool.value, model=model, warm=warm, on_query=advance)
    data = report.to_dict()
    if as_json:
        print_json(data)
        return
    table = new_table("measure", "value")
    for key, value in data.items():
        if value is not None:
            table.add_row(key, _cell(value))
    print_table(table)


class LabelQuestionType(str, Enum):
    choice = "choice"
    noul = "noul"


@eval_app.command()
def labels(
    data_file: Annotated[str, typer.Argument(metavar="DATA.jsonl", help='Labelled texts: {"text", "label"} per line.')],
    models: Annotated[
        list[str] | None,
        typer.Option(
            "--model",
            "-m",
            metavar="<str>",
            help="A role or provider:model name; repeat it to compare models (default: decider).",
        ),
    ] = None,
    question_type: Annotated[
        LabelQuestionType,
        typer.Option("--type", help="choice (one choice among the labels) or noul (a yes/no likelihood per row)."),
    ] = LabelQuestionType.choice,
    question: Annotated[
        str | None,
        typer.Option(
            "--question",
            help=f"The instructions (choice: {CHOICE_QUESTION!r}; noul: {NOUL_QUESTION!r}). "
            "A noul question with {label} is asked about each row's own label or another one.",
        ),
    ] = None,
    options_file: Annotated[
        str | None, typer.Option("--options", help="A JSON list of labels, or an object of label -> description.")
    ] = None,
    none: Annotated[
        str | None, typer.Option("--none", help="Add a 'none of these' option (key none) so described.")
    ] = None,
    hold_out: Annotated[
        int, typer.Option("--hold-out", min=0, help="Hold N labels out of the options: their rows belong on none.")
    ] = 0,
    positive: Annotated[
        str | None, typer.Option("--positive", help="noul: the label that makes the answer true (default: the second).")
    ] = None,
    true: Annotated[str | None, typer.Option("--true", help="noul: what a true answer means.")] = None,
    false: Annotated[str | None, typer.Option("--false", help="noul: what a false answer means.")] = None,
    examples: Annotated[
        int,
        typer.Option(
            "--examples", min=0, help="Attach N rows per label as examples to every question; score the rest."
        ),
    ] = 0,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Score at most N rows (a seeded sample).")] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of every random draw.")] = 0,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Rows asked at once.")] = DEFAULT_CONCURRENCY,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Measure models on labelled texts: accuracy, macro-F1, AUROC, Brier, ECE, out-of-scope recall, speed."""
    names = models or ["decider"]
    task = build_task(
        load_labelled(data_file),
        type=question_type.value,
        question=question,
        options=load_options(options_file) if options_file is not None else None,
        none=none,
        hold_out=hold_out,
        positive=positive,
        true=true,
        false=false,
        examples=examples,
        limit=limit,
        seed=seed,
    )
    label = f"{question_type.value} with {', '.join(names)}"
    with progress_bar(label, len(task.cases) * len(names), remaining=True) as advance:
        report = evaluate_task(task, names, concurrency=concurrency, on_row=advance)
    data = report.to_dict()
    for failure in report.failed:
        error_console.print(
            f"warning: {failure.model} not measured: {type(failure.error).__name__}: {failure.error}",
            highlight=False,
            soft_wrap=True,
        )
    if as_json:
        print_json(data)
        return
    scope = f", {data['out_of_scope_rows']} out of scope" if data["out_of_scope_rows"] else ""
    console.print(
        f"{data['type']}: {data['scored_rows']} of {data['rows']} rows scored, {data['labels']} labels{scope}",
        highlight=False,
    )
    shown = data["models"]
    table = new_table("measure", *(score["model"] for score in shown))
    for key in shown[0]:
        if key in ("model", "usage") or all(score[key] is None for score in shown):
            continue
        table.add_row(key, *(_cell(score[key]) for score in shown))
    print_table(table)
    for failure in data["failed"]:
        console.print(f"{failure['model']}: not measured ({failure['error']['message']})", highlight=False)

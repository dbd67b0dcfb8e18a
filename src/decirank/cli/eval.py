"""``decirank eval trec``: measure a model on a TREC-style reranking set."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer

from ..evaluation.trec import evaluate, load_qrels, load_run
from ._app import app
from ._output import console, new_table, print_json, progress_bar

eval_app = typer.Typer(help="Measure ranking quality, speed and memory.", no_args_is_help=True)
app.add_typer(eval_app, name="eval")


class EvalTool(str, Enum):
    rank = "rank"
    rerank = "rerank"


@eval_app.command()
def trec(
    run_file: Annotated[str, typer.Argument(metavar="RUN.json", help="Queries with first-stage hits.")],
    qrels_file: Annotated[str, typer.Argument(metavar="QRELS.txt", help="Graded judgments: qid Q0 docid grade.")],
    model: Annotated[str, typer.Option("--model", "-m", help="A role or provider:model name.")] = "decider",
    tool: Annotated[
        EvalTool, typer.Option("--tool", help="rank (one choice per query) or rerank (a likelihood per passage).")
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
            table.add_row(key, f"{value:.4f}" if isinstance(value, float) else str(value))
    console.print(table)

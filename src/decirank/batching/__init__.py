"""Batch work over large files: a decision tool on every row, on one machine or a Ray cluster.

    >>> import decirank
    >>> result = decirank.batch("filter", "tickets.jsonl", "kept.jsonl",
    ...                         question="Is this about billing?", text="body")

``tool`` is one of:

- ``filter``: the filter tool's question about ``state``, one likelihood per
  row; adds ``probability`` and ``kept`` (at ``min_confidence`` or more).
- ``classify``: one choice per row among ``options`` (a list of labels, or
  label -> description; ``none`` adds a "none of these" option); the row is
  the state; adds ``choice`` and ``probability``.
- ``score``: one likelihood per row, the row being what ``question`` is asked
  about (``true``/``false`` describe the outcomes); adds ``probability``.
- ``rerank``: the rerank tool per group of rows sharing a query (``query``
  for every row, or ``query_field`` naming each row's); adds
  ``relevance_score`` and ``rank`` (1 = most relevant in its group).

A row shows its ``text`` column, its ``describe`` dot path, or else the
whole row as canonical JSON. Input and output are JSON Lines, CSV or Parquet,
by extension; output rows are the input rows plus the answer columns, in
input order. A row that fails keeps empty answers and is reported, with its
reason, in the errors file (``OUTPUT``'s name with ``.errors.jsonl``);
``fail_fast`` stops at the first instead. A batch killed or stopped resumes
when run again with the same output, and writes the same bytes as one that
never stopped. ``engine="ray"`` runs the chunks on Ray Data (a local instance,
or the cluster at ``address``). The batch is one run in the run log.

``calibration`` names a map stored by ``decirank calibrate`` for the tool,
question (options for classify) and model: filter's and score's rows then
carry the calibrated ``probability`` and the model's ``raw_probability``,
classify's and rerank's the calibrated numbers. filter's ``target_recall``
or ``target_precision`` (with ``confidence``, default 0.9) picks the cut-off
from the calibration's labelled rows once, for every row of the input (a
recall promise depends on how many rows it is for), and ``kept`` follows it;
the result's ``promise`` and the batch's run state the cut-off and the bound.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio

from ..decisions.decider import DEFAULT_ROLE
from .chunks import BatchStopped
from .driver import DEFAULT_CHUNK_ROWS, ENGINES, BatchProgress, BatchResult, errors_path_for, run_batch
from .job import ANSWER_COLUMNS, TOOLS, Job

__all__ = [
    "ANSWER_COLUMNS",
    "DEFAULT_CHUNK_ROWS",
    "ENGINES",
    "TOOLS",
    "BatchProgress",
    "BatchResult",
    "BatchStopped",
    "abatch",
    "batch",
    "errors_path_for",
]


def batch(
    tool: str,
    input: Any,
    output: Any,
    *,
    question: str | None = None,
    state: Any = None,
    options: Sequence[str] | Mapping[str, str] | None = None,
    none: str | None = None,
    true: str | None = None,
    false: str | None = None,
    examples: Sequence[Any] | str | None = None,
    min_confidence: float | None = None,
    query: str | None = None,
    query_field: str | None = None,
    text: str | None = None,
    describe: str | None = None,
    model: str = DEFAULT_ROLE,
    base_url: str | None = None,
    timeout: float | None = None,
    calibration: str | None = None,
    target_recall: float | None = None,
    target_precision: float | None = None,
    confidence: float | None = None,
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
    """Run ``tool`` on every row of ``input``, writing ``output``; see the module's documentation.

    ``workers``: worker processes (default: one per usable core; 0 answers in
    this process) or Ray actors (default: the cluster's CPUs). ``batch_size``:
    rows per chunk (default: the model's questions per call, at most 256).
    ``timeout``: the time budget of each chunk's tool call. ``errors``: where
    failed rows go. ``overwrite`` replaces an existing output (or an unfinished
    batch's progress). ``kept_only`` (filter) writes only the rows kept.
    ``on_progress`` is called after each chunk.
    """
    job = Job.build(
        tool,
        question=question,
        state=state,
        options=options,
        none=none,
        true=true,
        false=false,
        examples=examples,
        min_confidence=min_confidence,
        query=query,
        query_field=query_field,
        text=text,
        describe=describe,
        model=model,
        base_url=base_url,
        timeout=timeout,
        calibration=calibration,
        target_recall=target_recall,
        target_precision=target_precision,
        confidence=confidence,
    )
    return run_batch(
        job,
        input,
        output,
        engine=engine,
        workers=workers,
        address=address,
        batch_size=batch_size,
        errors=errors,
        fail_fast=fail_fast,
        overwrite=overwrite,
        kept_only=kept_only,
        on_progress=on_progress,
    )


async def abatch(tool: str, input: Any, output: Any, **options: Any) -> BatchResult:
    """The async twin of :func:`batch`: the batch runs in a worker thread, the event loop stays free."""
    return await anyio.to_thread.run_sync(lambda: batch(tool, input, output, **options))

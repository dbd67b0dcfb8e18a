"""score_list: rank stored artifacts with an evaluator, keep the top k.

For "generate N candidates, then pick the best" pipelines: the N candidates
already sit in the artifact store under refs ``run_id/agent_id``, and refs are
resolved to text here, so callers never pipe artifact text through tool
parameters. Each artifact is scored by one evaluator (``exec:``, ``score:``
or ``validate:``, see :mod:`decirank.tools._evaluators`), at most
``max_concurrency`` at a time; the refs are sorted by score, ties in input
order, and each ref is stamped in the store with its score and beam rank.
With ``top_k`` above 0, refs past the cut are pruned with a reason pointing
at it; ``top_k=0`` ranks only.

A missing or empty artifact is UNKNOWN (no score) rather than a failure; a
decision model that fails fails the whole call, because no score is ever
invented.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

import anyio
from pydantic import BaseModel, Field
from ..decisions.decider import DEFAULT_ROLE
from ..decisions.toolcall import ToolCall, check_timeout, gather
from ..errors import InvalidInputError
from ..stores.artifacts import ArtifactStore, Stamp, check_ref
from ..types.answers import Usage
from ._checks import check_count, check_top_k
from ._definition import Offered, ToolDefinition, Wire, sync_twin_of
from ._outputs import Rows, UsageOut
from ._params import ApiKey, BaseUrl, FromOne, FromZero, Text, Timeout
from ._evaluators import (
    DEFAULT_EXEC_TIMEOUT,
    Evaluation,
    Evaluator,
    Verdict,
    parse_evaluator,
    register_validation_type,
)

__all__ = [
    "DEFAULT_MAX_CONCURRENCY",
    "SCORE_LIST",
    "ScoreListOutput",
    "ScoreListResult",
    "ScoredRef",
    "Verdict",
    "ascore_list",
    "parse_refs",
    "rank_evaluations",
    "register_validation_type",
    "score_list",
]

DEFAULT_MAX_CONCURRENCY = 5
TOOL_NAME = "score_list"


@dataclass(frozen=True)
class ScoredRef:
    #: 1 for the best; every ref has a rank, pruned or not.
    rank: int
    ref: str
    #: In [0, 1]; None when the ref could not be scored (verdict UNKNOWN).
    score: float | None
    verdict: Verdict
    issues: tuple[str, ...]
    reason: str
    pruned: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "ref": self.ref,
            "score": self.score,
            "verdict": self.verdict.value,
            "issues": list(self.issues),
            "reason": self.reason,
            "pruned": self.pruned,
        }


@dataclass(frozen=True)
class ScoreListResult(Rows[ScoredRef]):
    """A sequence of its ``ranked``; ``to_dict()`` gives the tool's JSON shape."""

    rows = "ranked"
    run_id: str
    evaluator: str
    #: As asked; 0 means rank only.
    top_k: int
    #: Every ref, best first.
    ranked: list[ScoredRef]
    #: The models that answered, for ``score:`` and registered ``validate:`` types; None otherwise.
    model: str | None = None
    usage: Usage = field(default_factory=Usage)

    @property
    def total(self) -> int:
        return len(self.ranked)

    @property
    def winners(self) -> list[str]:
        """The refs that made the cut, best first; a ref without a score never wins."""
        return [entry.ref for entry in self.ranked if not entry.pruned and entry.score is not None]

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "evaluator": self.evaluator,
            "total": self.total,
            "top_k": self.top_k,
            "winners": self.winners,
            "ranked": [entry.to_dict() for entry in self.ranked],
            "model": self.model,
            "usage": self.usage.to_dict(),
        }


def parse_refs(refs: Any) -> list[str]:
    """``["run/agent", ...]`` or ``[{"ref": "run/agent"}, ...]``, or either as a JSON string."""
    expected = 'a JSON array of refs: ["run_id/agent_id", ...] or [{"ref": "run_id/agent_id"}, ...]'
    if isinstance(refs, str):
        try:
            refs = json.loads(refs)
        except json.JSONDecodeError as error:
            raise InvalidInputError("refs", expected, detail=f"not JSON: {error.msg} at column {error.colno}") from None
    if isinstance(refs, str | bytes) or not isinstance(refs, Sequence):
        raise InvalidInputError("refs", expected, got=refs)
    if not refs:
        raise InvalidInputError("refs", "at least one ref")
    parsed: list[str] = []
    first_seen: dict[str, int] = {}
    for index, entry in enumerate(refs):
        if isinstance(entry, dict):
            ref = check_ref(entry.get("ref"), f"refs.{index}.ref")
        elif isinstance(entry, str):
            ref = check_ref(entry, f"refs.{index}")
        else:
            raise InvalidInputError(f"refs.{index}", 'a ref string or an object {"ref": ...}', got=entry)
        if ref in first_seen:
            # One ref would get two ranks and two stamps in the same run.
            detail = f"{ref!r} is also refs.{first_seen[ref]}"
            raise InvalidInputError(f"refs.{index}", "a ref listed once", detail=detail)
        first_seen[ref] = index
        parsed.append(ref)
    return parsed


def check_exec_timeout(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0 or math.isinf(value):
        raise InvalidInputError("exec_timeout", "a finite number of seconds greater than 0", got=value)
    return float(value)


def _format_score(score: float) -> str:
    return f"{score:.3f}"


def rank_evaluations(refs: Sequence[str], evaluations: Sequence[Evaluation], top_k: int | None) -> list[ScoredRef]:
    """Highest score first, ties in input order, unscored refs last; then the top-k cut.

    With ``top_k`` (None = rank only), the first ``top_k`` scored refs are kept
    and every other ref is pruned with a reason naming the cut.
    """
    order = sorted(
        range(len(refs)),
        key=lambda i: (evaluations[i].score is None, -(evaluations[i].score or 0.0), i),
    )
    ranked_scores = [evaluations[i].score for i in order]
    ranked: list[ScoredRef] = []
    for rank, index in enumerate(order, start=1):
        evaluation = evaluations[index]
        pruned = False
        reason = evaluation.reason
        if top_k is not None and evaluation.score is None:
            pruned = True
            reason = f"pruned: not scored, so not kept in the top {top_k} ({evaluation.reason})"
        elif top_k is not None and rank > top_k:
            pruned = True
            # A scored ref past the cut means the ref at the cut was scored too.
            cut_score = ranked_scores[top_k - 1]
            assert cut_score is not None
            reason = (
                f"pruned at the top-{top_k} cut: ranked {rank} of {len(refs)} with "
                f"{_format_score(evaluation.score)}, the cut is {_format_score(cut_score)} ({evaluation.reason})"
            )
        ranked.append(
            ScoredRef(rank, refs[index], evaluation.score, evaluation.verdict, evaluation.issues, reason, pruned)
        )
    return ranked


def _unscorable(text: str | None) -> Evaluation | None:
    """UNKNOWN for a ref with nothing to score, None when there is something."""
    if text is None:
        return Evaluation(None, Verdict.UNKNOWN, ("no artifact is stored under this ref",), "missing artifact")
    if not text.strip():
        return Evaluation(None, Verdict.UNKNOWN, ("the artifact is empty",), "empty artifact")
    return None


async def _evaluate_all(
    evaluator: Evaluator,
    refs: Sequence[str],
    texts: dict[str, str],
    call: ToolCall | None,
    max_concurrency: int,
    on_progress: Callable[[], None] | None,
) -> list[Evaluation]:
    limiter = anyio.Semaphore(max_concurrency)

    async def evaluate(ref: str) -> Evaluation:
        text = texts.get(ref)
        evaluation = _unscorable(text)
        if evaluation is None:
            assert text is not None
            async with limiter:
                evaluation = await evaluator.evaluate(text, call)
        if on_progress is not None:
            on_progress()
        return evaluation

    # A failed model call fails them all (gather cancels the rest): no score is invented.
    return await gather([functools.partial(evaluate, ref) for ref in refs])


async def ascore_list(
    refs: Annotated[
        Any,
        Wire(list[str | dict[str, Any]] | str),
        Field(
            description='Refs "run_id/agent_id", or {"ref": ...} objects, or that array as a JSON string; both '
            "forms are accepted."
        ),
    ],
    evaluator: Annotated[
        Text, Field(description="Scoring directive: validate:<type>, score:<criterion>, or exec:<cmd>.")
    ],
    *,
    top_k: Annotated[
        FromZero,
        Field(description="How many top-scoring refs to surface as winners; 0 means rank-only, no pruning."),
    ] = 0,
    max_concurrency: Annotated[
        FromOne, Field(description=f"Upper bound on parallel evaluator calls (default: {DEFAULT_MAX_CONCURRENCY}).")
    ] = DEFAULT_MAX_CONCURRENCY,
    model: Annotated[
        str | None, Field(description="The decision model role for score: and validate:; default decider.")
    ] = DEFAULT_ROLE,
    store: Annotated[
        ArtifactStore | None,
        Field(description="The artifact store; default: the user's."),
        Offered.python_only("a surface reads its own user folder's artifact store"),
    ] = None,
    exec_timeout: Annotated[
        float,
        Field(gt=0, description="Seconds each exec: run may take."),
        Offered.not_on(
            http="a server bounds exec: runs by its own settings, never a caller's",
            mcp="a server bounds exec: runs by its own settings, never a caller's",
        ),
    ] = DEFAULT_EXEC_TIMEOUT,
    timeout: Timeout = None,
    base_url: BaseUrl = None,
    api_key: ApiKey = None,
    on_progress: Annotated[
        Callable[[], None] | None,
        Field(description="Called once per ref scored."),
        Offered.python_only("a callback, which no wire can carry"),
    ] = None,
    allow_exec: Annotated[
        bool,
        Field(description="Whether exec: evaluators (shell commands) may run."),
        Offered.python_only("the operator decides it (--allow-exec), never the caller"),
    ] = True,
) -> ScoreListResult:
    """Score the artifacts under ``refs`` with ``evaluator`` and rank them; keep the best ``top_k``.

    ``refs``: ``["run_id/agent_id", ...]`` or ``[{"ref": ...}, ...]``, or that
    array as a JSON string. ``evaluator``: ``exec:<command>`` (exit status;
    ``{artifact}`` is the artifact file's quoted path, also in ``$ARTIFACT``;
    each run is limited to ``exec_timeout`` seconds and to what is left of
    ``timeout``), ``score:<criterion>`` or ``validate:<type>``. ``timeout`` is
    one budget for the whole call: every model call and every ``exec:`` run;
    ``model`` (a role or ``provider:model``) and ``base_url`` concern the
    decision-model evaluators only. ``store`` defaults to the user's artifact
    store; ``on_progress`` is called once per ref scored.
    """
    ref_list = parse_refs(refs)
    kept = check_top_k(top_k, allow_zero=True)
    max_concurrency = check_count(max_concurrency, "max_concurrency")
    exec_timeout = check_exec_timeout(exec_timeout)
    check_timeout(timeout)
    # A store opened here is closed here; a caller's store is the caller's to close.
    with contextlib.nullcontext(store) if store is not None else ArtifactStore() as opened:
        chosen = await anyio.to_thread.run_sync(
            functools.partial(
                parse_evaluator, evaluator, store=opened, exec_timeout=exec_timeout, allow_exec=allow_exec
            )
        )
        texts = await anyio.to_thread.run_sync(opened.get_many, ref_list)
        inputs = {"refs": ref_list, "evaluator": evaluator, "top_k": kept or 0, "max_concurrency": max_concurrency}
        # exec and built-in types ask no model, so none is resolved: they work where none is
        # installed, and are still a run in the run log.
        async with ToolCall(
            TOOL_NAME,
            model=model if chosen.needs_model else None,
            timeout=timeout,
            backend_options={"base_url": base_url, "api_key": api_key},
            inputs=inputs,
        ) as call:
            # Commands share the call's one budget as model calls do: none runs past it.
            chosen = chosen.within(timeout)
            evaluations = await _evaluate_all(
                chosen, ref_list, texts, call if chosen.needs_model else None, max_concurrency, on_progress
            )
            ranked = rank_evaluations(ref_list, evaluations, kept)
            call.record_outputs({"ranked": [entry.to_dict() for entry in ranked]})
        run_id, usage = call.run_id, call.usage
        answered_by = call.answered_by if chosen.needs_model else None
        stamps = [
            Stamp(
                entry.ref, run_id, evaluator, entry.score, entry.verdict.value, entry.rank, entry.pruned, entry.reason
            )
            for entry in ranked
        ]
        await anyio.to_thread.run_sync(opened.add_stamps, stamps)
    return ScoreListResult(run_id, evaluator, kept or 0, ranked, answered_by, usage)


score_list = sync_twin_of(ascore_list, "score_list")


class ScoredRefOut(BaseModel):
    rank: int
    ref: str
    score: float | None
    verdict: Verdict
    issues: list[str]
    reason: str
    pruned: bool


class ScoreListOutput(BaseModel):
    """The result of score_list: every ref ranked, and the winners."""

    run_id: str = Field(description="This scoring run; every stamp carries it.")
    evaluator: str
    total: int = Field(description="How many refs were scored.")
    top_k: int
    winners: list[str] = Field(description="The winning refs, best first.")
    ranked: list[ScoredRefOut] = Field(description="The full per-ref trace, best first.")
    model: str | None = Field(None, description="The model(s) that answered, for score: and validate:.")
    usage: UsageOut


SCORE_LIST = ToolDefinition(
    ascore_list,
    name="score_list",
    title="Score and rank stored artifacts",
    description=(
        "Rank a list of existing refs by scoring with an evaluator, returning the top-k winners. Avoids "
        "parameter size limits by resolving artifacts server-side.\n\n"
        "For 'generate N candidates, then pick the best' pipelines where the N candidates already exist as "
        "refs (run_id/agent_id) in the artifact store: refs are resolved to their artifact text server-side, "
        "so callers never pipe artifact text through tool parameters. Evaluators: validate:<type> (a "
        "registered type: built-in json, python, yaml checks, or a user type judged by the decision model), "
        "score:<criterion> (a graded decision-model score) and exec:<shell-cmd> (ground truth: exit status 0 "
        "scores 1.0; {artifact} is the artifact file's quoted path, also in $ARTIFACT). Each ref is stamped "
        "in the store with its score and beam_rank; refs outside the top-k are marked pruned with a reason "
        "pointing at the cut. top_k=0 returns all without pruning. A missing ref is UNKNOWN, not an error."
    ),
    result=ScoreListOutput,
    # Scoring stamps every ref in the artifact store.
    read_only=False,
    command="score-list",
    route="/v1/score_list",
)

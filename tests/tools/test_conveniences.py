"""What users of other ranking libraries expect of results and calls: counts, top_k, documentation, budgets, bars."""

from __future__ import annotations

import os
import pydoc
import subprocess
import sys

import anyio
import pytest

import decirank
from decirank.errors import InvalidInputError
from decirank.testing import ScriptedBackend, use_backend
from decirank.tools.rerank import DEFAULT_TIMEOUT, MAX_DEFAULT_TIMEOUT, PER_DOCUMENT_TIMEOUT, default_budget

PETS = ["My cat sleeps all day", "Rates rose again", "The dog chased the ball", "Bread needs flour"]


def test_filter_result_has_count_and_dropped_count_attributes():
    """FilterResult.count and .dropped_count are attributes that agree with items, dropped and to_dict()."""
    result = decirank.filter(PETS, "Is this about pets?", {}, model="lexical", min_confidence=0.3)
    assert result.count == len(result.items) and result.dropped_count == len(result.dropped)
    assert result.count + result.dropped_count == len(PETS)
    data = result.to_dict()
    assert (data["count"], data["dropped_count"]) == (result.count, result.dropped_count)


def test_top_k_gives_the_best_results_first():
    """RerankResult.top_k(n) and RankResult.top_k(n) give the n best entries; n must be a positive count."""
    reranked = decirank.rerank("pets", PETS, model="lexical")
    assert reranked.top_k(2) == reranked.results[:2] and reranked.top_k(10) == reranked.results
    ranked = decirank.rank(PETS, "Which is about a pet?", {"question": "cats"}, model="lexical")
    assert ranked.top_k(1) == ranked.ranked[:1]
    with pytest.raises(InvalidInputError, match="^k: "):
        reranked.top_k(0)


@pytest.mark.parametrize("name", ["rank", "rerank", "filter", "classify", "score", "score_list"])
def test_help_of_a_sync_tool_shows_its_full_documentation(name):
    """help(decirank.<tool>) shows the tool's own documentation, the same as its async twin's, not a pointer to it."""
    sync, asynchronous = getattr(decirank, name), getattr(decirank, "a" + name)
    shown = pydoc.render_doc(sync, renderer=pydoc.plaintext)
    first_line = asynchronous.__doc__.strip().splitlines()[0]
    assert first_line in shown
    assert f"Sync twin of :func:`a{name}`" in shown


class _DeadlineBackend(ScriptedBackend):
    """Answers uniformly and keeps, per call, how many seconds its budget still had."""

    def __init__(self) -> None:
        super().__init__("deadline")
        self.seconds_left: list[float] = []

    async def decide(self, request):
        self.seconds_left.append(anyio.current_effective_deadline() - anyio.current_time())
        return await super().decide(request)


def test_reranks_default_budget_grows_with_the_number_of_documents():
    """With no timeout, a rerank of 5,000 documents gets 15 s plus 20 ms each, a rerank of 10 about 15 s."""
    backend = _DeadlineBackend()
    with use_backend(backend) as model:
        decirank.rerank("q", [f"document {i}" for i in range(10)], model=model)
        small = max(backend.seconds_left)
        backend.seconds_left.clear()
        decirank.rerank("q", [f"document {i}" for i in range(5000)], model=model, max_documents_per_call=500)
        large = max(backend.seconds_left)
        backend.seconds_left.clear()
        decirank.rerank("q", [f"document {i}" for i in range(5000)], model=model, timeout=5)
        fixed = max(backend.seconds_left)
    assert DEFAULT_TIMEOUT - 5 < small <= DEFAULT_TIMEOUT + 10 * PER_DOCUMENT_TIMEOUT
    assert DEFAULT_TIMEOUT + 4000 * PER_DOCUMENT_TIMEOUT < large <= DEFAULT_TIMEOUT + 5000 * PER_DOCUMENT_TIMEOUT
    assert fixed <= 5, "a timeout the caller gives is kept as it is"


def test_reranks_default_budget_stops_growing_at_its_ceiling():
    """However long the list, a default budget is at most MAX_DEFAULT_TIMEOUT; a server's longer base is kept."""
    assert default_budget(5000) == DEFAULT_TIMEOUT + 5000 * PER_DOCUMENT_TIMEOUT
    assert default_budget(10_000_000) == MAX_DEFAULT_TIMEOUT
    assert default_budget(10, base=600.0) == 600.0


SHOW_PROGRESS = """
import decirank
documents = [f"document {{i}} about fleas" for i in range(60)]
decirank.{tool}({arguments}, model="lexical", max_{per_call}_per_call=10, show_progress={show})
"""


@pytest.mark.parametrize(
    ("tool", "arguments", "per_call"),
    [("rerank", '"fleas", documents', "documents"), ("filter", 'documents, "Is this about fleas?", {}', "items")],
)
def test_show_progress_draws_a_bar_on_a_terminal_only_when_asked(tool, arguments, per_call):
    """show_progress=True draws a bar on stderr when it is a terminal; by default, and off a terminal, nothing."""

    def stderr(show: bool, terminal: bool) -> str:
        script = SHOW_PROGRESS.format(tool=tool, arguments=arguments, per_call=per_call, show=show)
        env = {**os.environ, "TTY_COMPATIBLE": "1" if terminal else "0"}
        command = [sys.executable, "-c", script]
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        return done.stderr

    drawn = stderr(show=True, terminal=True)
    assert tool in drawn and "/60" in drawn
    assert stderr(show=False, terminal=True) == ""
    assert stderr(show=True, terminal=False) == ""

"""Haystack: DecirankRanker inside a real Pipeline (BM25 retriever, then the ranker), local model, offline."""

from __future__ import annotations

import asyncio
import inspect

import pytest

pytest.importorskip("haystack", reason="needs the haystack extra")  # telemetry is off: see conftest

from haystack import Document, Pipeline  # noqa: E402
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever  # noqa: E402
from haystack.core.errors import PipelineRuntimeError  # noqa: E402
from haystack.document_stores.in_memory import InMemoryDocumentStore  # noqa: E402

from decirank.errors import DecisionError, InvalidInputError, UnknownModelError  # noqa: E402
from decirank.integrations.haystack import DecirankRanker  # noqa: E402

from .conftest import PASSAGES, QUERY  # noqa: E402

try:
    from haystack import AsyncPipeline  # Haystack 2
except ImportError:  # Haystack 3 merged it into Pipeline, which has run_async itself
    AsyncPipeline = Pipeline


def documents() -> list[Document]:
    return [
        Document(id=metadata["source"], content=text, meta=dict(metadata), score=0.5) for text, metadata in PASSAGES
    ]


def pipeline(kind=Pipeline, **options):
    """A store of the passages, a BM25 retriever that returns them all, and the decirank ranker after it."""
    store = InMemoryDocumentStore()
    store.write_documents(documents())
    built = kind()
    built.add_component("retriever", InMemoryBM25Retriever(store, top_k=len(PASSAGES)))
    built.add_component("ranker", DecirankRanker(**options))
    built.connect("retriever.documents", "ranker.documents")
    return built


def inputs(**ranker):
    return {"retriever": {"query": QUERY}, "ranker": {"query": QUERY, **ranker}}


def test_pipeline_keeps_top_k_best_first_with_scores_and_logs_the_run(rerank_runs):
    """In a Pipeline: BM25 puts the tax document first, the ranker the flea one; top_k kept, scores set."""
    outputs = pipeline(top_k=2).run(inputs(), include_outputs_from={"retriever"})
    assert outputs["retriever"]["documents"][0].id == "tax"
    found = outputs["ranker"]["documents"]
    assert len(found) == 2 and found[0].id == "fleas" and found[0].meta == {"source": "fleas"}
    assert found[0].score > found[1].score and all(0.0 <= d.score <= 1.0 for d in found)
    (run,) = rerank_runs()
    assert (run["status"], run["role"], run["model"]) == ("success", "decider", "local:default")


def test_top_k_at_run_time_overrides_the_one_at_init():
    """top_k given to run wins over the component's; None keeps every document."""
    assert len(pipeline(top_k=1).run(inputs(top_k=3))["ranker"]["documents"]) == 3
    assert len(pipeline(top_k=None).run(inputs())["ranker"]["documents"]) == len(PASSAGES)


def test_async_pipeline_uses_arerank(rerank_runs):
    """An async pipeline run calls the component's run_async (decirank's arerank): same documents, same scores."""
    sync = pipeline(top_k=3).run(inputs())["ranker"]["documents"]
    found = asyncio.run(pipeline(AsyncPipeline, top_k=3).run_async(inputs()))["ranker"]["documents"]
    assert [d.id for d in found] == [d.id for d in sync]
    assert [d.score for d in found] == pytest.approx([d.score for d in sync])
    assert len(rerank_runs()) == 2


def test_component_leaves_its_input_alone_and_survives_serialization():
    """The input documents keep their scores; the pipeline dumps and loads with the ranker's settings."""
    given = documents()
    found = DecirankRanker(top_k=None).run(QUERY, given)["documents"]
    assert sorted(d.id for d in found) == sorted(d.id for d in given) and all(d.score == 0.5 for d in given)
    text = pipeline(model="lexical", top_k=2, min_relevance=0.1).dumps()
    # Haystack 3 loads classes only from modules on its allowlist
    trusted = {"allowed_modules": ["decirank.integrations.haystack"]}
    trusted_only = "allowed_modules" in inspect.signature(Pipeline.loads).parameters
    loaded = Pipeline.loads(text, **(trusted if trusted_only else {}))
    ranker = loaded.get_component("ranker")
    assert (ranker.model, ranker.top_k, ranker.min_relevance) == ("lexical", 2, 0.1)


def test_model_is_a_decirank_model_name_or_role(rerank_runs, monkeypatch):
    """model names a model (lexical here); the default role follows decirank's config (DECIRANK_ROLE_DECIDER)."""
    DecirankRanker(model="lexical").run(QUERY, documents())
    monkeypatch.setenv("DECIRANK_ROLE_DECIDER", "lexical")
    DecirankRanker().run(QUERY, documents())
    assert [run["model"] for run in rerank_runs()] == ["lexical:bm25", "lexical:bm25"]


def test_errors_are_decirank_typed_errors(rerank_runs, failing_model):
    """The component raises decirank's errors; a Pipeline wraps them, with decirank's error as the cause."""
    with pytest.raises(UnknownModelError):
        DecirankRanker(model="no-such-model").run(QUERY, documents())
    with pytest.raises(InvalidInputError) as bad_top_k:
        DecirankRanker(top_k=-1).run(QUERY, documents())
    assert bad_top_k.value.field == "top_k"
    with pytest.raises(DecisionError):
        asyncio.run(DecirankRanker(model=failing_model).run_async(QUERY, documents()))
    with pytest.raises(PipelineRuntimeError) as wrapped:
        pipeline(model="no-such-model").run(inputs())
    assert isinstance(wrapped.value.__cause__, UnknownModelError)
    assert rerank_runs()[0]["status"] == "failed"

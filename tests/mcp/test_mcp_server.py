"""The MCP server, driven by the SDK's own client over stdio (and once over streamable HTTP)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters

import decirank
from tests.loopback import free_port, subprocess_server

ITEMS = [
    {"title": "fleas and their life cycle", "url": "a"},
    {"title": "bread baking at home", "url": "b"},
    {"title": "stock market basics", "url": "c"},
]


def with_stdio_client(scenario: Callable[[Client], Awaitable[Any]], *server_args: str) -> Any:
    """Spawn ``python -m decirank mcp`` as the server and run ``scenario`` against it."""
    # The SDK passes a minimal environment by default; the server must see this test's user dir.
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "decirank", "mcp", *server_args], env=dict(os.environ)
    )

    async def main() -> Any:
        async with Client(server, read_timeout_seconds=60) as client:
            return await scenario(client)

    return anyio.run(main)


def test_lists_every_tool_with_documented_schemas_and_read_only_hints():
    """tools/list carries every tool with its documented field names, required fields and read-only annotations."""

    async def scenario(client: Client):
        return {tool.name: tool for tool in (await client.list_tools()).tools}

    tools = with_stdio_client(scenario)
    assert set(tools) == {
        "builtin__rank", "builtin__rerank", "builtin__filter", "builtin__classify", "builtin__score",
        "builtin__calibrate", "builtin__score_list",
    }

    rank = tools["builtin__rank"]
    rank_inputs = {"describe", "instructions", "items", "model", "none", "state", "top_k"}
    assert set(rank.input_schema["properties"]) == rank_inputs
    assert set(rank.input_schema["required"]) == {"instructions", "items"}
    assert rank.input_schema["properties"]["instructions"]["description"] == "The choice question"
    assert rank.input_schema["properties"]["items"]["description"] == "The list, usually a template like {{E1.results}}"
    assert {"items", "no_fit", "none", "ranked"} <= set(rank.output_schema["properties"])
    assert set(rank.output_schema["required"]) == {"items", "ranked", "none", "no_fit", "model", "usage", "run_id"}

    assert set(tools["builtin__rerank"].input_schema["properties"]) == {
        "query", "documents", "top_k", "top_n", "return_documents", "describe", "min_relevance", "calibration",
        "model", "max_documents_per_call",
    }
    assert set(tools["builtin__filter"].input_schema["properties"]) == {
        "items", "question", "state", "min_confidence", "describe", "examples", "calibration", "target_recall",
        "target_precision", "confidence", "model", "max_items_per_call"
    }
    assert {"raw_probability"} <= set(
        tools["builtin__filter"].output_schema["properties"]["decisions"]["items"]["properties"]
    )
    assert {"calibration", "promise"} <= set(tools["builtin__filter"].output_schema["properties"])
    assert set(tools["builtin__filter"].input_schema["required"]) == {"items", "question"}
    assert set(tools["builtin__classify"].input_schema["properties"]) == {
        "texts", "question", "options", "none", "describe", "examples", "calibration", "coverage", "confidence",
        "model",
    }
    assert {"prediction_set", "none_fits"} <= set(
        tools["builtin__classify"].output_schema["properties"]["decisions"]["items"]["properties"]
    )
    assert set(tools["builtin__classify"].input_schema["required"]) == {"texts", "question", "options"}
    assert set(tools["builtin__score"].input_schema["properties"]) == {
        "texts", "question", "levels", "describe", "true", "false", "examples", "calibration", "model",
        "max_concurrency",
    }
    assert {"raw_probabilities", "calibration"} <= set(tools["builtin__score"].output_schema["properties"])
    calibrate = tools["builtin__calibrate"]
    assert set(calibrate.input_schema["properties"]) == {
        "name", "question", "tool", "rows", "state", "options", "none", "true", "false", "method", "save", "model"
    }
    assert set(calibrate.input_schema["required"]) == {"rows"}  # a name only to store it (save=false measures)
    assert {"before", "after", "method", "saved"} <= set(calibrate.output_schema["required"])
    assert set(tools["builtin__score"].input_schema["required"]) == {"texts", "question"}
    score_list = tools["builtin__score_list"]
    assert {"refs", "evaluator", "top_k", "max_concurrency"} <= set(score_list.input_schema["properties"])
    assert set(score_list.input_schema["required"]) == {"refs", "evaluator"}
    assert set(score_list.output_schema["required"]) == {
        "run_id", "evaluator", "total", "top_k", "winners", "ranked", "usage"
    }

    for name in ("builtin__rank", "builtin__rerank", "builtin__filter", "builtin__classify", "builtin__score"):
        assert tools[name].annotations.read_only_hint is True, name
    # score_list stamps every ref it scores in the artifact store; calibrate stores (and replaces) by name.
    assert score_list.annotations.read_only_hint is False
    assert score_list.annotations.destructive_hint is False
    assert calibrate.annotations.read_only_hint is False and calibrate.annotations.destructive_hint is True


def test_rank_rerank_and_filter_answer_with_structured_results():
    """Each read-only tool runs on the lexical backend and returns its JSON shape, checked by its output schema."""

    async def scenario(client: Client):
        rank = await client.call_tool("builtin__rank", {
            "items": ITEMS, "instructions": "Which page is about fleas?", "state": {"question": "flea life cycle"},
            "describe": "title", "top_k": 2, "model": "lexical",
        })
        documents = ["bread baking", {"id": "x", "text": "fleas and their life cycle"}]
        rerank = await client.call_tool("builtin__rerank", {
            "query": "flea life cycle", "documents": documents, "model": "lexical",
        })
        kept = await client.call_tool("builtin__filter", {
            "items": ITEMS, "question": "Is this page about fleas?", "state": {"question": "fleas"},
            "describe": "title", "min_confidence": 0.5, "model": "lexical",
        })
        return rank, rerank, kept

    rank, rerank, kept = with_stdio_client(scenario)
    assert not rank.is_error and not rerank.is_error and not kept.is_error

    assert rank.structured_content["items"][0]["title"] == "fleas and their life cycle"
    assert len(rank.structured_content["ranked"]) == 2
    assert rank.structured_content["ranked"][0]["index"] == 0
    assert rank.structured_content["model"] == "lexical:bm25"
    # Clients without structured content get the same JSON as text.
    assert json.loads(rank.content[0].text) == rank.structured_content

    assert rerank.structured_content["results"][0]["id"] == "x"
    assert rerank.structured_content["results"][0]["rank"] == 1

    data = kept.structured_content
    assert data["count"] + data["dropped_count"] == 3
    assert {"title": "fleas and their life cycle", "url": "a"} in data["items"]


def test_classify_score_and_stateless_rank_and_filter_answer_with_structured_results(isolated_user_dir):
    """classify and score take the same options as in Python (none, true/false, stored examples); rank and
    filter need no state."""
    decirank.ExampleStore().put(
        "reviews", [{"state": "a warm, funny film", "answer": True}, {"state": "a dull mess", "answer": False}]
    )

    async def scenario(client: Client):
        texts = ["the film was wonderful", "where is my parcel?"]
        classified = await client.call_tool("builtin__classify", {
            "texts": texts, "question": "What is this?", "options": {"review": "a film review"},
            "none": "anything else", "model": "local",
        })
        scored = await client.call_tool("builtin__score", {
            "texts": texts, "question": "Is this a positive film review?", "true": "a positive film review",
            "false": "anything else", "examples": "reviews", "model": "local",
        })
        ranked = await client.call_tool("builtin__rank", {
            "items": ITEMS, "instructions": "Which page is about fleas?", "describe": "title", "model": "lexical",
        })
        kept = await client.call_tool("builtin__filter", {
            "items": ITEMS, "question": "Is this page about fleas?", "describe": "title", "model": "lexical",
        })
        return classified, scored, ranked, kept

    classified, scored, ranked, kept = with_stdio_client(scenario)
    for result in (classified, scored, ranked, kept):
        assert not result.is_error, result.content
    decisions = classified.structured_content["decisions"]
    assert [d["choice"] for d in decisions] == ["review", "anything else"]
    assert set(decisions[0]["probabilities"]) == {"review", "anything else"}
    probabilities = scored.structured_content["probabilities"]
    assert len(probabilities) == 2 and probabilities[0] > probabilities[1]
    assert ranked.structured_content["items"][0]["title"] == "fleas and their life cycle"
    assert kept.structured_content["count"] + kept.structured_content["dropped_count"] == 3


def test_score_list_ranks_stored_artifacts_and_stamps_them(isolated_user_dir):
    """score_list resolves refs in the server's artifact store, validates them and leaves a stamp on each."""
    store = decirank.ArtifactStore()
    store.put("run1/good", '{"ok": true}')
    store.put("run1/bad", '{"ok": tru')

    async def scenario(client: Client):
        return await client.call_tool("builtin__score_list", {
            "refs": ["run1/bad", {"ref": "run1/good"}, "run1/missing"], "evaluator": "validate:json", "top_k": 1,
        })

    result = with_stdio_client(scenario)
    assert not result.is_error, result.content
    data = result.structured_content
    assert data["winners"] == ["run1/good"]
    assert data["total"] == 3 and data["top_k"] == 1
    verdicts = {entry["ref"]: entry["verdict"] for entry in data["ranked"]}
    assert verdicts == {"run1/good": "VALID", "run1/bad": "INVALID", "run1/missing": "UNKNOWN"}
    assert {stamp.ref for stamp in store.stamps(run_id=data["run_id"])} == {"run1/good", "run1/bad", "run1/missing"}


def test_exec_evaluators_run_only_when_the_operator_allows_them(isolated_user_dir, tmp_path):
    """An exec: evaluator is shell access: refused by default, run with --allow-exec."""
    decirank.ArtifactStore().put("run1/good", '{"ok": true}')
    marker = tmp_path / "ran"
    arguments = {"refs": ["run1/good"], "evaluator": f"exec:touch {marker} && python -m json.tool {{artifact}}"}

    async def scenario(client: Client):
        return await client.call_tool("builtin__score_list", arguments)

    refused = with_stdio_client(scenario)
    assert refused.is_error and "exec" in refused.content[0].text
    assert not marker.exists()
    allowed = with_stdio_client(scenario, "--allow-exec")
    assert not allowed.is_error, allowed.content
    assert allowed.structured_content["ranked"][0]["verdict"] == "VALID" and marker.exists()


def test_bad_input_is_an_error_result_naming_the_field_and_the_server_keeps_serving():
    """Wrong arguments come back as isError results with the typed message; the next call still works."""

    async def scenario(client: Client):
        not_a_list = await client.call_tool("builtin__rank", {
            "items": "fleas", "instructions": "Which?", "state": {}, "model": "lexical",
        })
        missing = await client.call_tool("builtin__filter", {"items": [1], "state": {}, "model": "lexical"})
        unknown_input = await client.call_tool("builtin__rerank", {
            "query": "q", "documents": [], "k": 3, "model": "lexical",
        })
        unknown_model = await client.call_tool("builtin__rank", {
            "items": ["a", "b"], "instructions": "Which?", "state": {}, "model": "lexicl",
        })
        unknown_tool = await client.call_tool("builtin__sort", {})
        still_fine = await client.call_tool("builtin__rerank", {"query": "q", "documents": [], "model": "lexical"})
        return not_a_list, missing, unknown_input, unknown_model, unknown_tool, still_fine

    not_a_list, missing, unknown_input, unknown_model, unknown_tool, still_fine = with_stdio_client(scenario)
    for result in (not_a_list, missing, unknown_input, unknown_model, unknown_tool):
        assert result.is_error
    assert not_a_list.content[0].text == "InvalidInputError: items: expected a list, got str 'fleas'"
    assert missing.content[0].text.startswith("InvalidInputError: question:")
    assert "k: expected one of builtin__rerank's inputs" in unknown_input.content[0].text
    assert unknown_model.content[0].text.startswith("UnknownModelError:")
    assert "lexical" in unknown_model.content[0].text  # the suggestion
    assert "builtin__rank" in unknown_tool.content[0].text
    assert not still_fine.is_error and still_fine.structured_content["results"] == []


def test_streamable_http_transport_serves_the_same_tools():
    """``decirank mcp --transport http`` listens on /mcp and answers a tool call."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "decirank", "mcp", "--transport", "http", "--port", str(port)]

    async def main():
        async with Client(f"{url}/mcp", read_timeout_seconds=60) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            result = await client.call_tool("builtin__rank", {
                "items": ["bread", "flea eggs"], "instructions": "Which is about fleas?", "state": "fleas",
                "model": "lexical",
            })
            return names, result

    # Any HTTP answer on /mcp (a plain GET is refused) means the server is up.
    with subprocess_server(command, url, ready_path="/mcp"):
        names, result = anyio.run(main)
    assert "builtin__rank" in names
    assert not result.is_error and result.structured_content["items"][0] == "flea eggs"


def test_filter_takes_examples_as_a_list_or_a_stored_set(isolated_user_dir):
    """builtin__filter's examples teach the embedded model; a set name is looked up in the server's store."""
    from decirank.stores.examples import ExampleStore
    from decirank.stores.runlog import current_runlog
    from tests.tools.test_filter_examples import EXAMPLES, ITEMS

    ExampleStore().put("tiny", [{"state": "dog", "answer": True}, {"state": "car", "answer": False}])

    async def scenario(client: Client):
        taught = await client.call_tool("builtin__filter", {
            "items": ITEMS, "question": "Does it match?", "state": None, "examples": EXAMPLES,
        })
        named = await client.call_tool("builtin__filter", {
            "items": ["cat"], "question": "Pet?", "state": None, "examples": "tiny", "model": "lexical",
        })
        unknown = await client.call_tool("builtin__filter", {
            "items": ["cat"], "question": "Pet?", "state": None, "examples": "dogs", "model": "lexical",
        })
        return taught, named, unknown

    taught, named, unknown = with_stdio_client(scenario)
    assert not taught.is_error, taught.content
    kept = taught.structured_content["items"]
    assert kept == ["my cat sleeps all day", "our puppy chews shoes", "a hamster in a wheel"]
    assert not named.is_error, named.content
    inputs = current_runlog().run(named.structured_content["run_id"])["inputs"]
    assert inputs["example_set"] == "tiny" and inputs["examples"][0] == {"state": "dog", "answer": True}
    assert unknown.is_error
    assert unknown.content[0].text.startswith("InvalidInputError: examples:")
    assert "known sets: tiny" in unknown.content[0].text


def test_nan_and_deep_arguments_are_refused_as_over_http():
    """NaN or Infinity in a tool's arguments, or nesting past the limit, is an error result naming the field."""
    from mcp import types

    from decirank.mcp.server import _tool_caller

    call = _tool_caller(False)

    async def ask(arguments: dict[str, Any]) -> types.CallToolResult:
        return await call(None, types.CallToolRequestParams(name="builtin__rank", arguments=arguments))

    base = {"items": ["a", "b"], "instructions": "Which?", "model": "lexical"}
    deep: Any = "x"
    for _ in range(100):
        deep = [deep]
    nan_item = anyio.run(ask, {**base, "items": ["a", float("nan")], "state": {}})
    infinite_state = anyio.run(ask, {**base, "state": {"limit": float("inf")}})
    too_deep = anyio.run(ask, {**base, "state": {"q": deep}})
    fine = anyio.run(ask, {**base, "state": {"q": "a"}})
    assert nan_item.is_error and nan_item.content[0].text.startswith("InvalidInputError: items.1: expected a finite")
    assert infinite_state.is_error and "state.limit: expected a finite number" in infinite_state.content[0].text
    assert too_deep.is_error and "at most 64 levels of nesting" in too_deep.content[0].text
    assert not fine.is_error


def test_streamable_http_with_an_api_key_refuses_requests_without_it():
    """``decirank mcp -t http --api-key K``: no key or a wrong one is a 401; with it the server answers."""
    import httpx

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "decirank", "mcp", "--transport", "http", "--port", str(port), "--api-key", "k1"]
    initialize = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }  # fmt: skip
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    with subprocess_server(command, url, ready_path="/mcp"):
        missing = httpx.post(f"{url}/mcp", json=initialize, headers=headers)
        wrong = httpx.post(f"{url}/mcp", json=initialize, headers={**headers, "authorization": "Bearer k2"})
        right = httpx.post(f"{url}/mcp", json=initialize, headers={**headers, "authorization": "Bearer k1"})
    assert (missing.status_code, wrong.status_code) == (401, 401)
    assert missing.headers["www-authenticate"] == "Bearer"
    assert right.status_code == 200, right.text


def test_calibrate_stores_a_calibration_that_filter_and_classify_then_take(isolated_user_dir):
    """builtin__calibrate fits and stores a calibration; builtin__filter's target and builtin__classify's coverage
    use it, each result checked by its output schema; a calibration for another question is an error result."""
    from tests.calibration_rows import KIND_QUESTION, KINDS, PET_QUESTION, PET_STATE, kind_rows, pet_rows

    items = ["a cat at noon", "a lamp by the door", "a puppy on the sofa"]

    async def scenario(client: Client):
        fitted = await client.call_tool("builtin__calibrate", {
            "name": "pets", "question": PET_QUESTION, "rows": pet_rows(), "state": PET_STATE, "model": "lexical",
        })
        kinds = await client.call_tool("builtin__calibrate", {
            "name": "kinds", "question": KIND_QUESTION, "tool": "classify", "options": KINDS, "rows": kind_rows(),
            "model": "lexical",
        })
        kept = await client.call_tool("builtin__filter", {
            "items": items, "question": PET_QUESTION, "state": PET_STATE, "calibration": "pets",
            "target_recall": 0.8, "model": "lexical",
        })
        classified = await client.call_tool("builtin__classify", {
            "texts": items, "question": KIND_QUESTION, "options": KINDS, "calibration": "kinds", "coverage": 0.8,
            "model": "lexical",
        })
        refused = await client.call_tool("builtin__filter", {
            "items": items, "question": "Is this a vehicle?", "calibration": "pets", "model": "lexical",
        })
        return fitted, kinds, kept, classified, refused

    fitted, kinds, kept, classified, refused = with_stdio_client(scenario)
    assert not fitted.is_error, fitted.content
    summary = fitted.structured_content
    assert summary["name"] == "pets" and summary["saved"] and summary["rows"] == 40
    assert summary["model"] == "lexical:bm25" and summary["method"] in summary["cross_validated_log_loss"]
    assert decirank.CalibrationStore().get("pets").summary() == {
        key: value for key, value in summary.items() if key not in ("saved", "usage")
    }
    assert not kinds.is_error and kinds.structured_content["tool"] == "classify"

    assert not kept.is_error, kept.content
    data = kept.structured_content
    assert data["calibration"] == "pets" and data["promise"]["target_recall"] == 0.8
    assert data["items"] == ["a cat at noon", "a puppy on the sofa"]
    assert all("raw_probability" in decision for decision in data["decisions"])

    assert not classified.is_error, classified.content
    assert classified.structured_content["coverage"]["coverage"] == 0.8
    assert all(decision["prediction_set"] for decision in classified.structured_content["decisions"])

    assert refused.is_error
    assert refused.content[0].text.startswith("InvalidInputError: calibration: expected a calibration fitted for this")

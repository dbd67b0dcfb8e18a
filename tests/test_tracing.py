"""OpenTelemetry spans of tool calls and model calls, caught by the SDK's in-memory exporter."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap

import pytest

import decirank
from decirank.errors import AllModelsFailedError, ConfigError, ServerError
from decirank.testing import ScriptedBackend, use_backend
from decirank.types.answers import Usage

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

ITEMS = [{"title": "flea treatment for dogs"}, {"title": "sourdough bread"}, {"title": "cats with fleas"}]
DOCUMENTS = ["a dog with fleas", "a loaf of bread"]


class Alpha(ScriptedBackend):
    provider = "alpha"


class Beta(ScriptedBackend):
    provider = "beta"


def _global_exporter() -> InMemorySpanExporter:
    """The process's TracerProvider can be set once: use the one there is, or set an SDK one, and listen to it."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


EXPORTER = _global_exporter()


@pytest.fixture
def spans(monkeypatch):
    """Tracing on through the environment; returns a function giving the spans finished so far."""
    monkeypatch.setenv("DECIRANK_TRACING", "on")
    EXPORTER.clear()
    yield lambda: list(EXPORTER.get_finished_spans())
    EXPORTER.clear()


@pytest.fixture
def models():
    """Register scripted backends under their own providers for one test."""
    with contextlib.ExitStack() as stack:
        yield lambda *backends: [stack.enter_context(use_backend(backend)) for backend in backends]


def tool_and_model_spans(finished):
    (tool,) = [span for span in finished if span.name.startswith("execute_tool ")]
    calls = sorted((span for span in finished if span.name.startswith("decide ")), key=lambda s: s.start_time)
    return tool, calls


def test_a_rank_is_a_tool_span_with_a_model_call_child(spans):
    """rank with lexical: one tool span (tool, items, run id, usage) and its model call as a child, GenAI attributes."""
    result = decirank.rank(ITEMS, "Which is about fleas?", {"question": "fleas"}, describe="title", model="lexical")
    tool, calls = tool_and_model_spans(spans())
    assert len(calls) == 1
    (call,) = calls

    assert tool.name == "execute_tool rank"
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["decirank.tool"] == "rank"
    assert tool.attributes["decirank.items"] == 3
    assert tool.attributes["decirank.run_id"] == result.run_id
    assert tool.attributes["decirank.role"] == "lexical"
    assert tool.attributes["decirank.status"] == "success"
    assert tool.attributes["decirank.models"] == result.model
    assert tool.attributes["gen_ai.usage.input_tokens"] == result.usage.input_tokens
    assert tool.status.status_code is StatusCode.OK

    assert call.name == "decide lexical:bm25"
    assert call.parent is not None and call.parent.span_id == tool.context.span_id
    assert call.context.trace_id == tool.context.trace_id
    assert call.kind is trace.SpanKind.CLIENT
    assert call.attributes["gen_ai.operation.name"] == "decide"
    assert call.attributes["gen_ai.provider.name"] == call.attributes["gen_ai.system"] == "lexical"
    assert call.attributes["gen_ai.request.model"] == "bm25"
    assert call.attributes["gen_ai.usage.input_tokens"] == result.usage.input_tokens > 0
    assert call.attributes["gen_ai.usage.output_tokens"] == result.usage.output_tokens
    assert call.attributes["decirank.cost"] == result.usage.cost
    assert call.attributes["decirank.tool"] == "rank"
    assert call.attributes["decirank.run_id"] == result.run_id
    assert call.attributes["decirank.chunk"] == 1 and call.attributes["decirank.attempt"] == 1
    assert call.attributes["decirank.status"] == "success"
    assert call.status.status_code is StatusCode.OK
    assert tool.start_time <= call.start_time <= call.end_time <= tool.end_time


def test_a_rerank_with_the_embedded_model_is_traced(spans):
    """rerank with local: a model-call span per call, with the local model's tokens."""
    pytest.importorskip("decirank.backends.local")
    result = decirank.rerank("fleas", DOCUMENTS, model="local")
    tool, calls = tool_and_model_spans(spans())
    assert tool.name == "execute_tool rerank" and tool.attributes["decirank.items"] == 2
    assert [call.attributes["gen_ai.provider.name"] for call in calls] == ["local"]
    assert sum(call.attributes["gen_ai.usage.input_tokens"] for call in calls) == result.usage.input_tokens


def test_a_failover_shows_both_attempts(spans, models, monkeypatch):
    """The first model fails with a 5xx and the next answers: two model-call spans, attempts 1 and 2, one failed."""
    usage = Usage(input_tokens=12, output_tokens=1, cost=0.002, calls=1)
    models(Alpha("one", error=ServerError("upstream 503")), Beta("one", usage=usage))
    monkeypatch.setenv("DECIRANK_ROLE_CHAIN", "alpha:one,beta:one")
    result = decirank.rerank("fleas", DOCUMENTS, model="chain")
    assert result.model == "beta:one"

    tool, calls = tool_and_model_spans(spans())
    assert [call.name for call in calls] == ["decide alpha:one", "decide beta:one"]
    failed, answered = calls
    assert all(call.parent.span_id == tool.context.span_id for call in calls)
    assert [call.attributes["decirank.attempt"] for call in calls] == [1, 2]
    assert [call.attributes["decirank.chunk"] for call in calls] == [1, 1]

    assert failed.attributes["decirank.status"] == "failed"
    assert failed.attributes["error.type"] == "ServerError"
    assert failed.status.status_code is StatusCode.ERROR and "upstream 503" in failed.status.description
    assert [event.name for event in failed.events] == ["exception"]
    assert failed.attributes["gen_ai.usage.input_tokens"] == 0

    assert answered.attributes["decirank.status"] == "success"
    assert answered.attributes["gen_ai.provider.name"] == "beta"
    assert answered.attributes["gen_ai.request.model"] == "one"
    assert answered.attributes["gen_ai.usage.input_tokens"] == 12
    assert answered.attributes["decirank.cost"] == pytest.approx(0.002)
    assert answered.attributes["decirank.currency"] == "USD"
    assert tool.status.status_code is StatusCode.OK
    assert tool.attributes["decirank.role"] == "chain"
    assert tool.attributes["decirank.cost"] == pytest.approx(0.002)


def test_a_failed_tool_call_is_an_error_span(spans, models, monkeypatch):
    """Every model fails: each attempt and the tool call itself are error spans naming the error type."""
    models(Alpha("one", error=ServerError("down")), Beta("one", error=ServerError("down too")))
    monkeypatch.setenv("DECIRANK_ROLE_CHAIN", "alpha:one,beta:one")
    with pytest.raises(AllModelsFailedError):
        decirank.rerank("fleas", DOCUMENTS, model="chain")
    tool, calls = tool_and_model_spans(spans())
    assert [call.status.status_code for call in calls] == [StatusCode.ERROR, StatusCode.ERROR]
    assert tool.status.status_code is StatusCode.ERROR
    assert tool.attributes["decirank.status"] == "failed"
    assert tool.attributes["error.type"] == "AllModelsFailedError"


def test_chunks_are_numbered(spans, models):
    """A rank split into chunks: each chunk's call and the final choice carry their own decirank.chunk."""
    model = models(ScriptedBackend("chunky", limits=decirank.ModelLimits(max_options=4)))[0]
    decirank.rank([{"n": n} for n in range(7)], "Which?", {"q": "x"}, model=model)
    _, calls = tool_and_model_spans(spans())
    assert len(calls) >= 3
    assert sorted(call.attributes["decirank.chunk"] for call in calls) == list(range(1, len(calls) + 1))


def test_the_tool_span_is_a_child_of_the_callers_span(spans):
    """Spans go to the global TracerProvider, under whatever span the application has open."""
    with trace.get_tracer("app").start_as_current_span("handle request") as outer:
        decirank.rerank("fleas", DOCUMENTS, model="lexical")
    tool, _ = tool_and_model_spans(spans())
    assert tool.parent is not None and tool.parent.span_id == outer.get_span_context().span_id


def test_the_config_file_enables_tracing_and_the_environment_wins(spans, tmp_path, monkeypatch):
    """[tracing] enabled = true turns it on; DECIRANK_TRACING=off turns it off whatever the file says."""
    config = tmp_path / "config.toml"
    config.write_text("[tracing]\nenabled = true\n")
    monkeypatch.setenv("DECIRANK_CONFIG", str(config))
    monkeypatch.delenv("DECIRANK_TRACING")
    decirank.rerank("fleas", DOCUMENTS, model="lexical")
    assert [span.name for span in spans()] == ["decide lexical:bm25", "execute_tool rerank"]

    EXPORTER.clear()
    monkeypatch.setenv("DECIRANK_TRACING", "off")
    decirank.rerank("fleas", DOCUMENTS, model="lexical")
    assert spans() == []


def test_disabled_by_default_emits_nothing(spans, monkeypatch):
    """No variable and no config: no span, even with a TracerProvider listening."""
    monkeypatch.delenv("DECIRANK_TRACING")
    decirank.rank(ITEMS, "Which is about fleas?", {"question": "fleas"}, describe="title", model="lexical")
    assert spans() == []


def test_a_bad_setting_is_a_config_error(monkeypatch):
    """DECIRANK_TRACING takes on or off; anything else is a ConfigError naming it."""
    monkeypatch.setenv("DECIRANK_TRACING", "sometimes")
    with pytest.raises(ConfigError, match="DECIRANK_TRACING"):
        decirank.rerank("fleas", DOCUMENTS, model="lexical")


def test_disabled_tracing_never_imports_opentelemetry(tmp_path):
    """In a fresh process, tools run with tracing off leave opentelemetry unimported."""
    script = textwrap.dedent(
        """
        import sys
        import decirank
        decirank.rank([{"t": "a"}, {"t": "b"}], "Which?", {"q": "a"}, model="lexical")
        decirank.rerank("a", ["a", "b"], model="lexical")
        loaded = sorted(name for name in sys.modules if name.split(".")[0] == "opentelemetry")
        assert not loaded, loaded
        print("clean")
        """
    )
    env = {
        name: value for name, value in os.environ.items() if name not in ("DECIRANK_TRACING", "DECIRANK_CONFIG")
    }
    env["DECIRANK_HOME"] = str(tmp_path / "home")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "clean"

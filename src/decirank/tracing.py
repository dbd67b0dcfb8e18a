"""OpenTelemetry spans for tool calls and their model calls, when tracing is enabled.

Off by default: nothing is emitted and ``opentelemetry`` is not even imported
unless ``DECIRANK_TRACING=on`` (``off`` wins over the config) or the config
file says::

    [tracing]
    enabled = true

Spans go to the globally configured ``TracerProvider``, so the application
chooses the exporter (``opentelemetry-sdk`` with an OTLP exporter, or
``opentelemetry-instrument`` with the ``OTEL_*`` variables); with none set
the spans go nowhere. Install with ``pip install 'decirank[tracing]'``.

Each tool call (:class:`~decirank.decisions.toolcall.ToolCall`) is one span,
``execute_tool <tool>``, current while the tool works, so spans made inside it
(an instrumented HTTP client's) are its children. Each model call, every
failover attempt and cache hit included, is a child span ``decide <model>``
with the attempt's own start and duration. Attributes follow the OpenTelemetry
GenAI semantic conventions where they fit (``gen_ai.operation.name``,
``gen_ai.provider.name`` and the older ``gen_ai.system``,
``gen_ai.request.model``, ``gen_ai.usage.input_tokens``/``output_tokens``,
``error.type``) plus decirank's own: ``decirank.tool``, ``decirank.role``,
``decirank.items``, ``decirank.chunk`` (which of the tool call's decisions,
1 first), ``decirank.attempt``, ``decirank.run_id`` (the run log's id of the
tool call), ``decirank.status``, ``decirank.cost`` and ``decirank.currency``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._config import switch
from .errors import ConfigError

if TYPE_CHECKING:  # never imported at run time unless tracing is on
    from .decisions.failover import Attempt
    from .types.answers import Usage

__all__ = ["ENVIRONMENT_VARIABLE", "TRACER_NAME", "ToolSpan", "start_tool_span", "tracing_enabled"]

ENVIRONMENT_VARIABLE = "DECIRANK_TRACING"
TRACER_NAME = "decirank"

# The input lists whose length is a tool call's decirank.items, by the tools' argument names.
_LISTS = ("items", "documents", "refs")


def tracing_enabled() -> bool:
    """``DECIRANK_TRACING`` (on or off) when set, else the config's ``[tracing] enabled``, else off."""
    return switch(ENVIRONMENT_VARIABLE, lambda config: config.tracing_enabled)


def start_tool_span(
    tool: str, *, run_id: str, role: str | None, inputs: Mapping[str, Any] | None = None
) -> ToolSpan | None:
    """The span of one tool call, started and made current; None (and nothing imported) when tracing is off."""
    if not tracing_enabled():
        return None
    return ToolSpan(tool, run_id=run_id, role=role, inputs=inputs)


_tracer: Any = None


def _get_tracer() -> Any:
    """decirank's tracer, got once (the API's proxy follows a TracerProvider set later)."""
    global _tracer
    if _tracer is None:
        try:
            from opentelemetry import trace
        except ImportError:
            raise ConfigError(
                f"tracing is enabled ({ENVIRONMENT_VARIABLE} or [tracing] in the config) but OpenTelemetry is not "
                "installed: pip install 'decirank[tracing]'"
            ) from None
        from . import __version__

        _tracer = trace.get_tracer(TRACER_NAME, __version__)
    return _tracer


def _count(inputs: Mapping[str, Any] | None) -> int | None:
    for name in _LISTS:
        value = (inputs or {}).get(name)
        if isinstance(value, list | tuple):
            return len(value)
    return None


def _attributes(values: Mapping[str, Any]) -> dict[str, Any]:
    """Span attributes without the unknown (None) ones, which OpenTelemetry refuses."""
    return {key: value for key, value in values.items() if value is not None}


def _usage_attributes(usage: Usage) -> dict[str, Any]:
    return {
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        **({"gen_ai.usage.cache_read.input_tokens": usage.cached_tokens} if usage.cached_tokens else {}),
        **({"decirank.cost": usage.cost, "decirank.currency": usage.currency} if usage.cost is not None else {}),
    }


def _nanoseconds(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


class ToolSpan:
    """One tool call's span; :meth:`model_call` adds each attempt, :meth:`end` closes it."""

    def __init__(self, tool: str, *, run_id: str, role: str | None, inputs: Mapping[str, Any] | None) -> None:
        self._tracer = _get_tracer()
        from opentelemetry import context, trace

        self._trace = trace
        self._context = context
        self.run_id = run_id
        self.tool = tool
        self.span = self._tracer.start_span(
            f"execute_tool {tool}",
            kind=trace.SpanKind.INTERNAL,
            attributes=_attributes({
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool,
                "decirank.tool": tool,
                "decirank.role": role,
                "decirank.run_id": run_id,
                "decirank.items": _count(inputs),
            }),
        )
        self._token = context.attach(trace.set_span_in_context(self.span))

    def model_call(self, chunk: int, attempt: Attempt) -> None:
        """A finished model attempt (or cache hit) as a child span with its own start and duration."""
        trace = self._trace
        start = _nanoseconds(attempt.started)
        provider = attempt.provider
        span = self._tracer.start_span(
            f"decide {attempt.model}",
            context=trace.set_span_in_context(self.span),
            kind=trace.SpanKind.CLIENT,
            start_time=start,
            attributes={
                **_attributes({
                    "gen_ai.operation.name": "decide",
                    "gen_ai.provider.name": provider,
                    "gen_ai.system": provider,
                    "gen_ai.request.model": attempt.model.partition(":")[2] or attempt.model,
                    "gen_ai.response.model": attempt.response.model if attempt.response is not None else None,
                    "decirank.tool": self.tool,
                    "decirank.model": attempt.model,
                    "decirank.run_id": self.run_id,
                    "decirank.chunk": chunk,
                    "decirank.attempt": attempt.number,
                    "decirank.questions": len(attempt.request.questions),
                    "decirank.cached": attempt.cached,
                    "decirank.status": attempt.status,
                }),
                **_usage_attributes(attempt.usage),
            },
        )
        self._close(span, attempt.status, attempt.error, end_time=start + _nanoseconds(attempt.duration))

    def end(self, status: str, error: BaseException | None, *, usage: Usage, models: str | None) -> None:
        """Close the tool call's span with its outcome and the usage of all its model calls."""
        self.span.set_attributes(
            {**_attributes({"decirank.status": status, "decirank.models": models}), **_usage_attributes(usage)}
        )
        try:
            self._context.detach(self._token)
        finally:
            self._close(self.span, status, error)

    def _close(self, span: Any, status: str, error: BaseException | None, *, end_time: int | None = None) -> None:
        trace = self._trace
        if status == "failed":
            if error is not None:
                span.set_attribute("error.type", type(error).__name__)
                span.record_exception(error, timestamp=end_time)
            span.set_status(trace.Status(trace.StatusCode.ERROR, str(error) if error is not None else None))
        elif status == "success":
            span.set_status(trace.Status(trace.StatusCode.OK))
        span.end(end_time=end_time)

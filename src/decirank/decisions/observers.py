"""Watching model calls as they end, for whoever counts them (the server's /metrics).

The run log and tracing see every attempt already; an observer is for a
surface that keeps its own figures. It is a context variable, set around a
piece of work (an HTTP request), so concurrent work in one process, or two
servers in one test process, each report to their own; with none set, a
model call costs nothing extra.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Protocol

from .failover import Attempt

__all__ = ["CallObserver", "current_observer", "observed_by"]


class CallObserver(Protocol):
    def model_call(self, tool: str, attempt: Attempt, *, cache_on: bool) -> None:
        """One model attempt of ``tool`` ended (a cache hit included); ``cache_on``: the decision cache was asked."""


_observer: ContextVar[CallObserver | None] = ContextVar("decirank_call_observer", default=None)


def current_observer() -> CallObserver | None:
    return _observer.get()


@contextlib.contextmanager
def observed_by(observer: CallObserver | None) -> Iterator[None]:
    """Model calls made inside (and in tasks started inside) are reported to ``observer``."""
    token = _observer.set(observer)
    try:
        yield
    finally:
        _observer.reset(token)

"""Sync twins run the async implementation on one background event loop.

The logic of every tool is written once, as a coroutine. A sync call submits
it to a private loop in a daemon thread and waits; this works the same from
plain scripts, from threads, and from code already inside an event loop
(where ``asyncio.run`` would refuse). Ctrl-C while waiting cancels the work,
so it is recorded as cancelled rather than left running; work cancelled on
the loop by anything else ends the call with :class:`~decirank.errors.CancelledError`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from .errors import CancelledError

__all__ = ["run_sync", "sync_twin"]

P = ParamSpec("P")
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

_loop: asyncio.AbstractEventLoop | None = None
_lock = threading.Lock()


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="decirank-loop", daemon=True).start()
            _loop = loop
        return _loop


#: Seconds a Ctrl-C waits for the cancelled work to end (and be recorded as cancelled) before it is raised.
CANCEL_WAIT = 5.0


def run_sync(function: Callable[P, Coroutine[Any, Any, T]], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run ``function(*args, **kwargs)`` to completion and return its result."""
    ended = threading.Event()

    async def run() -> T:
        try:
            return await function(*args, **kwargs)
        finally:
            ended.set()

    future = asyncio.run_coroutine_threadsafe(run(), _background_loop())
    try:
        return future.result()
    except KeyboardInterrupt:
        future.cancel()
        # The loop is a daemon thread: a process exiting at once would end it before the
        # cancelled work had closed its run, which would stay "running" in the run log.
        ended.wait(CANCEL_WAIT)
        raise
    except concurrent.futures.CancelledError as error:
        raise CancelledError(f"{function.__name__} was cancelled before it finished") from error


def sync_twin(coroutine_function: Callable[..., Any]) -> Callable[[F], F]:
    """Give the decorated sync twin the full documentation of ``coroutine_function``, then its own.

    ``help(decirank.filter)`` should explain the tool, not only point at ``afilter``.
    """

    def decorate(function: F) -> F:
        parts = [inspect.cleandoc(doc) for doc in (coroutine_function.__doc__, function.__doc__) if doc]
        function.__doc__ = "\n\n".join(parts)
        return function

    return decorate

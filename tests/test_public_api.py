"""The public namespace is small and deliberate, and sync calls work from inside an event loop."""

from __future__ import annotations

import asyncio
from types import ModuleType

import pytest

import decirank
from decirank._sync import run_sync


def test_exported_members_are_all_listed():
    """Every public name of the package is in ``__all__`` and every name in ``__all__`` exists.

    Subpackages become attributes once something imports them, so modules are left out.
    """
    public = {
        name
        for name, value in vars(decirank).items()
        if not name.startswith("_") and not isinstance(value, ModuleType) and name != "annotations"
    }
    assert public == set(decirank.__all__) - {"__version__"}


def test_every_top_level_branch_of_the_error_tree_is_exported():
    """A caller can catch each direct kind of DecirankError from the flat namespace."""
    branches = {cls.__name__ for cls in decirank.DecirankError.__subclasses__() if cls.__module__ == "decirank.errors"}
    assert branches <= set(decirank.__all__)


def test_sync_twin_works_inside_a_running_event_loop():
    """A sync tool called from a coroutine runs on the background loop instead of refusing."""

    async def caller():
        return decirank.rank(["fleas", "bread"], "Which?", {"q": "fleas"}, model="lexical").items

    assert asyncio.run(caller())[0] == "fleas"


def test_work_cancelled_on_the_background_loop_is_a_typed_error():
    """A sync call whose work is cancelled raises decirank's CancelledError, not a foreign one."""

    async def cancelled_from_within():
        asyncio.current_task().cancel()
        await asyncio.sleep(10)

    with pytest.raises(decirank.CancelledError, match="cancelled before it finished"):
        run_sync(cancelled_from_within)

"""The public namespace is small and deliberate, and sync calls work from inside an event loop."""

from __future__ import annotations

import asyncio

import decirank


def test_exported_members_are_all_listed():
    public = {name for name in vars(decirank) if not name.startswith("_")}
    modules = {"backends", "decisions", "errors", "tools", "testing", "evaluation", "cli", "stores", "plans", "server", "mcp_server", "mcp"}
    assert public - modules - {"annotations"} == set(decirank.__all__) - {"__version__"}


def test_sync_twin_works_inside_a_running_event_loop():
    async def caller():
        return decirank.rank(["fleas", "bread"], "Which?", {"q": "fleas"}, model="lexical").items

    assert asyncio.run(caller())[0] == "fleas"

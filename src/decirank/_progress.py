"""A progress bar for a long tool call, drawn on stderr when it is a terminal and the caller asked for one."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["Advance", "progress_bar"]

#: Moves a bar on by a number of finished questions.
Advance = Callable[[int], None]


@contextmanager
def progress_bar(label: str, total: int, *, enabled: bool) -> Iterator[Advance | None]:
    """Yields the function that moves the bar on, or None when no bar is drawn.

    Libraries stay quiet by default, so a bar is drawn only when ``enabled`` (``show_progress=True``),
    and then only on a terminal: a log file gets nothing.
    """
    if not enabled:
        yield None
        return
    # Imported here: most calls draw no bar, and rich.progress is slow to import.
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    console = Console(stderr=True, markup=False)
    with Progress(
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    ) as progress:
        task = progress.add_task(label, total=total)
        yield lambda done: progress.advance(task, done)

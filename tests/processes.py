"""Whether test processes are still running, read from ``/proc`` (Linux)."""

from __future__ import annotations

import os
import time


def is_running(pid: int) -> bool:
    """Alive and not a zombie: a killed orphan may wait a moment for its reaper.

    The process can be reaped between opening its stat file and reading it; the read then fails
    with ESRCH, which means gone just as a missing file does.
    """
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def wait_until_gone(pids: list[int], seconds: float = 5.0) -> list[int]:
    """The ``pids`` still running after up to ``seconds`` (none, as soon as all are gone)."""
    deadline = time.monotonic() + seconds
    while (alive := [pid for pid in pids if is_running(pid)]) and time.monotonic() < deadline:
        time.sleep(0.02)
    return alive


def marked(marker: str) -> list[int]:
    """The live processes (other than this one) whose command line holds ``marker``."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and name != str(os.getpid()):
            try:
                with open(f"/proc/{name}/cmdline", "rb") as cmdline:
                    if marker.encode() in cmdline.read() and is_running(int(name)):
                        found.append(int(name))
            except OSError:
                continue
    return found

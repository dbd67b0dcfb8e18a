"""``exec:<command>``: ground truth from a shell command's exit status.

The artifact (outer code fence stripped) is written to a file in a fresh
temporary folder, which is also the command's working directory. The command
sees the file as ``{artifact}`` (replaced by the file's shell-quoted path) and
as ``$ARTIFACT``; the artifact's text never reaches the shell. Exit status 0
scores 1.0 (VALID), anything else 0.0 (INVALID) with the last lines of output
as issues.

The command runs in its own process group, and on Linux under a child
subreaper (``_reaper.py``), so that a descendant that leaves the group
(``setsid``, a double fork) stays within reach. When the command ends, runs
out of time, or its caller is cancelled (a client that went away), every
process it started is killed, so children it left behind (or that were
still running at the timeout) go with it; the subreaper also ends them when
the process that ran it dies. A server shutting down stops the commands
still running at once (:func:`stop_running_commands`): they are UNKNOWN,
not judged. Only the last 64 KiB of output are kept.

The subreaper runs as the command's own user, so the command can kill or
stop it (``kill -9 $PPID``); what it started would then be reparented to
init, out of reach. A server (``decirank serve``, ``decirank mcp``) closes
that gap with :func:`adopt_orphans`: it becomes the subreaper above them, so
such orphans come to it, and every command's end kills, before the call
returns, every process left in the command's session (each command's
subreaper leads a session of its own) and the whole tree below each child of
the server that is not a running command's subreaper: all of them in one
pass, however deep the chain, not one level at a time. That sweep runs in a
worker thread, never on the event loop, so a thousand processes to end hold
up no other request. A
stopped subreaper is sent SIGCONT with its SIGTERM, and killed outright
after :data:`STOP_GRACE_SECONDS`. Without it (the Python API, where the
caller's process may have children of its own), the guarantee is the
subreaper's: everything the command starts dies with it, unless the command
kills or stops the subreaper itself.

Each run is limited to its own timeout and, within a tool call that has a
time budget (:meth:`ExecEvaluator.within`), to what is left of that budget: a
command cut short by the budget, or never started because the budget was
spent, is UNKNOWN (not scored), since the artifact was not judged.
"""

from __future__ import annotations

import contextlib
import math
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import anyio
from anyio.abc import ByteReceiveStream, Process

from ...decisions.toolcall import ToolCall
from ._reaper import PR_SET_CHILD_SUBREAPER, process_table
from .base import BoundedEvaluator, Evaluation, Verdict, strip_code_fence

__all__ = [
    "DEFAULT_EXEC_TIMEOUT",
    "adopt_orphans",
    "OUTPUT_LIMIT",
    "CommandOutcome",
    "ExecEvaluator",
    "run_command",
    "stop_running_commands",
]

DEFAULT_EXEC_TIMEOUT = 300.0
OUTPUT_LIMIT = 64 * 1024
ISSUE_LINES = 10
ISSUE_LINE_LENGTH = 500
# Once the command's group is killed its output pipe closes at once; this only
# bounds the wait for a process that left the group and still holds the pipe.
DRAIN_GRACE_SECONDS = 1.0
PLACEHOLDER = "{artifact}"

# Commands such as ``pytest {artifact}`` or ``node {artifact}`` care about the
# file's extension; a fence's language says which one the artifact wants.
_EXTENSIONS = {
    "python": ".py", "py": ".py", "json": ".json", "yaml": ".yaml", "yml": ".yaml", "toml": ".toml",
    "javascript": ".js", "js": ".js", "typescript": ".ts", "ts": ".ts", "sh": ".sh", "bash": ".sh",
    "shell": ".sh", "sql": ".sql", "html": ".html", "markdown": ".md", "md": ".md", "rust": ".rs",
    "go": ".go", "c": ".c", "cpp": ".cpp", "java": ".java", "ruby": ".rb",
}  # fmt: skip


def artifact_file_name(language: str | None) -> str:
    return "artifact" + _EXTENSIONS.get(language or "", ".txt")


@dataclass(frozen=True)
class CommandOutcome:
    #: The exit status; negative when a signal ended the command.
    returncode: int
    #: stdout and stderr together, the last :data:`OUTPUT_LIMIT` bytes of them.
    output: str
    timed_out: bool
    #: Whether earlier output was dropped to keep within the limit.
    truncated: bool
    #: Whether :func:`stop_running_commands` ended it (a server shutting down).
    stopped: bool = False


class _OutputTail:
    """The last ``limit`` bytes of a stream: a failure's cause is usually at the end."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.truncated = False

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        if len(self.data) > self.limit:
            del self.data[: len(self.data) - self.limit]
            self.truncated = True

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


async def _drain(stream: ByteReceiveStream, tail: _OutputTail, drained: anyio.Event) -> None:
    # Reading all along keeps a chatty command from blocking on a full pipe.
    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
        async for chunk in stream:
            tail.add(chunk)
    drained.set()


def _kill_group(group_id: int) -> None:
    # The group may be gone already (nothing left behind): that is the good case.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group_id, signal.SIGKILL)


_REAPER = Path(__file__).with_name("_reaper.py")
#: Whether commands run under the subreaper: it needs Linux's prctl and /proc.
SUBREAPER = sys.platform == "linux"
# How long the subreaper may take to end what a command started before its group is killed outright.
STOP_GRACE_SECONDS = 5.0

#: The cancel scopes of the commands running in this process, for a server's shutdown to stop.
_RUNNING: set[anyio.CancelScope] = set()

#: Whether this process is the subreaper of its commands' orphans (:func:`adopt_orphans`).
_adopting = False
#: The subreapers running commands now, which the sweep of orphans leaves alone.
_REAPERS: set[int] = set()
#: Held while a subreaper is started and registered, and while the sweep looks for orphans and kills them:
#: a subreaper just forked, not yet in :data:`_REAPERS`, is never taken for an orphan.
_SPAWNING = threading.Lock()
#: The sessions of commands that have ended (a subreaper's pid is its session's id), whose processes the
#: sweep kills. Linux gives no new process a pid that still names a live session, so an id here names no
#: other process's session while any process is left in it; it is dropped once none is.
_ENDED_SESSIONS: set[int] = set()
#: The most seconds one sweep goes on killing, should processes keep forking faster than they die.
SWEEP_SECONDS = 10.0


def adopt_orphans() -> bool:
    """Make this process the child subreaper of what its ``exec:`` commands leave; whether it now is.

    For a process that starts no children but its commands' subreapers (a
    server): from then on every child that is not one of them is an orphan of
    a command whose subreaper was killed, and each command's end kills it.
    """
    global _adopting
    if not SUBREAPER or _adopting:
        return _adopting
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    _adopting = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    return _adopting


def _end_orphans() -> None:
    """Kill and reap what ended commands left: every process in their sessions, and the whole tree below each
    child of this process that is not a running command's subreaper; until none is left.

    Each round kills every such process it sees at once, so a chain a
    thousand deep goes in one round, not a thousand; a process that forked
    between the look and the kill leaves a child for the next round. A
    killed process's children come to this subreaper, dead or alive, and are
    reaped here by their own pid, never ``waitpid(-1)``, which would take a
    subreaper's status from the event loop's child watcher.
    """
    me = os.getpid()
    deadline = time.monotonic() + SWEEP_SECONDS
    while True:
        with _SPAWNING:
            table = process_table()
            sessions = set(_ENDED_SESSIONS)
            below: dict[int, list[int]] = {}
            for pid, (parent, _, _) in table.items():
                below.setdefault(parent, []).append(pid)
            orphans = [pid for pid in below.get(me, ()) if pid not in _REAPERS]
            # A running command's processes are in its subreaper's session: never touched.
            running = {pid for pid, (_, session, _) in table.items() if session in _REAPERS} | _REAPERS
            roots = orphans + [pid for pid, (_, session, _) in table.items() if session in sessions]
            doomed: set[int] = set()
            while roots:
                pid = roots.pop()
                if pid not in doomed and pid not in running and pid != me:
                    doomed.add(pid)
                    roots.extend(below.get(pid, ()))
            for pid in doomed:
                if not table[pid][2]:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
        for pid in orphans:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        with _SPAWNING:
            _ENDED_SESSIONS.difference_update(
                sessions - {session for _, session, _ in table.values()}
            )
        if not doomed or time.monotonic() > deadline:
            return
        time.sleep(0.002)


async def _sweep_orphans(session: int) -> None:
    if not _adopting:
        return
    with _SPAWNING:
        _ENDED_SESSIONS.add(session)
    with anyio.CancelScope(shield=True):
        # In a thread: a deep tree takes long to end, and the event loop answers other requests meanwhile.
        await anyio.to_thread.run_sync(_end_orphans)


def stop_running_commands() -> int:
    """Stop every ``exec:`` command running in this process now; how many there were.

    For a server that is shutting down: call it on the event loop the commands run on.
    """
    running = list(_RUNNING)
    for scope in running:
        scope.cancel()
    return len(running)


def _argv(command: str) -> list[str]:
    if SUBREAPER:
        return [sys.executable, "-I", "-S", str(_REAPER), str(os.getpid()), command]
    return ["/bin/sh", "-c", command]


async def _stop(process: Process) -> None:
    """End the command and everything it started, and wait for that (the caller may be cancelled)."""
    with anyio.CancelScope(shield=True):
        if SUBREAPER and process.returncode is None:
            # The subreaper kills what it inherited, which the group may no longer hold, then exits.
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
                os.kill(process.pid, signal.SIGCONT)  # a command may have stopped its subreaper
            with anyio.move_on_after(STOP_GRACE_SECONDS):
                await process.wait()
        _kill_group(process.pid)


async def run_command(command: str, *, cwd: Path, env: Mapping[str, str], timeout: float) -> CommandOutcome:
    """Run ``command`` with ``/bin/sh`` in its own process group, ending all it started at the end.

    Raises ``OSError`` when the command cannot be started at all.
    """
    tail = _OutputTail(OUTPUT_LIMIT)
    # Taken in a thread: a sweep holds it for a round, and the event loop must not wait on it.
    await anyio.to_thread.run_sync(_SPAWNING.acquire)
    try:
        process = await anyio.open_process(
            _argv(command),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
        _REAPERS.add(process.pid)
        _ENDED_SESSIONS.discard(process.pid)  # the pid of a session emptied since, now this command's
    finally:
        _SPAWNING.release()
    assert process.stdout is not None
    stopped = anyio.CancelScope()
    _RUNNING.add(stopped)
    try:
        with stopped:
            async with anyio.create_task_group() as group:
                drained = anyio.Event()
                group.start_soon(_drain, process.stdout, tail, drained)
                with anyio.move_on_after(timeout) as clock:
                    await process.wait()
                # On a timeout this ends the command; after a normal exit it ends the
                # background children it left, which would otherwise hold the pipe open.
                await _stop(process)
                with anyio.move_on_after(DRAIN_GRACE_SECONDS):
                    await drained.wait()
                group.cancel_scope.cancel()
    finally:
        # Also when the caller cancels: nothing the command started outlives it.
        _RUNNING.discard(stopped)
        await _stop(process)
        with anyio.CancelScope(shield=True):
            await process.aclose()
        _REAPERS.discard(process.pid)
        await _sweep_orphans(process.pid)
    if stopped.cancelled_caught:
        status = process.returncode if process.returncode is not None else -signal.SIGKILL
        return CommandOutcome(status, tail.text(), False, tail.truncated, stopped=True)
    assert process.returncode is not None
    return CommandOutcome(process.returncode, tail.text(), clock.cancelled_caught, tail.truncated)


def last_lines(output: str) -> list[str]:
    lines = [line.rstrip() for line in output.splitlines() if line.strip()]
    return [
        line if len(line) <= ISSUE_LINE_LENGTH else line[: ISSUE_LINE_LENGTH - 1] + "…" for line in lines[-ISSUE_LINES:]
    ]


def judge(outcome: CommandOutcome, timeout: float) -> Evaluation:
    """Exit 0 is VALID at 1.0; a failure, a signal or a timeout is INVALID at 0.0."""
    output_lines = last_lines(outcome.output)
    if outcome.timed_out:
        reason = f"timed out after {timeout:g} s"
        issues = [f"{reason}; the command and its children were killed", *output_lines]
        return Evaluation(0.0, Verdict.INVALID, tuple(issues), reason)
    if outcome.returncode == 0:
        return Evaluation(1.0, Verdict.VALID, (), "command exited with status 0")
    if outcome.returncode < 0:
        try:
            name = signal.Signals(-outcome.returncode).name
        except ValueError:
            name = str(-outcome.returncode)
        reason = f"command was killed by signal {name}"
    else:
        reason = f"command exited with status {outcome.returncode}"
    return Evaluation(0.0, Verdict.INVALID, tuple(output_lines or [f"{reason} and printed nothing"]), reason)


def out_of_budget(budget: float, outcome: CommandOutcome | None) -> Evaluation:
    """UNKNOWN: the call's time budget ended the command (or left no time to start it), so nothing was judged."""
    if outcome is None:
        reason = f"not run: the call's time budget of {budget:g} s was spent"
        return Evaluation(None, Verdict.UNKNOWN, (reason,), reason)
    reason = f"stopped when the call's time budget of {budget:g} s ran out"
    issues = [f"{reason}; the command and its children were killed", *last_lines(outcome.output)]
    return Evaluation(None, Verdict.UNKNOWN, tuple(issues), reason)


class ExecEvaluator(BoundedEvaluator):
    needs_model = False

    def __init__(
        self,
        spec: str,
        command: str,
        *,
        timeout: float = DEFAULT_EXEC_TIMEOUT,
        deadline: float = math.inf,
        budget: float | None = None,
    ) -> None:
        super().__init__(spec)
        self.command = command
        self.timeout = timeout
        #: When the tool call's budget runs out, on anyio's clock; no run goes past it.
        self.deadline = deadline
        #: That budget's seconds, for the reason of a run it stopped.
        self.budget = budget

    async def evaluate(self, text: str, call: ToolCall | None) -> Evaluation:
        left = self.deadline - anyio.current_time()
        if left <= 0:
            return out_of_budget(self.budget or 0.0, None)
        # Which limit comes first: the command's own, or what is left of the call's budget.
        by_budget = left < self.timeout
        limit = left if by_budget else self.timeout
        body, language = strip_code_fence(text)
        with tempfile.TemporaryDirectory(prefix="decirank-exec-", ignore_cleanup_errors=True) as folder:
            path = Path(folder) / artifact_file_name(language)
            # A lone surrogate cannot be written as UTF-8; the command sees U+FFFD in its place.
            path.write_text(body, encoding="utf-8", errors="replace")
            command = self.command.replace(PLACEHOLDER, shlex.quote(str(path)))
            try:
                outcome = await run_command(
                    command, cwd=Path(folder), env={**os.environ, "ARTIFACT": str(path)}, timeout=limit
                )
            except OSError as error:
                # No verdict on the artifact can be had when the command never ran.
                return Evaluation(None, Verdict.UNKNOWN, (f"the command could not be started: {error}",), "not run")
        if outcome.stopped:
            reason = "stopped: the server is shutting down"
            return Evaluation(None, Verdict.UNKNOWN, (f"{reason}; the command and its children were killed",), reason)
        if outcome.timed_out and by_budget:
            return out_of_budget(self.budget or limit, outcome)
        return judge(outcome, limit)

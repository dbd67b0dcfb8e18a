"""The ``decirank`` command line: one subcommand per tool, plus models, runs, serve and eval.

Bad input prints one line on stderr and exits with 2, whether the command-line
parser refuses it (a bad number, a missing argument) or decirank does (a
missing file, bad JSON, an unknown model); it never shows a traceback.
"""

from __future__ import annotations

import functools
import importlib
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import typer
from typer.main import get_command

from ..decisions.failover import FailoverWarning
from ..errors import DecirankError
from ._app import app
from ._output import error_console

# Each module adds its commands to the app, in the order ``decirank --help`` lists them.
_MODULES = ("tools", "batch", "artifacts", "examples", "calibrate", "plan", "runs", "models", "serve", "mcp", "eval")
for _commands in _MODULES:
    importlib.import_module(f".{_commands}", __name__)

try:  # recent Typer raises the errors of its own copy of click; older releases raise click's
    from typer._click import exceptions as _parser_errors
except ImportError:  # pragma: no cover
    from click import exceptions as _parser_errors

__all__ = ["app", "main"]

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


def _print_error(message: str) -> None:
    """``error: message`` as one line on stderr, whatever the message holds."""
    # A message may quote bad input: lone surrogates are escaped so stderr can take them.
    line = " ".join(message.encode("utf-8", "backslashreplace").decode("utf-8").splitlines())
    error_console.print(f"error: {line}", highlight=False, soft_wrap=True)


_default_show_warning = warnings.showwarning


def _show_warning(message: Any, category: type[Warning], *args: Any, **kwargs: Any) -> None:
    """A failover (a model skipped or failed, the next one asked) as one ``warning:`` line on stderr."""
    if issubclass(category, FailoverWarning):
        error_console.print(f"warning: {message}", highlight=False, soft_wrap=True)
    else:
        _default_show_warning(message, category, *args, **kwargs)


def _failover_warnings_on_stderr(command: Callable[..., int]) -> Callable[..., int]:
    """``command`` run with failover warnings shown as ``warning:`` lines, and Python's way restored after."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> int:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            return command(*args, **kwargs)

    return run


@_failover_warnings_on_stderr
def main(argv: Sequence[str] | None = None) -> int:
    command = get_command(app)
    try:
        code = command.main(args=list(argv) if argv is not None else None, prog_name="decirank", standalone_mode=False)
    except _parser_errors.UsageError as error:
        # A group named without a subcommand (``decirank``, ``decirank runs``) shows its help instead.
        if isinstance(error, getattr(_parser_errors, "NoArgsIsHelpError", ())):
            error.show()
        else:
            where = f" (see '{error.ctx.command_path} --help')" if error.ctx is not None else ""
            _print_error(error.format_message() + where)
        return EXIT_BAD_INPUT
    except DecirankError as error:
        _print_error(str(error))
        return EXIT_BAD_INPUT
    # Nets under the checks where input is read, which name what was wrong: bad input that
    # reached further still gets one line, never a traceback.
    except RecursionError:
        _print_error("the input is nested too deeply")
        return EXIT_BAD_INPUT
    except UnicodeEncodeError as error:
        if "surrogate" not in str(error.reason):
            raise
        _print_error("the input holds a lone surrogate (U+D800..U+DFFF), which is not text: give UTF-8")
        return EXIT_BAD_INPUT
    except (KeyboardInterrupt, typer.Abort):
        error_console.print("interrupted")
        return EXIT_INTERRUPTED
    # Without standalone mode, a command's normal end returns its value (None) and ``--help`` or
    # ``typer.Exit`` return their exit code.
    return code if isinstance(code, int) else 0

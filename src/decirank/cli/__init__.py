"""The ``decirank`` command line: one subcommand per tool, plus models, runs, serve and eval.

Errors decirank raises on purpose print one line on stderr and exit with 2;
they never show a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from ..errors import DecirankError
from . import artifacts as _artifacts  # noqa: F401
from . import eval as _eval  # noqa: F401  (each module adds its commands to the app)
from . import mcp as _mcp  # noqa: F401
from . import models as _models  # noqa: F401
from . import plan as _plan  # noqa: F401
from . import runs as _runs  # noqa: F401
from . import serve as _serve  # noqa: F401
from . import tools as _tools  # noqa: F401
from ._app import app
from ._output import error_console

__all__ = ["app", "main"]

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


def main(argv: Sequence[str] | None = None) -> int:
    try:
        result = app(args=list(argv) if argv is not None else None, standalone_mode=False, prog_name="decirank")
    except click.exceptions.UsageError as error:
        error.show()
        return EXIT_BAD_INPUT
    except click.exceptions.ClickException as error:
        error.show()
        return error.exit_code
    except (click.exceptions.Abort, KeyboardInterrupt):
        error_console.print("interrupted")
        return EXIT_INTERRUPTED
    except DecirankError as error:
        error_console.print(f"error: {error}", markup=False, highlight=False, soft_wrap=True)
        return EXIT_BAD_INPUT
    return result if isinstance(result, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""The ``decirank`` command line: one subcommand per tool, plus models, runs, serve and eval.

Errors decirank raises on purpose print one line on stderr and exit with 2;
they never show a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

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
    # Standalone mode lets the command-line parser report usage errors itself (exit 2);
    # only decirank's own errors are caught here and shortened to one line.
    try:
        app(args=list(argv) if argv is not None else None, prog_name="decirank")
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else EXIT_BAD_INPUT)
    except DecirankError as error:
        error_console.print(f"error: {error}", markup=False, highlight=False, soft_wrap=True)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        error_console.print("interrupted")
        return EXIT_INTERRUPTED
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""``python -m decirank`` is the ``decirank`` command."""

import sys

from .cli import main

sys.exit(main())

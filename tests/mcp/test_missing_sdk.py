"""Without the optional mcp SDK, ``decirank mcp`` says how to install it instead of failing on an import."""

from __future__ import annotations

import subprocess
import sys

# Blocking the module in sys.modules makes the SDK look uninstalled to this process only.
WITHOUT_SDK = "import sys; sys.modules['mcp'] = None; from decirank.cli import main; sys.exit(main(['mcp']))"


def test_a_missing_sdk_is_a_one_line_error_with_the_fix():
    """decirank mcp without the SDK exits 2 with one line naming the package to install."""
    done = subprocess.run([sys.executable, "-c", WITHOUT_SDK], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "the MCP SDK (package mcp) is not installed; fix it with: pip install 'decirank[mcp]'" in done.stderr
    assert "Traceback" not in done.stderr

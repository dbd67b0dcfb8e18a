"""Where the MCP server listens, shared by the package's entry points and the server below them."""

from __future__ import annotations

from typing import Literal

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "HTTP_PATH", "Transport"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
HTTP_PATH = "/mcp"

Transport = Literal["stdio", "http"]

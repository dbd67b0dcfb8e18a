"""``decirank serve``: the tools and the server's models over HTTP.

FastAPI and uvicorn are the ``server`` extra; without them, importing this
package says how to install them.
"""

from __future__ import annotations

from ..errors import MissingAssetError

try:
    import fastapi  # noqa: F401
except ImportError as error:  # pragma: no cover - the extra is installed wherever tests run
    raise MissingAssetError("the HTTP server (fastapi)", "pip install 'decirank[server]'") from error

from .app import DEFAULT_MAX_BODY_BYTES, DEFAULT_TIMEOUT, ServerSettings, create_app

__all__ = ["DEFAULT_MAX_BODY_BYTES", "DEFAULT_TIMEOUT", "ServerSettings", "create_app"]

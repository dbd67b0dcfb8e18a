"""``decirank.Client`` and ``decirank.AsyncClient``: the tools as methods of one object that holds the settings.

As with ``cohere.ClientV2()`` or ``openai.OpenAI()``, a program builds one
client (``model``, ``base_url``, ``api_key``, ``timeout``), passes it around,
and a test hands in another (``Client(model="lexical")``, or a
:mod:`decirank.testing` backend's name). Each method is the tool itself with
the client's settings as defaults, so it takes exactly the tool's arguments and
any of them given to a call wins. The module functions (``decirank.rank``,
...) are what a client with no settings does.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

from .tools.calibrate import acalibrate, calibrate
from .tools.classify import aclassify, classify
from .tools.filter import afilter, filter
from .tools.rank import arank, rank
from .tools.rerank import arerank, rerank
from .tools.score import ascore, score
from .tools.score_list import ascore_list, score_list

__all__ = ["AsyncClient", "Client"]

P = ParamSpec("P")
T = TypeVar("T")

#: The settings a client holds, each a parameter every tool takes.
SETTINGS = ("model", "base_url", "api_key", "timeout")


class _Settings:
    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
    ) -> None:
        #: A role (``decider``) or ``provider:model`` name; None: the decider role.
        self.model = model
        self.base_url = base_url
        self.api_key = api_key
        #: One budget in seconds for each call; None: each tool's own default.
        self.timeout = timeout

    def __repr__(self) -> str:
        shown = [f"{name}={getattr(self, name)!r}" for name in SETTINGS if name != "api_key" and getattr(self, name)]
        if self.api_key:
            shown.append("api_key='...'")  # never printed: a repr ends up in logs
        return f"{type(self).__name__}({', '.join(shown)})"

    def _defaults(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in SETTINGS if getattr(self, name) is not None}


def _method(tool: Callable[P, T]) -> Callable[Concatenate[Any, P], T]:
    """``tool`` as a method: the client's settings fill the arguments a call leaves out."""

    @functools.wraps(tool)
    def method(self: _Settings, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return tool(*args, **{**self._defaults(), **kwargs})

    signature = inspect.signature(tool)
    # help(client.rank) shows the tool's arguments after self, as a method's.
    self_parameter = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[self_parameter, *signature.parameters.values()]
    )
    return method


class Client(_Settings):
    """The tools, sharing one client's ``model``, ``base_url``, ``api_key`` and ``timeout``.

        client = decirank.Client(model="local")
        client.rerank("how long do fleas live", documents, top_n=3)
    """

    rank = _method(rank)
    rerank = _method(rerank)
    filter = _method(filter)
    classify = _method(classify)
    score = _method(score)
    calibrate = _method(calibrate)
    score_list = _method(score_list)


class AsyncClient(_Settings):
    """The async tools, sharing one client's settings: ``await client.rerank(...)``."""

    rank = _method(arank)
    rerank = _method(arerank)
    filter = _method(afilter)
    classify = _method(aclassify)
    score = _method(ascore)
    calibrate = _method(acalibrate)
    score_list = _method(ascore_list)

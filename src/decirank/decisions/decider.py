"""A role or a model name, resolved to the chain of models that answers for it.

``decider`` is the default role. With no configuration it is the embedded
``local`` model; a config file may give any role a primary model and
fallbacks. A plain ``provider:model`` name is a chain of one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..backends import Backend, create_backend, known_model_names, providers, suggest
from ..errors import AllModelsFailedError, ModelError, UnknownModelError
from .answers import DecisionResponse, check_response
from .limits import ModelLimits
from .questions import DecisionRequest

__all__ = ["DEFAULT_ROLE", "Decider"]

DEFAULT_ROLE = "decider"
DEFAULT_CHAIN = ("local",)


class Decider:
    """The models that answer for one role, in the order they are tried."""

    def __init__(self, name: str, chain: Sequence[Backend]):
        if not chain:
            raise UnknownModelError(name)
        self.name = name
        self.chain = list(chain)

    @classmethod
    def resolve(cls, name: str = DEFAULT_ROLE, **backend_options: Any) -> Decider:
        """``name`` is a role (``decider``) or an explicit ``provider:model`` name.

        ``backend_options`` (``base_url``, ``api_key``, ...) go to every backend created.
        """
        if name == DEFAULT_ROLE:
            specs: Sequence[str] = DEFAULT_CHAIN
        elif ":" in name or _is_provider(name):
            specs = [name]
        else:
            raise UnknownModelError(
                name, suggestion=suggest(name, [DEFAULT_ROLE, *known_model_names()])
            )
        return cls(name, [create_backend(spec, **backend_options) for spec in specs])

    @property
    def limits(self) -> ModelLimits:
        """Limits every model of the chain can take, so a tool's split fits any of them."""
        return ModelLimits.combine(backend.limits for backend in self.chain)

    @property
    def model_names(self) -> list[str]:
        return [backend.name for backend in self.chain]

    async def decide(self, request: DecisionRequest) -> DecisionResponse:
        """Ask the chain's models in order until one answers every question well."""
        attempts: list[ModelError] = []
        for backend in self.chain:
            try:
                backend.limits.check(request, model=backend.name)
                response = await backend.decide(request)
                check_response(request, response)
                return response
            except ModelError as error:
                if not error.retriable:
                    raise
                attempts.append(error)
        if len(attempts) == 1:
            raise attempts[0]
        raise AllModelsFailedError(self.name, attempts)

    def __repr__(self) -> str:
        return f"<Decider {self.name} -> {', '.join(self.model_names)}>"


def _is_provider(name: str) -> bool:
    return any(provider.name == name for provider in providers())

"""decirank: rank, rerank, filter and score lists with decision models.

    >>> import decirank
    >>> result = decirank.rank(["a cat", "a car"], "Which one purrs?", {"question": "pets"})
    >>> result.items[0]
    'a cat'

Every tool has an async twin (``arank``, ``arerank``, ``afilter``) and
returns a typed result whose ``to_dict()`` is the tool's JSON shape.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError as _PackageNotFoundError
from importlib.metadata import version as _version

from .backends import Backend, register_provider
from .decisions.answers import ChoiceAnswer, DecisionResponse, LikelihoodAnswer, ScoreAnswer, Usage
from .decisions.decider import Decider
from .decisions.limits import ModelLimits
from .decisions.questions import ChoiceQuestion, DecisionRequest, LikelihoodQuestion, ScoreQuestion
from .errors import (
    AllModelsFailedError,
    CancelledError,
    ConfigError,
    DecirankError,
    DecisionError,
    DecisionTimeoutError,
    InvalidAnswerError,
    InvalidInputError,
    ModelError,
    UnknownModelError,
)
from .tools.filter import FilterDecision, FilterResult, afilter, filter
from .tools.rank import RankedItem, RankResult, arank, rank
from .tools.rerank import RerankedDocument, RerankResult, arerank, rerank

try:
    __version__ = _version("decirank")
except _PackageNotFoundError:  # running from a source tree
    __version__ = "0+unknown"

__all__ = [
    "AllModelsFailedError",
    "Backend",
    "CancelledError",
    "ChoiceAnswer",
    "ChoiceQuestion",
    "ConfigError",
    "DecirankError",
    "Decider",
    "DecisionError",
    "DecisionRequest",
    "DecisionResponse",
    "DecisionTimeoutError",
    "FilterDecision",
    "FilterResult",
    "InvalidAnswerError",
    "InvalidInputError",
    "LikelihoodAnswer",
    "LikelihoodQuestion",
    "ModelError",
    "ModelLimits",
    "RankResult",
    "RankedItem",
    "RerankResult",
    "RerankedDocument",
    "ScoreAnswer",
    "ScoreQuestion",
    "UnknownModelError",
    "Usage",
    "__version__",
    "afilter",
    "arank",
    "arerank",
    "filter",
    "rank",
    "register_provider",
    "rerank",
]

"""decirank: rank, rerank, filter and score lists with decision models.

    >>> import decirank
    >>> result = decirank.rank(["a cat", "a car"], "Which one purrs?", {"question": "pets"})
    >>> result.items[0]
    'a cat'

Every tool has an async twin (``arank``, ``arerank``, ``afilter``, ``acalibrate``, ...) and
returns a typed result whose ``to_dict()`` is the tool's JSON shape.
"""

from __future__ import annotations

from ._client import AsyncClient, Client
from ._version import __version__
from .backends import Backend, register_provider
from .batching import BatchResult, abatch, batch
from .decisions.decider import Decider
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
    StoreError,
    UnknownModelError,
)
from .stores.artifacts import ArtifactStore, Stamp
from .stores.calibrations import Calibration, CalibrationStore
from .stores.examples import ExampleStore
from .tools.calibrate import CalibrateResult, acalibrate, calibrate
from .tools.classify import ClassifyDecision, ClassifyResult, aclassify, classify
from .tools.filter import FilterDecision, FilterResult, afilter, filter
from .tools.rank import RankedItem, RankResult, arank, rank
from .tools.rerank import RerankedDocument, RerankResult, arerank, rerank
from .tools.score import ScoreResult, ascore, score
from .tools.score_list import ScoredRef, ScoreListResult, Verdict, ascore_list, register_validation_type, score_list
from .types.answers import ChoiceAnswer, DecisionResponse, LikelihoodAnswer, ScoreAnswer, Usage
from .types.limits import ModelLimits
from .types.questions import ChoiceQuestion, DecisionRequest, Example, LikelihoodQuestion, ScoreQuestion

__all__ = [
    "AllModelsFailedError",
    "ArtifactStore",
    "AsyncClient",
    "Backend",
    "BatchResult",
    "CalibrateResult",
    "Calibration",
    "CalibrationStore",
    "CancelledError",
    "ChoiceAnswer",
    "ChoiceQuestion",
    "Client",
    "ClassifyDecision",
    "ClassifyResult",
    "ConfigError",
    "Decider",
    "DecirankError",
    "DecisionError",
    "DecisionRequest",
    "DecisionResponse",
    "DecisionTimeoutError",
    "Example",
    "ExampleStore",
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
    "ScoreListResult",
    "ScoreQuestion",
    "ScoreResult",
    "ScoredRef",
    "Stamp",
    "StoreError",
    "UnknownModelError",
    "Usage",
    "Verdict",
    "__version__",
    "abatch",
    "acalibrate",
    "aclassify",
    "afilter",
    "arank",
    "arerank",
    "ascore",
    "ascore_list",
    "batch",
    "calibrate",
    "classify",
    "filter",
    "rank",
    "register_provider",
    "register_validation_type",
    "rerank",
    "score",
    "score_list",
]

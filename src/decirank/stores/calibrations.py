"""Calibrations by name: a fitted probability map and the labelled scores behind it, one JSON file each.

A calibration is kept as ``<name>.json`` in ``calibrations/`` under the user's
data directory (so it moves with ``DECIRANK_HOME``). It holds what it was
fitted for (tool, model, question, options and a hash of the labelled rows),
the map, the reliability before and after, and each labelled row's model
probability with its label (never the texts): the cut-offs and prediction
sets of :mod:`decirank.calibration` are computed from those.

Names follow the example sets' rule (a letter or digit, then letters,
digits, ``_``, ``.`` or ``-``, at most 100), and writes are atomic.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._paths import data_dir
from ..calibration._maps import ProbabilityMap, Reliability
from ..errors import InvalidInputError, StoreError
from ._files import known_names, names_in, remove_file, tighten_folder_files, write_atomically
from .examples import check_set_name

__all__ = ["FORMAT", "Calibration", "CalibrationStore", "check_calibration_name", "default_root"]

_SUFFIX = ".json"
#: The version of the file's layout, so a later release can read what an earlier one wrote.
FORMAT = 1


def default_root() -> Path:
    """``calibrations/`` in the user's data directory (under ``DECIRANK_HOME`` when it is set)."""
    return data_dir() / "calibrations"


@dataclass(frozen=True)
class Calibration:
    """A fitted map and what it was fitted for; see the module's docstring."""

    name: str
    #: The tool whose probabilities were mapped: filter, score, rerank or classify.
    tool: str
    #: The model that answered the labelled rows (``local:default``, ``systemone:jev-latest``).
    model: str
    question: str
    #: A choice's options, key -> description (the ``none`` key included); None for yes/no.
    options: dict[str, str] | None
    #: SHA-256 of the labelled rows, question and options, as canonical JSON.
    data_hash: str
    created_at: str
    map: ProbabilityMap
    #: Each labelled row's model probability: of yes, or (classify) of the row's right option.
    scores: list[float]
    #: Each labelled row's label: 1/0 for yes/no, or (classify) its right option's key.
    labels: list[Any]
    before: Reliability
    #: Measured on out-of-fold probabilities: no row judges a map fitted on it.
    after: Reliability
    #: Each tried method's cross-validated log loss.
    losses: dict[str, float] = field(default_factory=dict)
    #: The calibrate run that made it, in the run log.
    run_id: str | None = None

    @property
    def rows(self) -> int:
        return len(self.scores)

    def summary(self) -> dict[str, Any]:
        """Everything but the per-row scores and labels."""
        summary = {
            "name": self.name,
            "tool": self.tool,
            "model": self.model,
            "question": self.question,
            "options": self.options,
            "data_hash": self.data_hash,
            "created_at": self.created_at,
            "rows": self.rows,
            "method": self.map.method,
            "map": self.map.to_dict(),
            "before": self.before.to_dict(),
            "after": self.after.to_dict(),
            "cross_validated_log_loss": {method: round(loss, 4) for method, loss in self.losses.items()},
            "run_id": self.run_id,
        }
        if self.options is None:
            summary["positives"] = int(sum(self.labels))
        return summary

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, **self.summary(), "scores": self.scores, "labels": self.labels}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Calibration:
        return cls(
            name=data["name"],
            tool=data["tool"],
            model=data["model"],
            question=data["question"],
            options=data["options"],
            data_hash=data["data_hash"],
            created_at=data["created_at"],
            map=ProbabilityMap.from_dict(data["map"]),
            scores=[float(score) for score in data["scores"]],
            labels=list(data["labels"]),
            before=Reliability.from_dict(data["before"]),
            after=Reliability.from_dict(data["after"]),
            losses=dict(data.get("cross_validated_log_loss", {})),
            run_id=data.get("run_id"),
        )


def check_calibration_name(value: Any, field: str = "name") -> str:
    """A calibration's name, by the same rule as an example set's, refused as a calibration name."""
    return check_set_name(value, field, what="a calibration name")


class CalibrationStore:
    """Calibrations by name, one JSON file each under ``root`` (default: :func:`default_root`)."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root).expanduser() if root is not None else default_root()
        tighten_folder_files(self.root)

    def __repr__(self) -> str:
        return f"<CalibrationStore {self.root}>"

    def _path(self, name: str, field_name: str = "name") -> Path:
        return self.root / f"{check_calibration_name(name, field_name)}{_SUFFIX}"

    def put(self, calibration: Calibration) -> None:
        """Store ``calibration`` under its name, replacing any of that name."""
        path = self._path(calibration.name)
        text = json.dumps(calibration.to_dict(), ensure_ascii=False, sort_keys=True)
        try:
            write_atomically(path, text)
        except OSError as error:
            raise StoreError(
                f"cannot write calibration {calibration.name!r} in {self.root}: {error.strerror or error}"
            ) from None

    def get(self, name: str, field_name: str = "name") -> Calibration | None:
        """The calibration of that name, or None."""
        path = self._path(name, field_name)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as error:
            raise StoreError(f"cannot read calibration {name!r} at {path}: {error}") from None
        try:
            data = json.loads(text)
            if data.get("format") != FORMAT:
                raise ValueError(f"layout {data.get('format')!r}, this release reads {FORMAT}")
            return Calibration.from_dict(data)
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise StoreError(f"calibration {name!r} ({path}) is damaged: {error}") from None

    def require(self, name: Any, field_name: str = "calibration") -> Calibration:
        """The calibration of that name; an unknown name is an InvalidInputError listing the known ones."""
        check_calibration_name(name, field_name)
        found = self.get(name, field_name)
        if found is None:
            known = self.names()
            detail = (
                f"no calibration {name!r}; known: {known_names(known)}"
                if known
                else f"no calibration {name!r}; none stored"
            )
            raise InvalidInputError(field_name, "the name of a stored calibration (decirank calibrate)", detail=detail)
        return found

    def names(self) -> list[str]:
        """Every calibration's name, sorted."""
        return names_in(self.root, _SUFFIX, "calibrations")

    def list(self) -> list[dict[str, Any]]:
        """Every calibration's summary, by name."""
        found = []
        for name in self.names():
            calibration = self.get(name)
            if calibration is not None:  # removed since names() looked
                found.append(calibration.summary())
        return found

    def remove(self, name: str) -> bool:
        """Remove a calibration; False when there was none of that name."""
        return remove_file(self._path(name), f"calibration {name!r}")

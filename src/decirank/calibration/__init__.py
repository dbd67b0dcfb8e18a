"""Calibration: maps from a model's probability to observed frequency, and promises made from labelled rows.

The math lives here, free of I/O: :mod:`._maps` (identity, Platt, isotonic and
temperature maps, chosen by cross-validation; reliability tables) and
:mod:`._guarantees` (the recall and precision cut-offs and the conformal
prediction sets, each with the bound it rests on). The ``calibrate`` tool
(:mod:`decirank.tools.calibrate`) fits a map on the user's rows and keeps it in
the calibration store (:mod:`decirank.stores.calibrations`); the tools apply it.
"""

from ._guarantees import ConformalSets, Cutoff, conformal_sets, precision_cutoff, recall_cutoff
from ._maps import ProbabilityMap, Reliability, choose_map, choose_temperature, reliability

__all__ = [
    "ConformalSets",
    "Cutoff",
    "ProbabilityMap",
    "Reliability",
    "choose_map",
    "choose_temperature",
    "conformal_sets",
    "precision_cutoff",
    "recall_cutoff",
    "reliability",
]

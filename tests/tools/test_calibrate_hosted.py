"""Calibration for a hosted model: ``systemone:local`` against ``decirank serve --model local`` as that host.

Calibrating and filtering through the System One provider works as with the embedded model: the rows'
probabilities are the same numbers, the calibration is stored for ``systemone:local`` (and refused
for ``local``, whose numbers it was not fitted on), and the promise made from labelled support messages
holds on held-out ones (made-up, so the test runs wherever the suite does).
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import decirank
from tests.calibration_rows import SUPPORT_QUESTION as QUESTION
from tests.calibration_rows import support_rows
from tests.loopback import free_port, subprocess_server

#: Labelled rows to calibrate on, and held-out rows to check the promise on.
CALIBRATION_ROWS = 100
HELD_OUT_ROWS = 200


@pytest.fixture(scope="module")
def hosted(tmp_path_factory):
    """The base URL of ``decirank serve --model local`` in a subprocess, with its own user directory."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {name: value for name, value in os.environ.items() if not name.startswith("DECIRANK_")}
    env["DECIRANK_HOME"] = str(tmp_path_factory.mktemp("host-home"))
    command = [sys.executable, "-m", "decirank", "serve", "--port", str(port), "--model", "local"]
    with subprocess_server(command, url, ready_path="/healthz", env=env, timeout=120):
        yield url


@pytest.fixture(scope="module")
def rows():
    found = support_rows(CALIBRATION_ROWS + HELD_OUT_ROWS, 0)
    return found[:CALIBRATION_ROWS], found[CALIBRATION_ROWS:]


def test_a_filter_calibrated_through_the_hosted_model_keeps_its_recall_promise(hosted, rows):
    """calibrate and filter with systemone:local: the map is the embedded model's, the promise holds on new rows."""
    labelled, held_out = rows
    fitted = decirank.calibrate(
        labelled, QUESTION, name="problems-hosted", tool="filter", model="systemone:local", base_url=hosted
    )
    calibration = fitted.calibration
    assert calibration.model == "systemone:local" and calibration.rows == CALIBRATION_ROWS
    assert decirank.CalibrationStore().get("problems-hosted").model == "systemone:local"
    # The hosted model's numbers are the embedded model's: calibrating on it directly fits the same map.
    direct = decirank.calibrate(labelled, QUESTION, tool="filter", model="local", save=False).calibration
    assert calibration.scores == pytest.approx(direct.scores, abs=1e-9)
    assert calibration.map.method == direct.map.method and calibration.data_hash == direct.data_hash

    texts = [row["item"] for row in held_out]
    truth = np.array([row["answer"] for row in held_out])
    result = decirank.filter(
        texts, QUESTION, calibration="problems-hosted", target_recall=0.9, model="systemone:local", base_url=hosted
    )
    assert result.model == "systemone:local" and result.calibration == "problems-hosted"
    promise = result.promise.to_dict()
    assert promise["target_recall"] == 0.9 and promise["confidence"] == 0.9
    assert promise["calibration_rows"] == CALIBRATION_ROWS and promise["threshold"] is not None
    kept = np.array([decision.kept for decision in result.decisions])
    assert kept.tolist() == [decision.raw_probability >= promise["threshold"] for decision in result.decisions]
    recall = kept[truth].mean()
    assert recall >= 0.9, f"recall {recall:.3f} on {truth.sum()} held-out positives, promised 0.9"
    assert kept.sum() < len(texts)  # the cut-off drops rows: the promise is not kept by keeping everything

    # A precision target on the same calibration (0.75 is more than 100 rows can promise at 0.9): the rows it
    # keeps are at least that precise.
    precise = decirank.filter(
        texts, QUESTION, calibration="problems-hosted", target_precision=0.7, model="systemone:local", base_url=hosted
    )
    kept = np.array([decision.kept for decision in precise.decisions])
    assert precise.promise.threshold is not None and kept.any()
    assert truth[kept].mean() >= 0.7

    # The calibration was fitted on systemone:local's answers: the embedded model's are refused by name.
    with pytest.raises(decirank.InvalidInputError, match="fitted for the model local:default") as refused:
        decirank.filter(texts[:3], QUESTION, calibration="problems-hosted", target_recall=0.9, model="local")
    assert refused.value.field == "calibration"


def test_a_score_calibrated_through_the_hosted_model_maps_held_out_rows(hosted, rows):
    """score's calibration through systemone:local: raw probabilities are the host's, mapped by the stored map."""
    labelled, held_out = rows
    labelled, held_out = labelled[:60], held_out[:60]
    decirank.calibrate(
        labelled, QUESTION, name="problems-score", tool="score", model="systemone:local", base_url=hosted
    )
    texts = [row["item"] for row in held_out]
    result = decirank.score(texts, QUESTION, calibration="problems-score", model="systemone:local", base_url=hosted)
    plain = decirank.score(texts, QUESTION, model="local")
    assert result.raw_probabilities == pytest.approx(plain.probabilities, abs=1e-9)
    stored = decirank.CalibrationStore().get("problems-score")
    assert result.probabilities == pytest.approx(stored.map(plain.probabilities).tolist())
    # The map is monotone: it never puts a text the model thought less likely above one it thought more likely.
    order = np.argsort(result.raw_probabilities, kind="stable")
    assert np.all(np.diff(np.asarray(result.probabilities)[order]) >= -1e-12)

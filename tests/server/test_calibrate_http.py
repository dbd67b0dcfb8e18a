"""decirank serve with calibrations: POST /v1/calibrate, /v1/calibrations, and the tools taking calibration."""

from __future__ import annotations

import httpx
import pytest

import decirank
from decirank.server import create_app
from decirank.stores.examples import ExampleStore
from tests.calibration_rows import KIND_QUESTION, KINDS, PET_QUESTION, PET_STATE, kind_rows, pet_rows
from tests.loopback import ThreadedServer

#: The server's store is the test's: each test's DECIRANK_HOME is its own, and the server reads it per request.
#: A batch big enough for a recall promise to afford a cut-off (a promise about a handful of items keeps them all).
ITEMS = ["a cat at noon", "a lamp by the door", "a puppy on the sofa", "a kettle in the garden"] * 10


@pytest.fixture(scope="module")
def client():
    with ThreadedServer(create_app("lexical")) as url, httpx.Client(base_url=url, timeout=30) as http:
        yield http


def calibrate(client, **body):
    body = {"name": "pets", "question": PET_QUESTION, "rows": pet_rows(), "state": PET_STATE, **body}
    response = client.post("/v1/calibrate", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def test_calibrate_stores_one_that_lists_shows_and_deletes(client):
    """POST /v1/calibrate answers the summary with the reliability before and after; GET and DELETE find it."""
    made = calibrate(client)
    assert made["name"] == "pets" and made["tool"] == "filter" and made["model"] == "lexical:bm25"
    assert made["question"] == PET_QUESTION and made["options"] is None
    assert made["rows"] == 40 and made["positives"] == sum(row["answer"] for row in pet_rows())
    assert made["saved"] is True and made["usage"]["calls"] >= 1 and made["run_id"]
    assert made["method"] in made["cross_validated_log_loss"] and made["map"]["method"] == made["method"]
    for when in ("before", "after"):
        reliability = made[when]
        assert reliability["rows"] == 40 and 0 <= reliability["ece"] <= 1 and 0 <= reliability["brier"] <= 1
        assert sum(entry["rows"] for entry in reliability["table"]) == 40
        assert {"low", "high", "rows", "mean_probability", "frequency"} <= set(reliability["table"][0])
    summary = {key: value for key, value in made.items() if key not in ("saved", "usage")}

    assert client.get("/v1/calibrations").json() == {"calibrations": [summary]}
    assert client.get("/v1/calibrations/pets").json() == summary
    assert decirank.CalibrationStore().get("pets").summary() == summary  # the server's store is the user's

    assert client.delete("/v1/calibrations/pets").json() == {"removed": True}
    for gone in (client.get("/v1/calibrations/pets"), client.delete("/v1/calibrations/pets")):
        assert gone.status_code == 404
        assert gone.json() == {"detail": "no calibration 'pets' on this server"}
    assert client.get("/v1/calibrations/..%2Fetc").status_code == 404  # no name a calibration cannot have
    assert client.get("/v1/calibrations").json() == {"calibrations": []}


def test_calibrate_takes_a_stored_example_set_and_save_false_only_measures(client):
    """rows may name an example set stored on the server; save false answers the summary and stores nothing."""
    ExampleStore().put("pet-rows", pet_rows())
    measured = calibrate(client, rows="pet-rows", save=False)
    assert measured["saved"] is False and measured["rows"] == 40
    assert client.get("/v1/calibrations").json() == {"calibrations": []}
    # The same rows inline fit the same map: the set is read as the list it holds.
    assert calibrate(client, save=False)["data_hash"] == measured["data_hash"]


def test_filter_with_a_calibration_and_a_target_recall_answers_its_promise(client):
    """/v1/filter maps each probability, keeps raw_probability, and states the promise of target_recall."""
    calibrate(client)
    body = {"items": ITEMS, "question": PET_QUESTION, "state": PET_STATE, "calibration": "pets"}
    response = client.post("/v1/filter", json={**body, "target_recall": 0.8})
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["calibration"] == "pets"
    promise = data["promise"]
    assert promise["target_recall"] == 0.8 and promise["confidence"] == 0.9 and promise["calibration_rows"] == 40
    assert promise["threshold"] is not None and promise["observed_recall"] >= 0.8
    # The cut-off is on the model's own probability, as the labelled rows' were.
    assert [d["kept"] for d in data["decisions"]] == [
        d["raw_probability"] >= promise["threshold"] for d in data["decisions"]
    ]
    assert data["items"] == ["a cat at noon", "a puppy on the sofa"] * 10
    # The same call in Python answers the same: the endpoint holds no logic of its own.
    local = decirank.filter(ITEMS, PET_QUESTION, PET_STATE, model="lexical", calibration="pets", target_recall=0.8)
    assert promise == local.promise.to_dict() | {"target_precision": None}
    assert [d["probability"] for d in data["decisions"]] == [d.probability for d in local.decisions]

    plain = client.post("/v1/filter", json=body).json()
    assert plain["promise"] is None and plain["min_confidence"] == 0.5
    assert all(d["raw_probability"] != d["probability"] for d in plain["decisions"])
    lenient = client.post("/v1/filter", json={**body, "target_recall": 0.5, "confidence": 0.6}).json()["promise"]
    assert lenient["confidence"] == 0.6 and lenient["threshold"] >= promise["threshold"]


def test_score_and_rerank_take_a_calibration(client):
    """/v1/score answers raw_probabilities beside the calibrated ones; Cohere's /v1/rerank names it in meta."""
    calibrate(client, name="pet-score", tool="score", state=None)
    texts = ITEMS[:2]
    scored = client.post("/v1/score", json={"texts": texts, "question": PET_QUESTION, "calibration": "pet-score"})
    assert scored.status_code == 200, scored.text
    data = scored.json()
    assert data["calibration"] == "pet-score"
    stored = decirank.CalibrationStore().get("pet-score")
    assert data["probabilities"] == pytest.approx(stored.map(data["raw_probabilities"]).tolist())
    uncalibrated = client.post("/v1/score", json={"texts": texts, "question": PET_QUESTION}).json()
    assert uncalibrated["raw_probabilities"] == uncalibrated["probabilities"] == data["raw_probabilities"]
    assert uncalibrated["calibration"] is None

    calibrate(client, name="pet-rerank", tool="rerank", question=PET_STATE, state=None)
    body = {"query": PET_STATE, "documents": ITEMS, "calibration": "pet-rerank"}
    reranked = client.post("/v1/rerank", json=body)
    assert reranked.status_code == 200, reranked.text
    assert reranked.json()["meta"]["calibration"] == "pet-rerank"
    raw = client.post("/v1/rerank", json={**body, "calibration": None}).json()
    assert "calibration" not in raw["meta"]
    by_index = {entry["index"]: entry["relevance_score"] for entry in raw["results"]}
    expected = decirank.CalibrationStore().get("pet-rerank").map([by_index[i] for i in range(len(ITEMS))])
    got = {entry["index"]: entry["relevance_score"] for entry in reranked.json()["results"]}
    assert [got[i] for i in range(len(ITEMS))] == pytest.approx(expected.tolist())
    v2 = client.post("/v2/rerank", json={**body, "model": "rerank-v3.5"}).json()
    assert v2["meta"]["calibration"] == "pet-rerank"


def test_classify_with_a_calibration_and_coverage_answers_prediction_sets(client):
    """/v1/classify with coverage gives each text its prediction set and none_fits, and the threshold's summary."""
    made = client.post(
        "/v1/calibrate",
        json={"name": "kinds", "question": KIND_QUESTION, "tool": "classify", "options": KINDS, "rows": kind_rows()},
    )
    assert made.status_code == 200, made.text
    assert made.json()["options"] == KINDS and made.json()["positives"] is None
    body = {"texts": ITEMS, "question": KIND_QUESTION, "options": KINDS, "calibration": "kinds", "coverage": 0.8}
    response = client.post("/v1/classify", json=body)
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["calibration"] == "kinds"
    coverage = data["coverage"]
    assert coverage["coverage"] == 0.8 and coverage["calibration_rows"] == 30 and "conformal" in coverage["method"]
    for decision in data["decisions"]:
        assert decision["prediction_set"] and set(decision["prediction_set"]) <= set(KINDS)
        assert decision["none_fits"] is False
    sizes = [len(decision["prediction_set"]) for decision in data["decisions"]]
    assert coverage["mean_set_size"] == pytest.approx(sum(sizes) / len(sizes))
    # The first choice of each text is in its set.
    assert all(d["choice"] in d["prediction_set"] for d in data["decisions"])
    without = client.post("/v1/classify", json={**body, "coverage": None}).json()
    assert without["coverage"] is None and without["decisions"][0]["prediction_set"] is None


FILTER = {"items": ITEMS, "question": PET_QUESTION, "state": PET_STATE}

BAD = [
    ("unknown-name", "/v1/filter", {**FILTER, "calibration": "nope"}, ["body", "calibration"], "no calibration 'nope'"),
    (
        "another-question",
        "/v1/filter",
        {**FILTER, "question": "Is this a vehicle?", "calibration": "pets"},
        ["body", "calibration"],
        "fitted for this question",
    ),
    (
        "another-tool",
        "/v1/score",
        {"texts": ITEMS, "question": PET_QUESTION, "calibration": "pets"},
        ["body", "calibration"],
        "fitted for score",
    ),
    ("target-without", "/v1/filter", {**FILTER, "target_recall": 0.9}, ["body", "calibration"], "target_recall"),
    (
        "coverage-without",
        "/v1/classify",
        {"texts": ITEMS, "question": KIND_QUESTION, "options": KINDS, "coverage": 0.9},
        ["body", "calibration"],
        "coverage",
    ),
    (
        "two-targets",
        "/v1/filter",
        {**FILTER, "calibration": "pets", "target_recall": 0.9, "target_precision": 0.9},
        ["body", "target_recall"],
        "one target",
    ),
    # Every seventh row is labelled against its words: 40 rows cannot promise a precision of 0.95.
    (
        "unreachable-precision",
        "/v1/filter",
        {**FILTER, "calibration": "pets", "target_precision": 0.95},
        ["body", "target_precision"],
        "no cut-off of 'pets' (40 rows) reaches precision 0.95 at confidence 0.9",
    ),
    (
        "target-and-threshold",
        "/v1/filter",
        {**FILTER, "calibration": "pets", "target_recall": 0.9, "min_confidence": 0.5},
        ["body", "min_confidence"],
        "no min_confidence",
    ),
    (
        "target-of-1",
        "/v1/filter",
        {**FILTER, "calibration": "pets", "target_recall": 1},
        ["body", "target_recall"],
        "less than 1",
    ),
    (
        "model-mismatch",
        "/v1/filter",
        {**FILTER, "calibration": "pets", "model": "local"},
        ["body", "calibration"],
        "fitted for the model local:default ('pets' was fitted for lexical:bm25",
    ),
    (
        "few-rows",
        "/v1/calibrate",
        {"name": "x", "question": PET_QUESTION, "rows": pet_rows(12)},
        ["body", "rows"],
        "at least 20 labelled rows",
    ),
    (
        "bad-row",
        "/v1/calibrate",
        {"name": "x", "question": PET_QUESTION, "rows": [*pet_rows(), {"item": "a cat"}]},
        ["body", "rows", 40],
        "rows.40",
    ),
    ("no-question", "/v1/calibrate", {"name": "x", "rows": pet_rows()}, ["body", "question"], "question"),
    (
        "unknown-tool",
        "/v1/calibrate",
        {"name": "x", "question": "q", "tool": "rank", "rows": pet_rows()},
        ["body", "tool"],
        "filter",
    ),
    ("bad-name", "/v1/calibrate", {"name": "../x", "question": "q", "rows": pet_rows()}, ["body", "name"], "name"),
    (
        "options-for-filter",
        "/v1/calibrate",
        {"name": "x", "question": "q", "options": ["a", "b"], "rows": pet_rows()},
        ["body", "options"],
        "no options for filter",
    ),
    (
        "choice-method-for-filter",
        "/v1/calibrate",
        {"name": "x", "question": "q", "method": "temperature", "rows": pet_rows()},
        ["body", "method"],
        "platt",
    ),
]


@pytest.mark.parametrize(("path", "body", "location", "says"), [case[1:] for case in BAD], ids=[c[0] for c in BAD])
def test_bad_input_is_a_422_naming_the_field(client, path, body, location, says):
    """Each misuse of a calibration is a 422 locating the field, saying what was wrong, before any model call."""
    calibrate(client)
    response = client.post(path, json=body)
    assert response.status_code == 422, response.text
    (issue,) = response.json()["detail"]
    assert issue["loc"] == location, issue
    assert says in issue["msg"], issue["msg"]


def test_a_method_neither_route_serves_is_a_405_naming_both(client):
    """/v1/calibrations/{name} has a GET route and a DELETE route: a 405 there names both in Allow."""
    response = client.put("/v1/calibrations/pets", json={})
    assert response.status_code == 405
    assert response.headers["allow"] == "DELETE, GET"

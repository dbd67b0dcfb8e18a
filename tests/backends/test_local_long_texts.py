"""The embedded model reads long passages whole in windows, and notes texts it cut or that are not English."""

from __future__ import annotations

import httpx
import pytest

import decirank
from decirank.backends.local import _runtime
from decirank.backends.local._language import looks_non_english
from decirank.server import create_app
from decirank.stores.runlog import current_runlog
from tests.loopback import ThreadedServer

QUERY = "What is the capital of Australia?"
FILLER = " ".join(["The weather in the valley was mild and the farmers planted barley in rows along the river."] * 30)
ANSWER = "The capital of Australia is Canberra, chosen in 1908 as a compromise between Sydney and Melbourne."
SHORT = ["Canberra is the capital city of Australia.", "A recipe for banana bread with walnuts."]
#: The short documents' scores before long texts were read in windows (one 256-token cut for every text).
SHORT_SCORES = [0.5711050198441886, 0.018541126493230753]
#: onnxruntime's int8 kernels round differently on different CPUs (with and without VNNI): the same scores
#: read up to about 0.002 apart from one machine to another, so the recorded ones are matched to 0.005.
ACROSS_CPUS = 5e-3
GERMAN = "Der Hund spielt im Garten mit dem Ball und die Kinder schauen zu, weil es ein schöner Tag ist."
ENGLISH = "The dog plays in the garden with a ball while the children watch, because it is a lovely day."


def scores(query: str, documents: list[str]) -> list[float]:
    result = decirank.rerank(query, documents, model="local", timeout=None)
    return [r.relevance_score for r in sorted(result.results, key=lambda r: r.id)]


def test_long_document_with_the_answer_at_its_end_scores_well_above_filler():
    """A ~2,800-character document whose answer is past its first 256 tokens scores far above the filler alone."""
    reading = _runtime.shared_runtime.readings([FILLER + " " + ANSWER])[0]
    assert len(reading.windows) > 1  # the answer is past the first window
    answered, filler = scores(QUERY, [FILLER + " " + ANSWER, FILLER])
    assert answered > 0.1
    assert answered > 5 * filler


def test_short_texts_score_as_before_windows_and_beside_long_ones(monkeypatch):
    """A short passage's score is the one-window score it always had, alone or beside a long document."""
    alone = scores(QUERY, SHORT)
    assert alone == pytest.approx(SHORT_SCORES, abs=ACROSS_CPUS)
    # Within float rounding: the products run over all of a call's texts at once, as they always did.
    assert scores(QUERY, [*SHORT, FILLER + " " + ANSWER])[:2] == pytest.approx(alone, abs=1e-6)
    monkeypatch.setattr(_runtime, "MAX_WINDOWS", 1)  # the old cut: every text read to 256 tokens
    _runtime.shared_runtime.cache.clear()
    assert scores(QUERY, SHORT) == pytest.approx(alone, abs=1e-6)


def test_non_english_texts_and_queries_are_noted_not_refused():
    """A German text and a French query get a "non_english" note in the result's JSON; English ones none."""
    assert looks_non_english(GERMAN) and not looks_non_english(ENGLISH)
    assert looks_non_english("这只猫整个上午都在沙发上睡觉，不想起来吃东西。")
    assert not looks_non_english("wifi repeater wifi router wifi antenna wireless router bluetooth transmitter")
    scored = decirank.score([GERMAN, ENGLISH], "Is this about pets?", model="local").to_dict()
    assert [(n["index"], n["kind"]) for n in scored["notes"]] == [(0, "non_english")]
    reranked = decirank.rerank(
        "Quelle est la capitale de l'Australie ? On cherche la ville et son histoire.", [ANSWER], model="local"
    ).to_dict()
    assert [(n["index"], n["kind"]) for n in reranked["notes"]] == [(None, "non_english")]
    assert decirank.rerank(QUERY, [ANSWER], model="local").notes == []


def test_a_text_past_the_window_cap_is_noted_as_cut_in_the_result_and_run_log():
    """A document longer than MAX_WINDOWS windows is read to the cap and noted "cut", in the result and the run log."""
    endless = " ".join([FILLER] * 4)  # about 4 times the windows' reach
    result = decirank.rerank(QUERY, [ANSWER, endless], model="local", timeout=None)
    cut = [n for n in result.notes if n.note.kind == "cut"]
    assert [n.index for n in cut] == [1]
    assert f"{_runtime.MAX_WINDOWS} windows" in cut[0].note.message
    assert current_runlog().run(result.run_id)["outputs"]["notes"][0]["kind"] == "cut"
    # A yes/no question's item is read to one window, and said to be cut past it.
    kept = decirank.filter([FILLER + " My cat sleeps all day.", "My cat sleeps all day."], "Is this about pets?")
    assert [(n.index, n.note.kind) for n in kept.notes] == [(0, "cut")]
    assert "1 window of 256 tokens" in kept.notes[0].note.message


def test_notes_reach_http_answers(tmp_path, monkeypatch):
    """/v1/score and /v1/filter carry the notes in their JSON, and Cohere's /v1/rerank in meta.notes."""
    monkeypatch.setenv("DECIRANK_HOME", str(tmp_path))
    with ThreadedServer(create_app("local")) as url, httpx.Client(base_url=url, timeout=60) as client:
        scored = client.post("/v1/score", json={"texts": [GERMAN, ENGLISH], "question": "Is this about pets?"}).json()
        assert [(n["index"], n["kind"]) for n in scored["notes"]] == [(0, "non_english")]
        kept = client.post("/v1/filter", json={"items": [ENGLISH], "question": "Is this about pets?"}).json()
        assert kept["notes"] == []
        endless = " ".join([FILLER] * 4)
        reranked = client.post("/v1/rerank", json={"query": QUERY, "documents": [ANSWER, endless]}).json()
        assert [(n["index"], n["kind"]) for n in reranked["meta"]["notes"]] == [(1, "cut")]

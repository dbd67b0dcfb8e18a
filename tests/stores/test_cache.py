"""The decision cache: off by default; when on, the same question is asked of a model once."""

from __future__ import annotations

import pytest

import decirank
from decirank.errors import ConfigError
from decirank.stores.cache import DecisionCache, cache_key
from decirank.stores.runlog import current_runlog
from decirank.testing import ScriptedBackend, use_backend
from decirank.types.answers import ChoiceAnswer, DecisionResponse, LikelihoodAnswer, Note, ScoreAnswer, Usage
from decirank.types.questions import ChoiceQuestion, DecisionRequest, LikelihoodQuestion, ScoreQuestion


def by_length(request):
    return {qid: LikelihoodAnswer(min(1.0, len(q.instructions) / 100)) for qid, q in request.questions.items()}


def paid_backend():
    return ScriptedBackend(answer=by_length, usage=Usage(input_tokens=40, output_tokens=2, cost=0.01, calls=1))


def test_off_by_default_every_call_reaches_the_model(isolated_user_dir):
    """Without a setting, the cache is off: every call reaches the model and no cache file is made."""
    backend = paid_backend()
    with use_backend(backend) as model:
        decirank.rerank("fleas", ["a dog", "a cat"], model=model)
        decirank.rerank("fleas", ["a dog", "a cat"], model=model)
    assert len(backend.requests) == 2
    assert not (isolated_user_dir / "cache.db").exists()


def test_an_identical_call_is_answered_from_the_cache_and_recorded_as_a_hit(monkeypatch):
    """With the cache on, a repeated call costs nothing and is logged as a cached model call."""
    monkeypatch.setenv("DECIRANK_CACHE", "on")
    backend = paid_backend()
    with use_backend(backend) as model:
        first = decirank.rerank("fleas", ["a dog", "a cat"], model=model)
        second = decirank.rerank("fleas", ["a dog", "a cat"], model=model)
    assert len(backend.requests) == 1
    assert second.results == first.results
    assert (second.usage.input_tokens, second.usage.cost) == (0, None), "a hit costs nothing"
    runlog = current_runlog()
    (hit,) = runlog.run(second.run_id)["children"]
    assert (hit["cached"], hit["status"], hit["model"], hit["input_tokens"]) == (True, "success", model, 0)
    (miss,) = runlog.run(first.run_id)["children"]
    assert miss["cached"] is False and miss["input_tokens"] == 40
    (stats,) = runlog.stats()["models"]
    assert (stats["calls"], stats["cache_hits"]) == (2, 1)


def test_a_different_state_question_or_model_is_a_miss(monkeypatch):
    """A change to the state, a question or the model misses the cache."""
    monkeypatch.setenv("DECIRANK_CACHE", "on")
    backend = paid_backend()
    with use_backend(backend) as model:
        decirank.rerank("fleas", ["a dog"], model=model)
        decirank.rerank("ticks", ["a dog"], model=model)
        decirank.rerank("fleas", ["a cat"], model=model)
    assert len(backend.requests) == 3
    request = DecisionRequest("fleas", {"0": LikelihoodQuestion("a dog")})
    same = DecisionRequest("fleas", {"0": LikelihoodQuestion("a dog")})
    assert cache_key("scripted:a", request) == cache_key("scripted:a", same)
    assert cache_key("scripted:a", request) != cache_key("scripted:b", request)


def test_the_config_file_can_turn_it_on_and_the_environment_wins(isolated_user_dir, monkeypatch):
    """'[cache] enabled = true' turns the cache on, and DECIRANK_CACHE=off overrides it."""
    isolated_user_dir.mkdir(parents=True)
    (isolated_user_dir / "config.toml").write_text("[cache]\nenabled = true\n")
    backend = paid_backend()
    with use_backend(backend) as model:
        decirank.rerank("fleas", ["a dog"], model=model)
        decirank.rerank("fleas", ["a dog"], model=model)
        assert len(backend.requests) == 1
        monkeypatch.setenv("DECIRANK_CACHE", "off")
        decirank.rerank("fleas", ["a dog"], model=model)
    assert len(backend.requests) == 2


def test_failed_answers_are_not_cached(monkeypatch):
    """An answer that fails the response check is not stored, so the model is asked again."""
    monkeypatch.setenv("DECIRANK_CACHE", "on")
    broken = ScriptedBackend(answer=lambda request: {qid: LikelihoodAnswer(2.0) for qid in request.questions})
    with use_backend(broken) as model:
        for _ in range(2):
            with pytest.raises(decirank.InvalidAnswerError):
                decirank.rerank("fleas", ["a dog"], model=model)
    assert len(broken.requests) == 2


def test_a_wrong_setting_is_a_config_error(monkeypatch):
    """An unknown DECIRANK_CACHE value is a ConfigError naming the variable."""
    monkeypatch.setenv("DECIRANK_CACHE", "sometimes")
    with pytest.raises(ConfigError) as caught:
        decirank.rank(["a", "b"], "Which?", {}, model="lexical")
    assert "DECIRANK_CACHE" in str(caught.value)


def test_the_cache_file_round_trips_every_answer_kind(tmp_path):
    """Likelihood, choice and score answers come back from the file as they were stored."""
    cache = DecisionCache.open(tmp_path / "cache.db")
    request = DecisionRequest(
        {"k": [1, 2]},
        {
            "l": LikelihoodQuestion("true?"),
            "c": ChoiceQuestion("which?", {"a": "A", "b": "B"}),
            "s": ScoreQuestion("how good?", ("bad", "ok", "good")),
        },
    )
    answers = {
        "l": LikelihoodAnswer(0.25),
        "c": ChoiceAnswer({"a": 0.75, "b": 0.25}),
        "s": ScoreAnswer((0.1, 0.2, 0.7)),
    }
    cache.put(request, DecisionResponse("scripted:x", answers))
    hit = cache.get("scripted:x", request)
    assert hit is not None and hit.cached and dict(hit.answers) == answers
    assert cache.get("scripted:y", request) is None
    assert DecisionCache.open(tmp_path / "cache.db").count() == 1


def test_a_hit_carries_the_notes_of_the_stored_answer(tmp_path):
    """The model's notes on a text (cut, non_english) come back with a cached answer, as they were stored."""
    cache = DecisionCache.open(tmp_path / "cache.db")
    request = DecisionRequest("query", {"0": LikelihoodQuestion("doc"), "1": LikelihoodQuestion("doc two")})
    notes = {"0": (Note("cut", "read the first 7 of 9 characters"), Note("non_english", "not English", "state"))}
    answers = {"0": LikelihoodAnswer(0.5), "1": LikelihoodAnswer(0.1)}
    cache.put(request, DecisionResponse("scripted:x", answers, notes=notes))
    hit = DecisionCache.open(tmp_path / "cache.db").get("scripted:x", request)
    assert hit is not None and dict(hit.notes) == notes


def test_a_row_this_version_cannot_read_is_a_miss(tmp_path):
    """A stored answer in a shape no version wrote reads as a miss, so the model is asked again."""
    cache = DecisionCache.open(tmp_path / "cache.db")
    request = DecisionRequest("s", {"q": LikelihoodQuestion("true?")})
    key = cache_key("scripted:x", request)
    for stored in ('{"q": {"type": "likelihood"}}', '{"q": {"type": "hunch"}}', "[1, 2]", "not json"):
        cache.database.execute(
            "INSERT INTO decisions (key, model, answers, created_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (key) DO UPDATE SET answers = excluded.answers",
            (key, "scripted:x", stored, "2020-01-01T00:00:00+00:00"),
        )
        assert cache.get("scripted:x", request) is None, stored

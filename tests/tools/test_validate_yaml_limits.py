"""validate:yaml goes through the one guarded YAML reader and keeps to the call's budget: past it, UNKNOWN."""

from __future__ import annotations

import time

import pytest

import decirank
from decirank import Verdict
from decirank._yaml import MAX_SEXAGESIMAL_PARTS, MAX_YAML_CHARS, YamlLimit, YamlProblem, load_yaml

#: The report's artifact: 800 KB of one base-60 integer, which PyYAML's own loader builds for about 15 s.
SEXAGESIMAL = "x: 1" + ":0" * 400_000 + "\n"
#: Valid YAML that the pure-Python reader needs several seconds to read: 20,000 keys of small flow collections.
SLOW = "".join(f"k{number}: [a, b, {{c: d}}]\n" for number in range(20_000))


def test_a_huge_sexagesimal_integer_is_refused_at_once_with_a_timeout(store):
    """The 800 KB base-60 integer with "timeout": 5 answers in well under 5 s, and not VALID."""
    store.put("y/sexagesimal", SEXAGESIMAL)
    store.put("y/fine", "x: 1:30\n")  # a small base-60 integer is still YAML 1.1's 90
    started = time.monotonic()
    result = decirank.score_list(["y/sexagesimal", "y/fine"], "validate:yaml", store=store, timeout=5)
    elapsed = time.monotonic() - started
    by_ref = {entry.ref: entry for entry in result.ranked}
    assert elapsed < 3, elapsed
    assert by_ref["y/sexagesimal"].verdict == Verdict.INVALID
    assert "base-60" in by_ref["y/sexagesimal"].issues[0]
    assert by_ref["y/fine"].verdict == Verdict.VALID


def test_a_parse_that_outlives_the_budget_is_unknown_not_valid(store):
    """Valid but slow YAML under a 0.2 s budget: UNKNOWN, saying the budget ended it, returned near the budget."""
    store.put("y/slow", SLOW)
    started = time.monotonic()
    result = decirank.score_list(["y/slow"], "validate:yaml", store=store, timeout=0.2)
    elapsed = time.monotonic() - started
    (entry,) = result.ranked
    assert entry.verdict == Verdict.UNKNOWN and entry.score is None
    assert "0.2 s" in entry.issues[0] and "budget" in entry.issues[0]
    assert elapsed < 2, elapsed
    # With time enough, the same text is VALID: the budget, not the text, made it UNKNOWN.
    (entry,) = decirank.score_list(["y/slow"], "validate:yaml", store=store, timeout=60).ranked
    assert entry.verdict == Verdict.VALID


def test_the_reader_stops_itself_at_its_deadline():
    """Run where it can be stopped: the reader checks its deadline as it goes, in whatever thread runs it."""
    started = time.monotonic()
    with pytest.raises(YamlLimit, match="within 0.2 s"):
        load_yaml(SLOW, timeout=0.2, max_values=None)
    # Read whole, SLOW takes several seconds; stopped at its deadline, a fraction of that, with room for a busy CPU.
    assert time.monotonic() - started < 2


def test_a_text_over_the_size_limit_is_not_read(store):
    with pytest.raises(YamlLimit, match=f"at most {MAX_YAML_CHARS} characters"):
        load_yaml("a" * (MAX_YAML_CHARS + 1))
    store.put("y/huge", "a" * (MAX_YAML_CHARS + 1))
    (entry,) = decirank.score_list(["y/huge"], "validate:yaml", store=store).ranked
    assert entry.verdict == Verdict.UNKNOWN and "characters" in entry.issues[0]


def test_plans_and_inputs_meet_the_same_base_60_limit():
    """load_yaml, which plans and --input X.yaml read through, refuses the integer with the limit named."""
    with pytest.raises(YamlProblem, match=str(MAX_SEXAGESIMAL_PARTS)):
        load_yaml(SEXAGESIMAL, what_is_wrong="'plan.yaml' is not valid YAML")
    assert load_yaml("x: " + "1" + ":0" * 100) == {"x": 60**100}

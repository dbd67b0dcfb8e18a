"""score_list: real artifacts in a real store, scored by real commands, parsers and models."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import sys
import time
from pathlib import Path

import pytest

import decirank
from decirank import ArtifactStore, InvalidInputError, Verdict, register_validation_type
from decirank.errors import ServerError
from decirank.stores.runlog import current_runlog
from decirank.testing import ScriptedBackend, use_backend
from decirank.tools._evaluators import strip_code_fence
from decirank.tools._evaluators.exec import OUTPUT_LIMIT, run_command
from decirank.types.answers import LikelihoodAnswer, ScoreAnswer
from tests.processes import wait_until_gone

PYTHON = shlex.quote(sys.executable)
JSON_CHECK = f'exec:{PYTHON} -c "import json,sys; json.load(open(sys.argv[1]))" {{artifact}}'


# -- exec --------------------------------------------------------------------------------


def test_exec_scores_valid_and_invalid_artifacts_by_exit_status(store):
    """Exit 0 is VALID at 1.0; a failure is INVALID at 0.0 with the command's last lines as issues."""
    store.put("run1/good", '{"answer": 42}')
    store.put("run1/bad", '{"answer": ')
    result = decirank.score_list(["run1/bad", "run1/good"], JSON_CHECK, store=store)
    good, bad = result.ranked
    assert (good.ref, good.score, good.verdict, good.issues, good.rank) == ("run1/good", 1.0, Verdict.VALID, (), 1)
    assert (bad.ref, bad.score, bad.verdict, bad.rank) == ("run1/bad", 0.0, Verdict.INVALID, 2)
    assert "JSONDecodeError" in bad.issues[-1]
    assert bad.reason == "command exited with status 1"
    assert result.winners == ["run1/good", "run1/bad"]  # top_k 0: rank only, nothing pruned
    assert result.model is None and result.usage.calls == 0


def test_exec_strips_the_outer_fence_and_names_the_file_by_its_language(store):
    """A fenced Python artifact arrives as a .py file holding just the code, also as $ARTIFACT."""
    store.put("r/fenced", "```python\nimport sys\nsys.exit(0 if __file__.endswith('.py') else 3)\n```\n")
    is_the_py_file = 'case {artifact} in *.py) test "$ARTIFACT" = {artifact};; *) exit 9;; esac'
    command = f'exec:{is_the_py_file} && {PYTHON} "$ARTIFACT"'
    entry = decirank.score_list(["r/fenced"], command, store=store).ranked[0]
    assert entry.verdict == Verdict.VALID, entry.issues


def test_exec_runs_in_a_fresh_empty_folder_that_is_removed_after(store, tmp_path):
    """The working directory is a new temporary folder holding only the artifact, gone afterwards."""
    store.put("r/a", "text")
    record = tmp_path / "seen.txt"
    command = f'exec:pwd > {record} && ls -A >> {record} && test "$(pwd)" = "$(dirname "$ARTIFACT")"'
    assert decirank.score_list(["r/a"], command, store=store).ranked[0].verdict == Verdict.VALID
    folder, *listing = record.read_text().split()
    assert listing == ["artifact.txt"]
    assert folder != os.getcwd() and not Path(folder).exists()


def test_artifact_text_never_reaches_the_shell(store, tmp_path):
    """$(...) and backticks in an artifact stay text: nothing is created, the file holds them verbatim."""
    payload = f"$(touch {tmp_path}/pwned) `touch {tmp_path}/pwned2` ; touch {tmp_path}/pwned3 '\" $ARTIFACT"
    store.put("evil/agent", payload)
    expected = tmp_path / "expected.txt"
    expected.write_text(payload)
    commands = [
        f"exec:cmp {{artifact}} {expected}",
        f'exec:cat "$ARTIFACT" > /dev/null && cmp "$ARTIFACT" {expected}',
        "exec:echo {artifact}; cat {artifact}",
    ]
    for command in commands:
        assert decirank.score_list(["evil/agent"], command, store=store).ranked[0].verdict == Verdict.VALID
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("pwned")) == []


def test_a_timed_out_command_is_killed_with_its_grandchildren(store, tmp_path):
    """At the timeout the whole process group goes: the shell, its children and theirs."""
    pid_file = tmp_path / "pids.txt"
    store.put("slow/agent", "anything")
    command = (
        f"exec:sh -c 'sleep 60 & echo $! >> {pid_file}; sleep 60' & echo $! >> {pid_file}; "
        f"sleep 60 & echo $! >> {pid_file}; echo started; wait"
    )
    started = time.monotonic()
    result = decirank.score_list(["slow/agent"], command, store=store, exec_timeout=1)
    elapsed = time.monotonic() - started
    entry = result.ranked[0]
    assert (entry.score, entry.verdict) == (0.0, Verdict.INVALID)
    assert entry.reason == "timed out after 1 s"
    assert entry.issues[0].startswith("timed out after 1 s") and "started" in entry.issues
    assert elapsed < 10
    pids = [int(line) for line in pid_file.read_text().split()]
    assert len(pids) == 3
    assert wait_until_gone(pids) == []


def test_children_left_behind_by_a_finished_command_are_killed_and_do_not_hold_it_up(store, tmp_path):
    """A background child holding the output pipe neither delays the verdict nor outlives the command."""
    pid_file = tmp_path / "pid.txt"
    store.put("r/a", "x")
    started = time.monotonic()
    entry = decirank.score_list(["r/a"], f"exec:sleep 60 & echo $! > {pid_file}; exit 0", store=store).ranked[0]
    assert entry.verdict == Verdict.VALID
    assert time.monotonic() - started < 10
    assert wait_until_gone([int(pid_file.read_text())]) == []


def test_exec_runs_end_with_the_calls_time_budget(store, tmp_path):
    """A command runs no longer than what is left of the call's timeout, not its own 300 s: UNKNOWN, group killed."""
    pid_file = tmp_path / "pid"
    store.put("r/a", "x")
    started = time.monotonic()
    result = decirank.score_list(["r/a"], f"exec:echo $$ > {pid_file}; exec sleep 30", store=store, timeout=1)
    assert time.monotonic() - started < 5
    entry = result.ranked[0]
    assert (entry.score, entry.verdict) == (None, Verdict.UNKNOWN)
    assert entry.reason == "stopped when the call's time budget of 1 s ran out"
    assert entry.issues[0].endswith("the command and its children were killed")
    assert wait_until_gone([int(pid_file.read_text())]) == []


def test_refs_still_waiting_when_the_budget_is_spent_are_not_run(store, tmp_path):
    """With one run at a time, the ref queued behind a command that used the whole budget never starts."""
    log = tmp_path / "started"
    for ref in ("r/a", "r/b"):
        store.put(ref, ref)
    result = decirank.score_list(
        ["r/a", "r/b"], f"exec:echo x >> {log}; sleep 30", store=store, timeout=1, max_concurrency=1
    )
    assert sorted(entry.reason for entry in result.ranked) == [
        "not run: the call's time budget of 1 s was spent",
        "stopped when the call's time budget of 1 s ran out",
    ]
    assert log.read_text().split() == ["x"]
    assert all(entry.verdict == Verdict.UNKNOWN for entry in result.ranked)


def test_the_commands_own_timeout_still_ends_it_within_a_larger_budget(store):
    """Within a budget of 30 s, exec_timeout=1 ends the command: INVALID, as a command that is too slow is."""
    store.put("r/a", "x")
    entry = decirank.score_list(["r/a"], "exec:sleep 30", store=store, exec_timeout=1, timeout=30).ranked[0]
    assert (entry.score, entry.verdict, entry.reason) == (0.0, Verdict.INVALID, "timed out after 1 s")


def test_cancelling_the_call_kills_the_commands_process_group(store, tmp_path):
    """A caller that goes away (its task cancelled) takes the command and its children with it at once."""
    pid_file = tmp_path / "pids"
    store.put("r/a", "x")
    command = f"exec:sleep 30 & echo $! >> {pid_file}; echo $$ >> {pid_file}; wait"

    async def cancelled_after_a_moment() -> None:
        import anyio

        with anyio.move_on_after(1):
            await decirank.ascore_list(["r/a"], command, store=store, timeout=60)

    started = time.monotonic()
    asyncio.run(cancelled_after_a_moment())
    assert time.monotonic() - started < 5
    pids = [int(line) for line in pid_file.read_text().split()]
    assert len(pids) == 2 and wait_until_gone(pids) == []


def test_an_exec_command_that_utf8_cannot_encode_is_refused(store):
    """A lone surrogate in the command is an InvalidInputError naming the evaluator, before anything runs."""
    store.put("r/a", "x")
    with pytest.raises(InvalidInputError) as raised:
        decirank.score_list(["r/a"], "exec:echo \ud800", store=store)
    assert raised.value.field == "evaluator"


@pytest.mark.parametrize("evaluator", ["score:good\ud800", "validate:js\ud800on"])
def test_any_evaluator_that_utf8_cannot_encode_is_refused(store, evaluator):
    """score: and validate: are checked as exec: is, where the directive is parsed, before any model is asked."""
    store.put("r/a", "x")
    with pytest.raises(InvalidInputError) as raised:
        decirank.score_list(["r/a"], evaluator, store=store, model="lexical")
    assert raised.value.field == "evaluator"


def test_output_is_capped_to_its_last_64_kib(tmp_path):
    """A command printing megabytes keeps only the end, where a failure's cause usually is."""
    command = f"{PYTHON} -c \"import sys; sys.stdout.write('x' * 1_000_000 + '\\nthe end\\n')\"; exit 1"
    outcome = asyncio.run(run_command(command, cwd=tmp_path, env=dict(os.environ), timeout=30))
    assert outcome.returncode == 1 and outcome.truncated
    assert len(outcome.output.encode()) <= OUTPUT_LIMIT
    assert outcome.output.endswith("the end\n")


def test_a_hundred_refs_never_run_more_than_max_concurrency_at_once(store, tmp_path):
    """Each command appends a start and an end line to one log; replaying it counts how many overlapped."""
    log = tmp_path / "events.log"
    refs = [f"batch/agent{n:03d}" for n in range(100)]
    for ref in refs:
        store.put(ref, ref)
    command = f"exec:echo start >> {log}; sleep 0.1; echo end >> {log}"
    result = decirank.score_list(refs, command, max_concurrency=5, store=store)
    assert [entry.verdict for entry in result.ranked] == [Verdict.VALID] * 100
    running = peak = 0
    events = log.read_text().split()
    for event in events:
        running += 1 if event == "start" else -1
        peak = max(peak, running)
    assert len(events) == 200 and running == 0
    assert peak <= 5
    assert peak >= 2  # it did run concurrently


# -- ranking, pruning and stamps ------------------------------------------------------------


def test_top_k_keeps_the_best_in_stable_order_and_prunes_the_rest_with_a_reason(store):
    """Ties keep input order; refs past the cut are pruned with a reason naming the cut."""
    texts = {"r/a": "[1]", "r/b": "nope", "r/c": "{}", "r/d": '"x"', "r/e": "{"}
    for ref, text in texts.items():
        store.put(ref, text)
    result = decirank.score_list(list(texts), "validate:json", top_k=2, store=store)
    assert [entry.ref for entry in result.ranked] == ["r/a", "r/c", "r/d", "r/b", "r/e"]
    assert [entry.rank for entry in result.ranked] == [1, 2, 3, 4, 5]
    assert result.winners == ["r/a", "r/c"]
    assert [entry.pruned for entry in result.ranked] == [False, False, True, True, True]
    assert result.ranked[2].reason.startswith("pruned at the top-2 cut: ranked 3 of 5")
    assert result.ranked[0].reason == "parses as json"
    data = result.to_dict()
    assert set(data) >= {"run_id", "evaluator", "total", "top_k", "winners", "ranked"}
    assert (data["total"], data["top_k"], data["evaluator"]) == (5, 2, "validate:json")
    assert set(data["ranked"][0]) == {"rank", "ref", "score", "verdict", "issues", "reason", "pruned"}
    assert data["ranked"][3]["verdict"] == "INVALID" and data["ranked"][3]["issues"]
    json.dumps(data)


def test_every_ref_is_stamped_in_the_store(store):
    """Stamps carry the run id, evaluator, score, beam rank, pruned flag and reason of each ref."""
    store.put("s/one", "{}")
    store.put("s/two", "{")
    result = decirank.score_list([{"ref": "s/two"}, {"ref": "s/one"}], "validate:json", top_k=1, store=store)
    one, two = store.stamps("s/one"), store.stamps("s/two")
    assert len(one) == len(two) == 1
    assert (one[0].run_id, one[0].evaluator, one[0].score, one[0].beam_rank, one[0].pruned, one[0].verdict) == (
        result.run_id,
        "validate:json",
        1.0,
        1,
        False,
        "VALID",
    )
    assert (two[0].beam_rank, two[0].pruned, two[0].score) == (2, True, 0.0)
    assert two[0].reason == result.ranked[1].reason and "top-1 cut" in two[0].reason
    assert {s.ref for s in store.stamps(run_id=result.run_id)} == {"s/one", "s/two"}


def test_missing_and_empty_artifacts_are_unknown_not_a_crash(store):
    """They rank last without a score, never win, and say why."""
    store.put("m/ok", "{}")
    store.put("m/blank", "  \n")
    result = decirank.score_list(["m/gone", "m/blank", "m/ok"], "validate:json", store=store)
    assert [(e.ref, e.verdict, e.score) for e in result.ranked] == [
        ("m/ok", Verdict.VALID, 1.0),
        ("m/gone", Verdict.UNKNOWN, None),
        ("m/blank", Verdict.UNKNOWN, None),
    ]
    assert result.ranked[1].issues == ("no artifact is stored under this ref",)
    assert result.ranked[2].issues == ("the artifact is empty",)
    assert result.winners == ["m/ok"]
    pruned = decirank.score_list(["m/gone", "m/ok"], "validate:json", top_k=2, store=store)
    assert [(e.ref, e.pruned) for e in pruned.ranked] == [("m/ok", False), ("m/gone", True)]
    assert pruned.ranked[1].reason.startswith("pruned: not scored")


def test_refs_may_come_as_a_json_string_and_land_in_the_default_store(isolated_user_dir):
    """The JSON text of either form works, against the user's own store."""
    with ArtifactStore() as default:
        default.put("j/a", "[]")
    result = decirank.score_list('[{"ref": "j/a"}, "j/b"]', "validate:json")
    assert [e.verdict for e in result.ranked] == [Verdict.VALID, Verdict.UNKNOWN]
    with ArtifactStore() as default:
        assert default.stamps("j/a")[0].run_id == result.run_id


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"refs": []}, "refs"),
        ({"refs": "not json"}, "refs"),
        ({"refs": "r/a"}, "refs"),
        ({"refs": {"ref": "r/a"}}, "refs"),
        ({"refs": ["r/a", "bad"]}, "refs.1"),
        ({"refs": [{"ref": "a/b/c"}]}, "refs.0.ref"),
        ({"refs": [{"id": "r/a"}]}, "refs.0.ref"),
        ({"refs": [7]}, "refs.0"),
        ({"refs": ["r/a", "r/a"]}, "refs.1"),
        ({"evaluator": "shell:touch {marker}"}, "evaluator"),
        ({"evaluator": "exec:"}, "evaluator"),
        ({"evaluator": "score:   "}, "evaluator"),
        ({"evaluator": "validate:no-such-type"}, "evaluator"),
        ({"evaluator": ""}, "evaluator"),
        ({"top_k": -1}, "top_k"),
        ({"top_k": 1.5}, "top_k"),
        ({"max_concurrency": 0}, "max_concurrency"),
        ({"max_concurrency": True}, "max_concurrency"),
        ({"exec_timeout": 0}, "exec_timeout"),
        ({"timeout": -1}, "timeout"),
    ],
)
def test_bad_arguments_fail_before_any_work(store, tmp_path, arguments, field):
    """A clear InvalidInputError naming the field; no command runs and nothing is stamped."""
    marker = tmp_path / "ran"
    store.put("r/a", "{}")
    call = {"refs": ["r/a"], "evaluator": f"exec:touch {marker}", "store": store} | arguments
    call["evaluator"] = call["evaluator"].replace("{marker}", str(marker))
    with pytest.raises(InvalidInputError) as raised:
        decirank.score_list(call.pop("refs"), call.pop("evaluator"), **call)
    assert raised.value.field == field
    assert not marker.exists()
    assert store.stamps("r/a") == []


def test_an_unknown_evaluator_prefix_suggests_the_right_one(store):
    """A misspelt evaluator prefix is an InvalidInputError suggesting the right one."""
    with pytest.raises(InvalidInputError, match="did you mean 'exec:'"):
        decirank.score_list(["r/a"], "exe:true", store=store)


def test_an_unknown_type_lists_the_known_ones(store):
    """An unknown validate type suggests the nearest and lists the built-in and registered ones."""
    register_validation_type("sql", "an SQL query", store=store)
    with pytest.raises(InvalidInputError) as raised:
        decirank.score_list(["r/a"], "validate:sqll", store=store)
    assert "did you mean 'sql'" in str(raised.value) and "json, python, toml, yaml, sql" in str(raised.value)


def test_exec_needs_no_model_so_a_model_name_is_not_resolved(store):
    """exec and built-in types ask no model; an unusable model name cannot stop them."""
    store.put("r/a", "{}")
    assert decirank.score_list(["r/a"], "exec:true", store=store, model="nobody:nothing").ranked[0].score == 1.0


def test_the_async_twin_gives_the_same_shape(store):
    """ascore_list gives the same result as score_list, run id aside."""
    store.put("r/a", "{}")
    async_result = asyncio.run(decirank.ascore_list(["r/a"], "validate:json", store=store)).to_dict()
    sync_result = decirank.score_list(["r/a"], "validate:json", store=store).to_dict()
    assert async_result["ranked"][0]["verdict"] == "VALID"
    assert async_result | {"run_id": None} == sync_result | {"run_id": None}


# -- validate: built-in types ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("type_name", "valid", "invalid", "issue"),
    [
        ("json", '{"a": [1, 2]}', '{"a": [1, 2}', "line 1, column 12"),
        ("python", "def f(x):\n    return x\n", "def f(x)\n    return x\n", "line 1"),
        ("yaml", "a: 1\nb: [x, y]\n---\nc: 2\n", "a: [1\nb: 2\n", "line 2"),
        ("toml", 'title = "x"\n[owner]\nname = "y"\n', "title = \n", "line 1"),
    ],
)
def test_built_in_types_are_checked_by_their_parsers(store, type_name, valid, invalid, issue):
    """Ground truth without a model: VALID at 1.0 or INVALID at 0.0 with where it broke."""
    store.put("v/good", f"```{type_name}\n{valid}```")
    store.put("v/bad", invalid)
    good, bad = decirank.score_list(["v/bad", "v/good"], f"validate:{type_name}", store=store).ranked
    assert (good.ref, good.verdict, good.score) == ("v/good", Verdict.VALID, 1.0)
    assert (bad.ref, bad.verdict, bad.score) == ("v/bad", Verdict.INVALID, 0.0)
    assert issue in bad.issues[0]


def test_strip_code_fence_removes_only_the_outer_fence():
    """Only a fence around the whole text is removed, and its language is returned."""
    assert strip_code_fence("```json\n{}\n```") == ("{}\n", "json")
    assert strip_code_fence("~~~\nx\n~~~\n") == ("x\n", None)
    assert strip_code_fence("````md\n```py\nx\n```\n````") == ("```py\nx\n```\n", "md")
    assert strip_code_fence("```\n```") == ("", None)
    assert strip_code_fence("text ```x```") == ("text ```x```", None)
    assert strip_code_fence("```py\nx\n```\nmore prose") == ("```py\nx\n```\nmore prose", None)


# -- score: and validate: with decision models ------------------------------------------------

ESSAYS = {
    "essay/cats": "Cats purr, chase mice and nap in the sun; cats are curious pets.",
    "essay/stocks": "Quarterly earnings lifted the index while bond yields fell.",
}


@pytest.fixture
def essays(store):
    for ref, text in ESSAYS.items():
        store.put(ref, text)
    return list(ESSAYS)


def check_model_scores(result, model_prefix):
    assert result.model.startswith(model_prefix)
    assert result.usage.calls >= 2
    for entry in result.ranked:
        assert 0.0 <= entry.score <= 1.0
        expected = Verdict.VALID if entry.score >= 0.95 else Verdict.PARTIAL if entry.score > 0 else Verdict.INVALID
        assert entry.verdict == expected
        assert "expected level" in entry.reason


def test_score_with_the_lexical_backend_prefers_the_artifact_meeting_the_criterion(store, essays):
    """A real BM25 backend answers the graded score question; the cat essay wins on a cat criterion."""
    result = decirank.score_list(
        list(reversed(essays)), "score:the essay is about cats as pets", top_k=1, model="lexical", store=store
    )
    check_model_scores(result, "lexical:")
    assert result.winners == ["essay/cats"]
    assert result.ranked[0].score > result.ranked[1].score


def test_a_model_scored_run_is_in_the_run_log_under_the_stamps_run_id(store, essays):
    """score: goes through a ToolCall, so the run log holds the run the stamps point at."""
    result = decirank.score_list(essays, "score:cats", model="lexical", store=store)
    runlog = current_runlog()
    assert runlog is not None
    run = runlog.run(result.run_id)
    assert (run["tool"], run["status"]) == ("score_list", "success")
    assert {stamp.run_id for stamp in store.stamps(run_id=result.run_id)} == {result.run_id}


def test_score_with_the_embedded_model(store, essays):
    """The embedded local model answers the same question."""
    pytest.importorskip("decirank.backends.local")
    result = decirank.score_list(essays, "score:the essay is about cats as pets", model="local", store=store)
    check_model_scores(result, "local:")
    assert result.ranked[0].ref == "essay/cats"


def check_registered_type(result, model_prefix):
    assert result.model.startswith(model_prefix)
    for entry in result.ranked:
        assert 0.0 <= entry.score <= 1.0
        assert entry.verdict == (Verdict.VALID if entry.score >= 0.5 else Verdict.INVALID)
        assert entry.reason.endswith("likely a valid recipe")
    assert result.ranked[0].ref == "dish/soup"


@pytest.fixture
def recipes(store):
    register_validation_type("recipe", "a cooking recipe: ingredients and steps to cook a dish", store=store)
    store.put("dish/soup", "Recipe: onion soup. Ingredients: onions, butter, stock. Steps: cook the onions, add stock.")
    store.put("dish/poem", "The moon rose over silent hills and the night was long.")
    return ["dish/poem", "dish/soup"]


def test_a_registered_type_is_judged_by_the_lexical_backend(store, recipes):
    """validate:<registered> asks a likelihood question about the type's description."""
    result = decirank.score_list(recipes, "validate:recipe", model="lexical", store=store)
    check_registered_type(result, "lexical:")


def test_a_registered_type_is_judged_by_the_embedded_model(store, recipes):
    """The embedded local model judges a registered type too."""
    pytest.importorskip("decirank.backends.local")
    result = decirank.score_list(recipes, "validate:recipe", model="local", store=store)
    check_registered_type(result, "local:")


def test_verdicts_follow_the_thresholds(store):
    """score: VALID from 0.95, PARTIAL above 0, INVALID at 0; validate: VALID from a likelihood of 0.5."""
    for ref in ["t/full", "t/half", "t/none"]:
        store.put(ref, ref)
    levels = {"t/full": (0, 0, 0, 0, 1.0), "t/half": (0, 0, 1.0, 0, 0), "t/none": (1.0, 0, 0, 0, 0)}
    likelihoods = {"t/full": 0.5, "t/half": 0.49, "t/none": 0.0}
    texts = {ref: ref for ref in levels}

    def answer(request):
        ref = texts[request.state]
        question = next(iter(request.questions))
        if question == "criterion":
            return {question: ScoreAnswer(levels[ref])}
        return {question: LikelihoodAnswer(likelihoods[ref])}

    register_validation_type("thing", "a thing", store=store)
    with use_backend(ScriptedBackend(answer=answer)) as model:
        scored = decirank.score_list(list(levels), "score:x", model=model, store=store)
        validated = decirank.score_list(list(levels), "validate:thing", model=model, store=store)
    assert [(e.ref, e.score, e.verdict) for e in scored.ranked] == [
        ("t/full", 1.0, Verdict.VALID),
        ("t/half", 0.5, Verdict.PARTIAL),
        ("t/none", 0.0, Verdict.INVALID),
    ]
    assert [(e.ref, e.verdict) for e in validated.ranked] == [
        ("t/full", Verdict.VALID),
        ("t/half", Verdict.INVALID),
        ("t/none", Verdict.INVALID),
    ]


def test_a_failed_model_fails_the_whole_call_and_stamps_nothing(store):
    """No score is invented for an artifact whose model call failed."""
    store.put("f/a", "text")
    failing = ScriptedBackend(error=ServerError("down", status=503))
    with use_backend(failing) as model, pytest.raises(decirank.DecisionError):
        decirank.score_list(["f/a"], "score:anything", model=model, store=store)
    assert store.stamps("f/a") == []


DEEP = 1000
DEEP_ARTIFACTS = {
    "json": "[" * DEEP + "]" * DEEP,
    "yaml": "[" * DEEP + "]" * DEEP,
    "toml": "a = " + "[" * DEEP + "]" * DEEP,
}
FINE_ARTIFACTS = {"json": '{"a": [1, 2]}', "yaml": "a: [1, 2]\n", "toml": "a = [1, 2]\n"}


@pytest.mark.parametrize("kind", sorted(DEEP_ARTIFACTS))
def test_an_artifact_nested_1000_deep_is_invalid_with_a_reason_and_the_others_are_scored(store, kind):
    """validate:json/yaml/toml on a 1,000-deep artifact: that ref INVALID with a reason; the rest as usual."""
    store.put("r/deep", DEEP_ARTIFACTS[kind])
    store.put("r/fine", FINE_ARTIFACTS[kind])
    store.put("r/broken", "{[")
    result = decirank.score_list(["r/deep", "r/fine", "r/broken"], f"validate:{kind}", store=store)
    by_ref = {entry.ref: entry for entry in result.ranked}
    assert by_ref["r/deep"].verdict == Verdict.INVALID and by_ref["r/deep"].score == 0.0
    assert "nested too deeply" in " ".join(by_ref["r/deep"].issues)
    assert by_ref["r/fine"].verdict == Verdict.VALID
    assert by_ref["r/broken"].verdict == Verdict.INVALID


def test_a_deep_artifact_over_http_is_a_200_not_a_500(store, isolated_user_dir):
    """Through decirank serve, the deep artifact's ref is INVALID and the call a 200."""
    import httpx

    from decirank.server import create_app
    from tests.loopback import ThreadedServer

    with decirank.ArtifactStore() as default_store:
        default_store.put("h/deep", DEEP_ARTIFACTS["json"])
        default_store.put("h/fine", FINE_ARTIFACTS["json"])
    with ThreadedServer(create_app("lexical")) as url:
        response = httpx.post(f"{url}/v1/score_list", json={"refs": ["h/deep", "h/fine"], "evaluator": "validate:json"})
    assert response.status_code == 200, response.text
    verdicts = {entry["ref"]: entry["verdict"] for entry in response.json()["ranked"]}
    assert verdicts == {"h/deep": "INVALID", "h/fine": "VALID"}

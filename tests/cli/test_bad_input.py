"""Bad input on the command line: one line on stderr naming what was wrong, exit 2, never a traceback.

Every case runs the real CLI in a subprocess. They all run at once, in parallel, from one
module fixture; each parametrised test then checks its own case.
"""

from __future__ import annotations

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.cli._run import decirank

#: Longer than Python converts (sys.get_int_max_str_digits() is 4300 by default).
HUGE_INT = "1" * 5000
#: Deeper than any recursive parser goes; the --state, --input and --refs values stay under
#: Linux's 128 KiB limit on one argument.
DEEP_FILE = "[" * 100_000 + "]" * 100_000
DEEP_ARGUMENT = "[" * 50_000 + "]" * 50_000
#: What a byte that is not UTF-8 (0xff) becomes in Python's argv, and goes back to being.
NOT_UTF8_ARGUMENT = os.fsdecode(b"\xff")
BAD_URL = "http://[::1"

RANK = ("rank", "{d}/ok.json", "-i", "Which?", "-s", "pets", "-m", "lexical")
PLAN = ("plan", "run", "{d}/plan.yaml")

FILES = {
    "ok.json": '["a cat", "a car"]',
    "huge.json": f"[{HUGE_INT}]",
    "deep.json": DEEP_FILE,
    "surrogate.json": '["a cat", "\\ud800 a car"]',
    "surrogate.jsonl": '"a cat"\n"\\udfff a car"\n',
    "nan.json": '["a cat", NaN]',
    "overflow.json": '["a cat", 1e999]',
    "huge.yaml": f"items: [{HUGE_INT}]\n",
    "deep.yaml": DEEP_FILE + "\n",
    "plan.yaml": (
        "- id: E1\n  tool_name: builtin__rank\n  input:\n"
        '    items: "{{input.items}}"\n    instructions: Which?\n    state: pets\n    model: lexical\n'
    ),
    "huge-plan.yaml": f"- id: E1\n  tool_name: builtin__rank\n  input: {{x: {HUGE_INT}}}\n",
    "deep-plan.yaml": f"- id: E1\n  tool_name: builtin__rank\n  input: {DEEP_FILE}\n",
    "run.json": '[{"query": "q", "hits": []}]',
    "qrels.txt": "1 Q0 d1 2\n",
}

# (id, arguments ({d} is the folder of FILES), standard input (a file of FILES) or None,
#  what stderr must name)
CASES: list[tuple[str, tuple[str, ...], str | None, tuple[str, ...]]] = [
    # A number with 5,000 digits, 100,000-deep nesting, lone surrogates, NaN: in files and stdin.
    ("items-huge-int", ("rank", "{d}/huge.json", *RANK[2:]), None, ("ITEMS", "huge.json", "4300 digits")),
    ("items-deep", ("rank", "{d}/deep.json", *RANK[2:]), None, ("ITEMS", "deep.json", "nested more than 64 levels deep")),
    ("items-surrogate", ("rank", "{d}/surrogate.json", *RANK[2:]), None, ("ITEMS", "surrogate.json", "U+D800")),
    ("items-jsonl-surrogate", ("rank", "{d}/surrogate.jsonl", *RANK[2:]), None, ("ITEMS", "line 2", "U+DFFF")),
    ("items-nan", ("rank", "{d}/nan.json", *RANK[2:]), None, ("ITEMS", "nan.json", "NaN")),
    ("items-overflow", ("rank", "{d}/overflow.json", *RANK[2:]), None, ("ITEMS", "overflow.json", "out of range")),
    ("rerank-surrogate", ("rerank", "{d}/surrogate.json", "-q", "pets", "-m", "lexical"), None,
     ("DOCUMENTS", "surrogate.json", "U+D800")),
    ("filter-surrogate", ("filter", "{d}/surrogate.json", "-q", "Pet?", "-s", "x", "-m", "lexical"), None,
     ("ITEMS", "surrogate.json", "U+D800")),
    ("stdin-huge-int", ("rank", "-", *RANK[2:]), "huge.json", ("ITEMS", "standard input", "4300 digits")),
    ("stdin-deep", ("rerank", "-", "-q", "pets", "-m", "lexical"), "deep.json",
     ("DOCUMENTS", "standard input", "nested more than 64 levels deep")),
    # --state
    ("state-huge-int", (*RANK[:5], HUGE_INT, *RANK[6:]), None, ("--state", "4300 digits")),
    ("state-deep", (*RANK[:5], DEEP_ARGUMENT, *RANK[6:]), None, ("--state", "nested more than 64 levels deep")),
    ("state-surrogate", (*RANK[:5], '"\\ud800"', *RANK[6:]), None, ("--state", "U+D800")),
    ("state-surrogate-key", (*RANK[:5], '{"\\udfff": 1}', *RANK[6:]), None, ("--state", "U+DFFF")),
    ("state-not-utf8", ("filter", "{d}/ok.json", "-q", "Pet?", "-s", NOT_UTF8_ARGUMENT, "-m", "lexical"), None,
     ("--state", "U+DCFF")),
    # plan run: --input (a JSON file, YAML file or inline JSON) and the plan file itself
    ("plan-input-huge-int", (*PLAN, "--input", "{d}/huge.json"), None, ("--input", "huge.json", "4300 digits")),
    ("plan-input-deep", (*PLAN, "--input", "{d}/deep.json"), None, ("--input", "deep.json", "nested more than 64 levels deep")),
    ("plan-input-stdin-deep", (*PLAN, "--input", "-"), "deep.json", ("--input", "standard input", "nested")),
    ("plan-input-inline-huge-int", (*PLAN, "--input", f'{{"items": [{HUGE_INT}]}}'), None,
     ("--input", "4300 digits")),
    ("plan-input-inline-surrogate", (*PLAN, "--input", '{"items": ["\\ud800"]}'), None,
     ("--input", "items.0", "U+D800")),
    ("plan-input-yaml-huge-int", (*PLAN, "--input", "{d}/huge.yaml"), None, ("--input", "huge.yaml", "4300 digits")),
    ("plan-input-yaml-deep", (*PLAN, "--input", "{d}/deep.yaml"), None, ("--input", "deep.yaml", "nested")),
    ("plan-file-huge-int", ("plan", "run", "{d}/huge-plan.yaml"), None, ("plan", "huge-plan.yaml", "4300 digits")),
    ("plan-file-deep", ("plan", "run", "{d}/deep-plan.yaml"), None, ("plan", "deep-plan.yaml", "nested")),
    ("refs-inline-deep", ("score-list", "--refs", DEEP_ARGUMENT, "-e", "score:good", "-m", "lexical"), None,
     ("--refs", "nested more than 64 levels deep")),
    # runs
    ("runs-limit-overflow", ("runs", "list", "--limit", "99999999999999999999999"), None, ("--limit",)),
    ("runs-show-not-utf8", ("runs", "show", NOT_UTF8_ARGUMENT, "--json"), None, ("run id", "U+DCFF")),
    # --base-url that no HTTP client can parse
    ("base-url-rank", (*RANK[:-1], "systemone:local", "--base-url", BAD_URL), None, ("--base-url",)),
    ("base-url-rerank", ("rerank", "{d}/ok.json", "-q", "x", "-m", "ollama:default", "--base-url", BAD_URL), None,
     ("--base-url",)),
    ("base-url-score-list",
     ("score-list", "--refs", '["a/b"]', "-e", "score:good", "-m", "systemone:local", "--base-url", BAD_URL), None,
     ("--base-url",)),
    # eval trec: a named pipe is refused (opening one with no writer blocks forever)
    ("eval-trec-fifo-run", ("eval", "trec", "{d}/fifo", "{d}/qrels.txt"), None, ("run", "fifo", "not a regular file")),
    ("eval-trec-fifo-qrels", ("eval", "trec", "{d}/run.json", "{d}/fifo"), None,
     ("qrels", "fifo", "not a regular file")),
    ("eval-trec-deep-run", ("eval", "trec", "{d}/deep.json", "{d}/qrels.txt"), None, ("run:", "recursion")),
    # serve: limits that would make every request fail are refused before a port is bound
    ("serve-max-body-bytes-negative", ("serve", "--port", "0", "--max-body-bytes", "-1"), None, ("--max-body-bytes",)),
    ("serve-max-body-bytes-zero", ("serve", "--port", "0", "--max-body-bytes", "0"), None, ("--max-body-bytes",)),
    ("serve-timeout-nan", ("serve", "--port", "0", "--timeout", "nan"), None, ("--timeout",)),
    ("serve-timeout-negative", ("serve", "--port", "0", "--timeout", "-1"), None, ("--timeout",)),
    ("serve-timeout-zero", ("serve", "--port", "0", "--timeout", "0"), None, ("--timeout",)),
    ("serve-timeout-infinite", ("serve", "--port", "0", "--timeout", "inf"), None, ("--timeout",)),
]

#: Seconds one case may take: a fixed CLI answers in about one; a hanging one fails, not stalls.
CASE_TIMEOUT = 45


def _clean_environment(home: Path) -> dict[str, str]:
    """This process's environment with a fresh DECIRANK_HOME and no other DECIRANK_ variable.

    Built here because conftest's per-test isolation is not in place yet when a module fixture runs.
    """
    environment = {name: value for name, value in os.environ.items() if not name.startswith("DECIRANK_")}
    return {**environment, "DECIRANK_HOME": str(home)}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, Any]:
    """Each case's CompletedProcess (or the exception running it raised), all run in parallel."""
    folder = tmp_path_factory.mktemp("bad-input")
    for name, text in FILES.items():
        (folder / name).write_text(text, encoding="utf-8")
    if hasattr(os, "mkfifo"):
        os.mkfifo(folder / "fifo")

    def run(case: tuple[str, tuple[str, ...], str | None, tuple[str, ...]]) -> Any:
        case_id, arguments, stdin, _ = case
        if "{d}/fifo" in arguments and not hasattr(os, "mkfifo"):
            return None
        args = [argument.replace("{d}", str(folder)) for argument in arguments]
        text = (folder / stdin).read_text(encoding="utf-8") if stdin else ""
        environment = _clean_environment(folder / f"home-{case_id}")
        try:
            return decirank(*args, input=text, env=environment, timeout=CASE_TIMEOUT)
        except subprocess.TimeoutExpired as error:
            return error

    with ThreadPoolExecutor(max_workers=max(4, 2 * (os.cpu_count() or 1))) as pool:
        results = list(pool.map(run, CASES))
    return {case[0]: result for case, result in zip(CASES, results, strict=True)}


@pytest.mark.parametrize(("case_id", "names"), [(case[0], case[3]) for case in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_naming_it_and_exit_2(outcomes, case_id, names):
    done = outcomes[case_id]
    if done is None:
        pytest.skip("no named pipes here")
    assert not isinstance(done, subprocess.TimeoutExpired), f"still running after {CASE_TIMEOUT} s"
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-2000:]
    assert lines[0].startswith("error: "), lines[0]
    for name in names:
        assert name in lines[0], f"{name!r} not in {lines[0]!r}"
    assert done.returncode == 2, lines[0]
    assert done.stdout == ""


def _strict_json(text: str) -> Any:
    """Parse JSON as any other language would: NaN and Infinity are not JSON."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def _show(run_id: str) -> Any:
    done = decirank("runs", "show", run_id, "--json")
    assert done.returncode == 0, done.stderr
    return _strict_json(done.stdout)


def test_runs_show_json_is_json(tmp_path):
    """--state NaN is the text "NaN" (NaN is not JSON), and a NaN logged from Python is shown as null."""
    items = tmp_path / "items.json"
    items.write_text('["a cat", "a car"]')
    done = decirank("rank", str(items), "-i", "Which?", "-s", "NaN", "-m", "lexical", "--json")
    assert done.returncode == 0, done.stderr
    assert _show(json.loads(done.stdout)["run_id"])["inputs"]["state"] == "NaN"

    import decirank as api
    from decirank.stores.runlog import current_runlog

    ranked = api.rank(["a cat", "a car"], "Which?", {"x": float("nan")}, model="lexical")
    current_runlog().flush()
    assert _show(ranked.run_id)["inputs"]["state"] == {"x": None}

"""Schemathesis against decirank serve in-process: generated requests, valid and not, never get a 5xx.

Every response must be one of the statuses the OpenAPI document lists for
its route, with a body of the documented shape. The app runs the ``lexical``
model (no embedded model to load), refuses ``exec:`` evaluators, and the
example counts and seed are fixed, so the run is bounded and repeatable.
"""

from __future__ import annotations

import json
import tempfile

import pytest
import schemathesis  # the test extra installs it, and hypothesis with it
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from decirank._jsonpath import MAX_NESTING
from decirank.server import create_app

EXAMPLES_PER_OPERATION = 60
DEEP_EXAMPLES_PER_OPERATION = 15
#: A request's own budget under which no model call can finish: a 504 is the right answer to it.
SMALL_BUDGET = 0.01
# A schema cannot say all the tools refuse (unknown models, malformed refs): those are 422s naming the
# field, which positive_data_acceptance would count as valid data rejected. Server errors are checked
# by assert_no_server_error, which knows the one 5xx a request may ask for.
EXCLUDED_CHECKS = [schemathesis.checks.positive_data_acceptance, schemathesis.checks.not_a_server_error]

# The schema is loaded when the module is collected, so the app is made then, away from the user's own
# config; while the tests run, the autouse fixture gives each its own DECIRANK_HOME (and run log).
with pytest.MonkeyPatch.context() as patch:
    patch.setenv("DECIRANK_HOME", tempfile.mkdtemp(prefix="decirank-fuzz-"))
    # Schemathesis's in-process client names itself "testserver", which a loopback server refuses (421):
    # served as on another address here, the Host and Origin checks are left to the tests of their own.
    app = create_app("lexical", timeout=5, host="testserver")
schema = schemathesis.openapi.from_asgi("/openapi.json", app)


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_generated_requests_get_documented_answers_and_never_a_5xx(case):
    """No 5xx, a documented status, a documented body and content type, for every operation."""
    response = case.call_and_validate(excluded_checks=EXCLUDED_CHECKS)
    assert_no_server_error(case, response)


def assert_no_server_error(case, response) -> None:
    """No 5xx, but the 504 a request asks for with a budget too small for any model call."""
    if response.status_code == 504:
        budget = case.body.get("timeout") if isinstance(case.body, dict) else None
        assert isinstance(budget, int | float) and budget < SMALL_BUDGET, response.text
        return
    assert response.status_code < 500, response.text


@schema.include(method="POST").parametrize()
@schema.given(data=st.data())
@settings(
    max_examples=DEEP_EXAMPLES_PER_OPERATION,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_deeply_nested_bodies_get_documented_answers_and_never_a_5xx(case, data):
    """A generated body with one of its fields nested 60 to 5,000 lists deep: a documented answer, never a 5xx."""
    if not isinstance(case.body, dict) or not case.body:
        return
    field = data.draw(st.sampled_from(sorted(case.body)), label="field")
    depth = data.draw(st.integers(min_value=MAX_NESTING - 4, max_value=5000), label="depth")
    # Sent as text: the case itself stays shallow, as schemathesis walks it recursively.
    marker = "\u0000deep\u0000"
    text = json.dumps({**case.body, field: marker})
    inner = json.dumps(case.body[field])
    text = text.replace(json.dumps(marker), "[" * depth + inner + "]" * depth)
    response = case.call(data=text.encode(), headers={"content-type": "application/json"})
    case.validate_response(response, excluded_checks=EXCLUDED_CHECKS)
    assert_no_server_error(case, response)
    if depth + 1 > MAX_NESTING:  # the body holds the field: one level more
        assert response.status_code == 422, response.text
        assert f"at most {MAX_NESTING} levels of nesting" in response.text

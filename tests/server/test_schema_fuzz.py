"""Schemathesis against decirank serve in-process: generated requests, valid and not, never get a 5xx.

Every response must be one of the statuses the OpenAPI document lists for
its route, with a body of the documented shape. The app runs the ``lexical``
model (no embedded model to load), refuses ``exec:`` evaluators, and the
example counts and seed are fixed, so the run is bounded and repeatable.
"""

from __future__ import annotations

import tempfile

import pytest
import schemathesis  # the test extra installs it, and hypothesis with it
from hypothesis import HealthCheck, settings

from decirank.server import create_app

EXAMPLES_PER_OPERATION = 60

# The schema is loaded when the module is collected, so the app is made then, away from the user's own
# config; while the tests run, the autouse fixture gives each its own DECIRANK_HOME (and run log).
with pytest.MonkeyPatch.context() as patch:
    patch.setenv("DECIRANK_HOME", tempfile.mkdtemp(prefix="decirank-fuzz-"))
    app = create_app("lexical", timeout=5)
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
    # A schema cannot say all the tools refuse (blank text, unknown models, malformed refs): those are 422s
    # naming the field, which this check would count as valid data rejected.
    response = case.call_and_validate(excluded_checks=[schemathesis.checks.positive_data_acceptance])
    assert response.status_code < 500, response.text

"""The shared HTTP plumbing's pure parts: how long to wait before a retry."""

from __future__ import annotations

import email.utils
import time

import pytest

from decirank.backends._http import INITIAL_RETRY_DELAY, MAX_RETRY_DELAY, retry_after_seconds, retry_delay


def test_retry_after_ms_wins_over_retry_after():
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25


def test_retry_after_may_be_seconds_or_a_date():
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    in_ten_seconds = email.utils.formatdate(time.time() + 10, usegmt=True)
    assert retry_after_seconds({"retry-after": in_ten_seconds}) == pytest.approx(10, abs=1.5)
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


def test_backoff_doubles_with_jitter_up_to_a_ceiling():
    for attempt in range(6):
        ceiling = min(INITIAL_RETRY_DELAY * 2**attempt, MAX_RETRY_DELAY)
        assert 0.75 * ceiling <= retry_delay(attempt, None) <= ceiling
    assert retry_delay(0, 4.0) == 4.0, "the server's word is taken as it is"

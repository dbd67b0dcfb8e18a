"""The shared HTTP plumbing's parts that need no server: retry delays, options, config overrides."""

from __future__ import annotations

import email.utils
import time

import pytest

from decirank.backends import create_backend
from decirank.backends._http import INITIAL_RETRY_DELAY, MAX_RETRY_DELAY, retry_after_seconds, retry_delay
from decirank.decisions.decider import Decider
from decirank.errors import ConfigError, InvalidInputError


def test_retry_after_ms_wins_over_retry_after():
    """The millisecond header is the more precise, so it is read first."""
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25


def test_retry_after_may_be_seconds_or_a_date():
    """Retry-After is read as seconds or as an HTTP date; anything else means the server did not say."""
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    in_ten_seconds = email.utils.formatdate(time.time() + 10, usegmt=True)
    assert retry_after_seconds({"retry-after": in_ten_seconds}) == pytest.approx(10, abs=1.5)
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


def test_backoff_doubles_with_jitter_up_to_a_ceiling():
    """Without a server's word the delay doubles per attempt, jittered down by at most a quarter, up to a ceiling."""
    for attempt in range(6):
        ceiling = min(INITIAL_RETRY_DELAY * 2**attempt, MAX_RETRY_DELAY)
        assert 0.75 * ceiling <= retry_delay(attempt, None) <= ceiling
    assert retry_delay(0, 4.0) == 4.0, "the server's word is taken as it is"


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("base_url", "127.0.0.1:8000"),
        ("base_url", 8000),
        ("timeout", "5"),
        ("timeout", 0),
        ("timeout", True),
        ("max_retries", "2"),
        ("max_retries", -1),
    ],
)
def test_a_wrong_option_is_named_before_any_call(option, value):
    """A base URL without a scheme, or a timeout or retry count that is not a fitting number, is refused by name."""
    with pytest.raises(InvalidInputError) as caught:
        create_backend("systemone:m", **{option: value})
    assert caught.value.field == option


def test_an_option_from_the_config_file_is_checked_too(isolated_user_dir):
    """A config file may give any TOML value; a string timeout is named, not a TypeError mid-call."""
    isolated_user_dir.mkdir(parents=True, exist_ok=True)
    (isolated_user_dir / "config.toml").write_text('[providers.systemone]\ntimeout = "5"\n')
    with pytest.raises(InvalidInputError, match="timeout: expected a number of seconds above 0"):
        Decider.resolve("systemone:m")


@pytest.mark.parametrize(("limit", "value"), [("max_options", 1), ("max_levels", 1), ("max_questions", 0)])
def test_a_configured_limit_no_request_could_meet_is_refused(isolated_user_dir, limit, value):
    """A choice needs two options, a score two levels, a call one question: a lower limit names its entry."""
    isolated_user_dir.mkdir(parents=True, exist_ok=True)
    (isolated_user_dir / "config.toml").write_text(f'[limits."systemone:m"]\n{limit} = {value}\n')
    with pytest.raises(ConfigError, match=rf'limits."systemone:m".{limit} must be a whole number of at least'):
        create_backend("systemone:m")

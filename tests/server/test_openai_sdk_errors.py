"""OpenAI's own SDK against ``decirank serve``'s /v1/decisions: a 422 it raises says what was wrong."""

from __future__ import annotations

import pytest

from decirank.server import create_app
from tests.loopback import ThreadedServer

openai = pytest.importorskip("openai")


@pytest.fixture(scope="module")
def client():
    with ThreadedServer(create_app("lexical")) as url:
        yield openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=30)


def test_a_misshapen_body_is_a_422_whose_message_the_sdk_shows(client):
    """A question missing its instructions: the SDK's error carries decirank's message naming the field."""
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        client.decisions.create(model="lexical", input="my dog has fleas", questions=[{"type": "predicate"}])
    error = caught.value
    assert error.status_code == 422
    assert error.body["type"] == "InvalidInputError"
    assert error.body["field"] == "questions.0.predicate.instructions"
    assert "questions.0.predicate.instructions: Field required" in error.message


def test_a_refused_meaning_is_a_422_whose_message_the_sdk_shows_too(client):
    """Empty instructions pass the schema but not the tool: the SDK still gets the message naming the field."""
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        client.decisions.create(
            model="lexical", input="hi", questions=[{"type": "predicate", "instructions": "", "name": "q"}]
        )
    assert "questions.0.instructions: expected a non-empty string" in caught.value.message

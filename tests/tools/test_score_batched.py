"""score's calls: many texts in each call of the embedded model, one request per text (bounded) on the wire."""

from __future__ import annotations

import asyncio
import math
import os
import sys
import threading
import time

import pytest

import decirank
from decirank.decisions.decider import Decider
from decirank.errors import DecisionTimeoutError
from decirank.stores.runlog import current_runlog
from decirank.types.questions import DecisionRequest, Example, LikelihoodQuestion
from tests.loopback import Reply, ScriptedServer, free_port, subprocess_server

TEXTS = [
    "A moving, funny and beautifully acted film.",
    "A dull mess that wastes its cast.",
    "My parcel never arrived and nobody answers the phone.",
    "Where is my refund?",
    "The app crashes at login",
    "Der Film war wunderbar und sehr lustig.",
    "  a text with blanks round it  ",
    "long " * 400 + "end",
]
QUESTION = "Is this review positive?"
EXAMPLES = [{"item": "I loved it", "answer": True}, {"item": "An awful waste of time", "answer": False}]


def _one_request_per_text(model: str, question: LikelihoodQuestion, texts: list[str]) -> list:
    """What score sent before it batched: each text the state of its own request, straight to the backend."""
    backend = Decider.resolve(model).chain[0]

    async def ask() -> list:
        return [await backend.decide(DecisionRequest(state=t, questions={"score": question})) for t in texts]

    return asyncio.run(ask())


@pytest.mark.parametrize("model", ["local", "local:minilm"])
@pytest.mark.parametrize("options", [{}, {"true": "a positive review", "false": "a negative review"}, "examples"])
def test_local_answers_are_identical_to_one_request_per_text(model, options):
    """Batched into a few calls, each text's probability and notes are exactly what its own request gives."""
    kwargs = {"examples": EXAMPLES} if options == "examples" else options
    result = decirank.score(TEXTS, QUESTION, model=model, **kwargs)
    examples = tuple(Example(e["item"], e["answer"]) for e in kwargs.get("examples", ()))
    asked = LikelihoodQuestion(QUESTION, true=kwargs.get("true"), false=kwargs.get("false"), examples=examples)
    alone = _one_request_per_text(model, asked, TEXTS)
    assert result.probabilities == [response.answers["score"].probability for response in alone]
    before = [(i, note) for i, response in enumerate(alone) for note in response.notes.get("score", ())]
    assert [(note.index, note.note) for note in result.notes] == before
    assert [note.index for note in result.notes] == [len(TEXTS) - 1], "the long text is said to be cut"
    # One call for every text that reads back exactly, one of its own for the text with blanks round it.
    assert result.usage.calls == 2


def test_local_makes_one_call_per_256_texts():
    """600 texts are 3 calls of the embedded model, not 600, and the run log has 3 model calls."""
    texts = [f"review number {i}: {'great' if i % 2 else 'bad'} film" for i in range(600)]
    result = decirank.score(texts, QUESTION, model="local")
    assert result.usage.calls == math.ceil(600 / 256)
    assert len(current_runlog().run(result.run_id)["children"]) == 3
    assert result.probabilities[1] > result.probabilities[0]


def test_a_question_with_a_frame_of_its_own_goes_text_by_text():
    """A question the embedded model would split itself ("Sentiment: ...") keeps one request per text."""
    result = decirank.score(TEXTS[:3], "Sentiment: is it positive?", model="local")
    assert result.usage.calls == 3


def test_splade_only_goes_text_by_text_with_the_same_answers():
    """local:splade reads a framed question the other way round, so its texts keep requests of their own."""
    result = decirank.score(TEXTS[:3], QUESTION, model="local:splade")
    alone = _one_request_per_text("local:splade", LikelihoodQuestion(QUESTION), TEXTS[:3])
    assert result.probabilities == [response.answers["score"].probability for response in alone]
    assert result.usage.calls == 3


class _Counting:
    """A System One body that counts the requests in flight; the first ones wait until ``together`` are,
    so the overlap is seen whatever the machine's load, and the most ever in flight is kept."""

    def __init__(self, together: int, hold: float = 0.05) -> None:
        self.together, self.hold = together, hold
        self.in_flight = self.peak = 0
        self.lock = threading.Lock()
        self.reached = threading.Event()

    def __call__(self, request: dict) -> dict:
        with self.lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            if self.in_flight >= self.together:
                self.reached.set()
        self.reached.wait(timeout=30)
        time.sleep(self.hold)
        with self.lock:
            self.in_flight -= 1
        return {
            "model": request["model"],
            "answers": {qid: {"type": "noul", "noul": 0.25} for qid in request["questions"]},
            "usage": {"input_tokens": 3, "output_tokens": 1},
        }


def test_one_state_per_request_formats_send_texts_concurrently_within_the_limit():
    """Over System One each text is a request; they overlap, never more than max_concurrency at once."""
    counting = _Counting(together=3)
    with ScriptedServer() as server:
        url = server.script("s1", Reply(body=counting))
        texts = [f"text {i}" for i in range(12)]
        result = decirank.score(texts, QUESTION, model="systemone:m", base_url=url, max_concurrency=3)
        assert result.probabilities == [0.25] * 12
        assert sorted(r.body["state"] for r in server.requests_to("s1")) == sorted(texts)
    assert counting.reached.is_set() and counting.peak == 3


def test_the_concurrent_requests_share_the_calls_budget():
    """A budget shorter than the queued requests need fails the call with a timeout, never waits them all out."""
    with ScriptedServer() as server:
        # 40 requests two at a time, 0.3 s each, need 6 s: far past the budget of 0.5 s.
        url = server.script("s1", Reply(body=_Counting(together=2, hold=0.3)))
        started = time.monotonic()
        with pytest.raises(DecisionTimeoutError):
            texts = [f"text {i}" for i in range(40)]
            decirank.score(texts, QUESTION, model="systemone:m", base_url=url, max_concurrency=2, timeout=0.5)
        assert time.monotonic() - started < 5


def test_max_concurrency_is_checked():
    """max_concurrency is a count of at least 1, named when it is not."""
    with pytest.raises(decirank.InvalidInputError, match="max_concurrency"):
        decirank.score(["a"], QUESTION, model="lexical", max_concurrency=0)


def test_decirank_serve_as_the_hosted_model_answers_as_local_does(tmp_path):
    """score through systemone: to a decirank serve subprocess (one request per text) equals local's batched calls."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "DECIRANK_HOME": str(tmp_path)}
    env.pop("DECIRANK_ROLE_DECIDER", None)
    command = [sys.executable, "-m", "decirank", "serve", "--port", str(port), "--model", "local"]
    with subprocess_server(command, url, ready_path="/healthz", env=env, timeout=120):
        remote = decirank.score(TEXTS[:6], QUESTION, model="systemone:local", base_url=url)
    local = decirank.score(TEXTS[:6], QUESTION, model="local")
    assert remote.probabilities == pytest.approx(local.probabilities, rel=1e-9)
    assert remote.usage.calls == 6 and local.usage.calls == 1

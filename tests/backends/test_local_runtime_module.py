"""The scripts' module (``decirank.backends.local.runtime``): every name it lists is there, and the reader's
logits it gives are the ones the model answers with."""

from __future__ import annotations

import threading

import numpy as np

from decirank.backends.local import runtime
from decirank.backends.local._model import VARIANTS, LocalModel
from decirank.backends.local._runtime import Runtime, shared_runtime
from decirank.types.questions import LikelihoodQuestion

TEXT = "My dog keeps scratching; the vet found fleas."
QUESTION = "Is this about pets?"


def test_every_name_the_module_lists_is_there():
    assert len(set(runtime.__all__)) == len(runtime.__all__)
    missing = [name for name in runtime.__all__ if not hasattr(runtime, name)]
    assert missing == []


def test_the_readers_logits_are_the_models_own(monkeypatch):
    """The model reads one pair for a plain yes/no question about one text: the script's function gives its logit."""
    seen: dict[tuple[str, str], float] = {}
    reader_logits = shared_runtime.reader_logits

    def recorded(pairs, cancelled):
        logits, read, computed = reader_logits(pairs, cancelled)
        seen.update(zip(pairs, logits.tolist(), strict=True))
        return logits, read, computed

    monkeypatch.setattr(shared_runtime, "reader_logits", recorded)
    runtime.clear_cache()
    LocalModel(VARIANTS["default"]).answer(TEXT, {"q": LikelihoodQuestion(QUESTION)}, threading.Event())
    monkeypatch.undo()
    assert len(seen) == 1
    [(pair, logit)] = seen.items()
    assert pair[1] == TEXT
    runtime.clear_cache()  # computed afresh, not served from what the model kept
    logits = runtime.reader_logits([pair])
    assert logits.shape == (1,)
    np.testing.assert_allclose(logits, [logit], rtol=0, atol=1e-9)


def test_a_model_given_its_own_runtime_computes_with_it_alone():
    """A runtime passed in is the only one the model computes with: its own cache fills, the shared one's does not,
    and the answers are the shared runtime's."""
    question = {"q": LikelihoodQuestion(QUESTION)}
    shared = LocalModel(VARIANTS["default"]).answer(TEXT, question, threading.Event())[0]
    shared_runtime.cache.clear()
    own = Runtime()
    answers = LocalModel(VARIANTS["default"], runtime=own).answer(TEXT, question, threading.Event())[0]
    assert len(own.cache) > 0 and len(shared_runtime.cache) == 0
    assert answers["q"].probability == shared["q"].probability

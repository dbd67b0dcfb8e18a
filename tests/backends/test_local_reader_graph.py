"""The reader's graph for an MPNet base, checked against MPNet's arithmetic written out in numpy.

An MPNet reader differs from a BERT one in four places the graph writer has
to get right: its word embeddings ship in 4 bits a value, its positions count
from 0 here (the exporter drops MPNet's two padding rows), every layer adds a
bias by relative position to its attention scores, and its layer norms take
an epsilon of 1e-5. A small reader of random weights, read by the runtime's
graph, must give the logit a plain numpy MPNet gives for the same weights.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from decirank.backends.local._reader import Reader, four_bit_rows, is_mpnet, relative_buckets, unpacked_rows

HIDDEN, HEADS, INNER, VOCABULARY, LAYERS, POSITIONS = 32, 4, 64, 40, 2, 24


def test_relative_positions_fall_in_mpnets_own_buckets():
    """Buckets of a query ``d`` tokens after its key, as MPNet's ``relative_position_bucket`` gives them: one a
    distance up to 7, then each doubling of the distance or so shares one, to 15 from 91 on; a key after its
    query takes the same bucket plus 16."""
    expected = {0: 0, 1: 1, 7: 7, 8: 8, 11: 8, 12: 9, 15: 9, 16: 10, 22: 10, 23: 11, 31: 11, 32: 12}
    expected |= {45: 12, 46: 13, 63: 13, 64: 14, 90: 14, 91: 15, 127: 15, 128: 15, 300: 15}
    buckets = relative_buckets(301)
    for distance, bucket in expected.items():
        assert buckets[distance, 0] == bucket, distance
        if distance:
            assert buckets[0, distance] == bucket + 16, -distance
    # Only the distance counts, not where the pair sits.
    assert (buckets[5:, 5:] == buckets[:-5, :-5]).all()


def test_four_bit_rows_keep_each_value_within_half_a_step_of_its_group():
    rng = np.random.default_rng(0)
    table = rng.normal(size=(6, 128)).astype(np.float32)
    table[2, 70] = 40.0  # an outlier coarsens its own group only
    packed, scales = four_bit_rows(table)
    assert packed.dtype == np.uint8 and packed.shape == (6, 64) and scales.shape == (6, 2)
    values = unpacked_rows(packed)
    assert values.min() >= -8 and values.max() <= 7
    back = (values.reshape(6, 2, 64) * scales[..., None].astype(np.float32)).reshape(6, 128)
    step = np.repeat(scales.astype(np.float32), 64, axis=1)
    assert (np.abs(back - table) <= 0.5 * step + 1e-3 * step).all()
    assert scales[2, 1] > 10 * scales[2, 0]


def _quantized(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int8 with one scale per output column, as the exporter writes a linear layer."""
    scale = np.abs(matrix).max(axis=0) / 127.0
    return np.round(matrix / scale).astype(np.int8), scale.astype(np.float32)


def _mpnet_weights(rng: np.random.Generator) -> dict[str, np.ndarray]:
    def normal(*shape: int, std: float = 0.2) -> np.ndarray:
        return (std * rng.normal(size=shape)).astype(np.float32)

    w: dict[str, np.ndarray] = {}
    for i in range(LAYERS):
        p = f"l{i}."
        for name, shape in (("qkv", (HIDDEN, 3 * HIDDEN)), ("o", (HIDDEN, HIDDEN)), ("i", (HIDDEN, INNER))):
            w[p + name + ".w"], w[p + name + ".s"] = _quantized(normal(*shape))
            w[p + name + ".b"] = normal(shape[1], std=0.05)
        w[p + "out.w"], w[p + "out.s"] = _quantized(normal(INNER, HIDDEN))
        w[p + "out.b"] = normal(HIDDEN, std=0.05)
        for norm in ("norm1", "norm2"):
            w[f"{p}{norm}.g"], w[f"{p}{norm}.b"] = 1.0 + normal(HIDDEN, std=0.1), normal(HIDDEN, std=0.1)
    w["words.q"], w["words.s"] = four_bit_rows(normal(VOCABULARY, HIDDEN, std=1.0), group=16)
    w["positions"] = normal(POSITIONS, HIDDEN, std=0.5).astype(np.float16)
    w["relative_bias"] = normal(32, HEADS, std=3.0)  # strong, so that leaving it out shows
    w["embeddings.norm.g"], w["embeddings.norm.b"] = 1.0 + normal(HIDDEN, std=0.1), normal(HIDDEN, std=0.1)
    w["output.w"], w["output.b"] = normal(HIDDEN, std=1.0), normal(1)
    return w


def _norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-5) * gamma + beta


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _mpnet_states(w: dict[str, np.ndarray], ids: list[int]) -> np.ndarray:
    """MPNet's forward pass (``transformers``' ``MPNetModel``, one unpadded text) in float64: its last states."""
    length, size = len(ids), HIDDEN // HEADS
    words = unpacked_rows(w["words.q"]).reshape(VOCABULARY, -1, 16) * w["words.s"][..., None].astype(np.float64)
    x = words.reshape(VOCABULARY, HIDDEN)[ids] + w["positions"][:length].astype(np.float64)
    x = _norm(x, w["embeddings.norm.g"], w["embeddings.norm.b"])
    bias = w["relative_bias"][relative_buckets(length)].transpose(2, 0, 1)  # (heads, query, key)

    def linear(x: np.ndarray, name: str) -> np.ndarray:
        return x @ (w[name + ".w"].astype(np.float64) * w[name + ".s"]) + w[name + ".b"]

    for i in range(LAYERS):
        p = f"l{i}."
        q, k, v = (
            part.reshape(length, HEADS, size).transpose(1, 0, 2) for part in np.split(linear(x, p + "qkv"), 3, 1)
        )
        attention = _softmax(q @ k.transpose(0, 2, 1) / math.sqrt(size) + bias)
        context = (attention @ v).transpose(1, 0, 2).reshape(length, HIDDEN)
        x = _norm(linear(context, p + "o") + x, w[p + "norm1.g"], w[p + "norm1.b"])
        x = _norm(linear(_gelu(linear(x, p + "i")), p + "out") + x, w[p + "norm2.g"], w[p + "norm2.b"])
    return x


@pytest.mark.parametrize("length", [3, 9, 20])
def test_an_mpnet_readers_graph_computes_mpnets_states_and_logit(length):
    """The runtime's graph of a random MPNet reader against the same reader in numpy. The graph multiplies in
    int8 (its activations quantized on the fly), so the two agree to within that rounding, far closer than a
    reader that leaves out the bias of relative positions."""
    rng = np.random.default_rng(length)
    w = _mpnet_weights(rng)
    assert is_mpnet(w)
    ids = [int(i) for i in rng.integers(0, VOCABULARY, size=length)]
    with ThreadPoolExecutor(1) as pool:
        reader = Reader(w, pool, POSITIONS)
        states, logit = reader.hidden(ids), float(reader.logit(ids))
        unbiased = Reader({**w, "relative_bias": np.zeros_like(w["relative_bias"])}, pool, POSITIONS).hidden(ids)
    expected = _mpnet_states(w, ids)
    error = np.abs(states - expected).max()
    assert error < 0.1  # the states are layer-normed: about 1 each
    assert np.abs(unbiased - expected).max() > 5 * error
    expected_logit = float(expected.mean(axis=0) @ w["output.w"] + w["output.b"][0])
    assert logit == pytest.approx(expected_logit, abs=0.05 * (1.0 + abs(expected_logit)))


def test_an_mpnet_reader_on_disk_reads_its_own_tokens_in_mpnets_pairs(tmp_path):
    """``read_reader`` as the runtime loads a reader: an MPNet one's npz with its own tokenizer. Its pairs are
    what MPNet's tokenizer makes of a question and a text, and its logit is MPNet's of those tokens."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    from decirank.backends.local._runtime import read_reader

    words = ["<s>", "<pad>", "</s>", "<unk>", "is", "it", "late", "my", "parcel", "never", "came"]
    tokenizer = Tokenizer(models.WordLevel({word: i for i, word in enumerate(words)}, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))  # MPNet's
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    w = _mpnet_weights(np.random.default_rng(7))
    np.savez(tmp_path / "reader.npz", **w)
    question, text = "is it late", "my parcel never came"
    with ThreadPoolExecutor(1) as pool:
        reader = read_reader(tmp_path / "reader.npz", pool, tmp_path / "tokenizer.json")
        (question_ids, text_ids) = reader.token_ids([question, text])
        ids = reader.pair(question_ids, text_ids)
        logit = float(reader.logits([ids])[0])
    assert ids == tokenizer.encode(question, text).ids == [0, 4, 5, 6, 2, 2, 7, 8, 9, 10, 2]
    expected = float(_mpnet_states(w, ids).mean(axis=0) @ w["output.w"] + w["output.b"][0])
    assert logit == pytest.approx(expected, abs=0.05 * (1.0 + abs(expected)))

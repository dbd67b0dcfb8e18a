"""The two encoders of the embedded model, run with onnxruntime on graphs built here.

- :class:`DenseEncoder`: all-MiniLM-L6-v2 (int8), mean-pooled, unit-length vectors.
- :class:`SparseEncoder`: SPLADE-tiny. A text's term weight for vocabulary entry
  ``t`` is ``max over tokens of log(1 + relu(h . E[t] + b[t]))``. Computing all
  30522 entries is what makes SPLADE slow, and a dot product only needs the
  entries where the other side is nonzero, so a text is kept as its token
  states ``h`` and weighed at the columns a query asks for.

Every text runs through the graph on its own: a batch would pad texts to one
length and quantize their activations together, so a text's vector would
depend on its neighbours. Alone, it is a function of the text, and two texts
run at once on two threads cost about what a padded batch costs.

The int8 linear layers multiply onnxruntime's unsigned 8-bit activations by
the packaged signed 8-bit weights. An x86 CPU without VNNI does that with an
instruction that adds pairs of products into 16 bits and saturates, so the
same text read differently there (TREC DL19 nDCG@10 0.697 against 0.701).
onnxruntime's ``session.x64quantprecision`` turns the weights unsigned so
that the products are exact, but it does so on every x86 CPU, and on one with
VNNI, whose signed products are exact already, that slow path costs about
twice the time of the whole encoder. So the sessions ask for it only where a
probe (:func:`signed_products_are_exact`) finds the signed products saturate:
the same numbers on every CPU, and the fast path wherever it is exact.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import onnxruntime as ort
import safetensors.numpy

from ._assets import Assets
from ._onnx import Graph, read_initializers

__all__ = ["DenseEncoder", "SparseEncoder", "word_embedding"]


def _session(model: bytes, exact_products: bool | None = None) -> ort.InferenceSession:
    """A one-thread session; ``exact_products`` forces onnxruntime's unsigned int8 products on or off (by
    default on only where :func:`signed_products_are_exact` says the signed ones saturate)."""
    options = ort.SessionOptions()
    # One thread per run: texts run side by side on the caller's worker threads instead.
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    if exact_products is None:
        exact_products = not signed_products_are_exact()
    if exact_products:  # module docstring
        options.add_session_config_entry("session.x64quantprecision", "1")
    options.log_severity_level = 3
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


#: The probe's output columns are scaled by this (its weights are :func:`probe_weight`).
PROBE_SCALE = 0.01


def probe_weight() -> np.ndarray:
    """Large int8 weights of one sign, 120 and 127 by turns along the input, shaped as the encoders' attention
    output (384 × 384), so that onnxruntime picks the kernel it picks for them."""
    weight = np.full((384, 384), 127, np.int8)
    weight[::2] = 120
    return weight


def int8_layer(weight: np.ndarray, scale: np.ndarray) -> bytes:
    """A graph of one int8 linear layer alone, as the encoders build theirs (no bias): input ``x``, (1, length,
    inputs)."""
    bert = _BertGraph(heads=1)
    bert.graph = Graph()  # the layer alone, without the encoder's position input
    x = bert.graph.input("x", np.float32, [1, "length", weight.shape[0]])
    return bert.graph.to_bytes(bert.linear(x, weight, np.zeros(weight.shape[1], np.float32), scale))


def int8_probe() -> tuple[bytes, np.ndarray, np.ndarray]:
    """One int8 layer, an input and its exact output: large activations against large weights of one sign,
    whose pairwise sums an x86 CPU without VNNI saturates to 16 bits."""
    weight = probe_weight()
    scale = np.full(weight.shape[1], PROBE_SCALE, np.float32)
    x = np.ones((1, 16, weight.shape[0]), np.float32)
    # onnxruntime quantizes the activations to uint8 over [min(x, 0), max(x, 0)]: here, 1.0 is 255.
    exact = (np.full(x.shape, 255, np.int64) @ weight.astype(np.int64)) * (1.0 / 255.0) * scale
    return int8_layer(weight, scale), x, exact.astype(np.float32)


@functools.cache
def signed_products_are_exact() -> bool:
    """Whether onnxruntime's fast signed int8 products are exact on this CPU (one with VNNI, or not x86)."""
    model, x, exact = int8_probe()
    got = _session(model, exact_products=False).run(None, {"x": x})[0]
    return bool(np.allclose(got, exact, rtol=1e-4))


class _BertGraph:
    """A BERT encoder graph; linear layers are float, or int8 with one scale per output column. ``epsilon`` is
    the layer norms' (BERT's 1e-12; MPNet's 1e-5)."""

    def __init__(self, heads: int, epsilon: float = 1e-12):
        self.graph = Graph()
        self.heads = heads
        self.epsilon = epsilon
        self.positions = self.graph.input("position_ids", np.int64, [1, "length"])

    def linear(self, x: str, weight: np.ndarray, bias: np.ndarray, scale: np.ndarray | None = None) -> str:
        g = self.graph
        if scale is None:
            return g.node("Add", [g.node("MatMul", [x, g.constant(weight)]), g.constant(bias)])
        return g.node(
            "DynamicQuantizeMatMul",
            [x, g.constant(weight), g.constant(scale.reshape(-1)), "", g.constant(bias)],
            domain="com.microsoft",
        )

    def norm(self, x: str, gamma: np.ndarray, beta: np.ndarray, skip: str | None = None) -> str:
        g = self.graph
        if skip is None:
            return g.node("LayerNormalization", [x, g.constant(gamma), g.constant(beta)], epsilon=self.epsilon, axis=-1)
        return g.node(
            "SkipLayerNormalization",
            [x, skip, g.constant(gamma), g.constant(beta)],
            domain="com.microsoft",
            epsilon=self.epsilon,
        )

    def embed(self, word: str, positions: np.ndarray, token_type: np.ndarray | None, gamma, beta) -> str:
        """Word and position embeddings, and the first segment's (BERT's; MPNet has none), normalized."""
        g = self.graph
        x = g.node("Add", [word, g.node("Gather", [g.constant(positions), self.positions])])
        if token_type is not None:
            x = g.node("Add", [x, g.constant(token_type)])
        return self.norm(x, gamma, beta)

    def layer(self, x: str, w: dict[str, np.ndarray], prefix: str, quantized: bool, attention_bias: str = "") -> str:
        """One transformer layer; ``w`` holds ``{prefix}{qkv,o,i,out}.{w,s,b}`` and norms. ``attention_bias``
        (1, heads, length, length), if given, is added to the attention scores (MPNet's relative positions)."""
        g, p = self.graph, prefix

        def dense(src: str, name: str) -> str:
            return self.linear(src, w[f"{p}{name}.w"], w[f"{p}{name}.b"], w[f"{p}{name}.s"] if quantized else None)

        hidden = w[f"{p}o.b"].shape[0]
        q, k, v = g.node("Split", [dense(x, "qkv"), g.constant(np.array([hidden] * 3, np.int64))], 3, axis=2)
        inputs = [q, k, v, "", "", attention_bias] if attention_bias else [q, k, v]
        context = g.node("MultiHeadAttention", inputs, domain="com.microsoft", num_heads=self.heads)
        x = self.norm(dense(context, "o"), w[f"{p}norm1.g"], w[f"{p}norm1.b"], skip=x)
        inner = g.node("Gelu", [dense(x, "i")], domain="com.microsoft")
        return self.norm(dense(inner, "out"), w[f"{p}norm2.g"], w[f"{p}norm2.b"], skip=x)


def word_embedding(g: Graph, minilm: dict[str, np.ndarray], ids: str) -> str:
    """The packaged MiniLM's word embeddings of ``ids``: kept int8 (one scale per row), widened only for the
    tokens used."""
    table = "inner.embeddings.word_embeddings."
    return g.node(
        "Mul",
        [
            g.node("Cast", [g.node("Gather", [g.constant(minilm[table + "weight_q"]), ids])], to=1),
            g.node("Gather", [g.constant(minilm[table + "weight_scale"]), ids]),
        ],
    )


class _Encoder:
    """Runs one text at a time through a session, several texts at once on a thread pool."""

    def __init__(self, session: ort.InferenceSession, max_tokens: int, pool: ThreadPoolExecutor):
        self.session = session
        self.max_tokens = max_tokens
        self.pool = pool

    def truncate(self, ids: Sequence[int]) -> list[int]:
        if len(ids) <= self.max_tokens:
            return list(ids)
        return [*ids[: self.max_tokens - 1], ids[-1]]  # keep the closing [SEP]

    def inputs(self, ids: np.ndarray) -> dict[str, np.ndarray]:
        return {"input_ids": ids[None]}

    def hidden(self, ids: Sequence[int]) -> np.ndarray:
        ids = np.asarray(self.truncate(ids), np.int64)
        feed = {**self.inputs(ids), "position_ids": np.arange(len(ids), dtype=np.int64)[None]}
        return self.session.run(None, feed)[0][0]

    def map(
        self,
        function: Callable[[Sequence[int]], np.ndarray],
        token_ids: Sequence[Sequence[int]],
        cancelled: threading.Event | None = None,
    ) -> list[np.ndarray]:
        """``function`` of each text, longest first so the threads finish together."""
        order = sorted(range(len(token_ids)), key=lambda i: -len(token_ids[i]))

        def run(i: int) -> np.ndarray:
            if cancelled is not None and cancelled.is_set():
                raise _Cancelled
            return function(token_ids[i])

        results = list(self.pool.map(run, order))
        out: list[np.ndarray] = [None] * len(token_ids)  # type: ignore[list-item]
        for i, result in zip(order, results, strict=True):
            out[i] = result
        return out


class _Cancelled(Exception):
    """The caller went away; the remaining texts are not worth running."""


class DenseEncoder(_Encoder):
    """all-MiniLM-L6-v2: unit vectors whose dot product is the cosine similarity."""

    def __init__(self, assets: Assets, pool: ThreadPoolExecutor, max_tokens: int):
        super().__init__(_session(self._build(read_initializers(str(assets.minilm_onnx)))), max_tokens, pool)

    @staticmethod
    def _build(src: dict[str, np.ndarray]) -> bytes:
        # The exporter named biases and norms but not the int8 matrices; those come in
        # graph order, six per layer: query, key, value, attention output, intermediate, output.
        matrices = sorted((k for k in src if k.startswith("val_") and k.endswith("_q")), key=lambda k: int(k[4:-2]))
        layers = len(matrices) // 6
        w: dict[str, np.ndarray] = {}
        for i in range(layers):
            q, k, v, o, inner, out = matrices[6 * i : 6 * i + 6]
            src_prefix, p = f"inner.encoder.layer.{i}.", f"l{i}."

            def scale(name: str) -> np.ndarray:
                return src[name[:-2] + "_scale"].reshape(-1)

            w[p + "qkv.w"] = np.concatenate([src[q], src[k], src[v]], axis=1)
            w[p + "qkv.s"] = np.concatenate([scale(q), scale(k), scale(v)])
            w[p + "qkv.b"] = np.concatenate(
                [src[f"{src_prefix}attention.self.{n}.bias"] for n in ("query", "key", "value")]
            )
            for name, matrix, bias in (
                ("o", o, "attention.output.dense"),
                ("i", inner, "intermediate.dense"),
                ("out", out, "output.dense"),
            ):
                w[f"{p}{name}.w"], w[f"{p}{name}.s"], w[f"{p}{name}.b"] = (
                    src[matrix],
                    scale(matrix),
                    src[src_prefix + bias + ".bias"],
                )
            for norm, name in (("norm1", "attention.output.LayerNorm"), ("norm2", "output.LayerNorm")):
                w[f"{p}{norm}.g"], w[f"{p}{norm}.b"] = (
                    src[f"{src_prefix}{name}.weight"],
                    src[f"{src_prefix}{name}.bias"],
                )
        bert = _BertGraph(heads=12)
        g = bert.graph
        emb = "inner.embeddings."
        ids = g.input("input_ids", np.int64, [1, "length"])
        word = word_embedding(g, src, ids)
        positions = (
            src[emb + "position_embeddings.weight_q"].astype(np.float32) * src[emb + "position_embeddings.weight_scale"]
        )
        x = bert.embed(
            word,
            positions,
            src[emb + "token_type_embeddings.weight"][0],
            src[emb + "LayerNorm.weight"],
            src[emb + "LayerNorm.bias"],
        )
        for i in range(layers):
            x = bert.layer(x, w, f"l{i}.", quantized=True)
        return g.to_bytes(x)

    def vector(self, ids: Sequence[int]) -> np.ndarray:
        mean = self.hidden(ids).mean(axis=0)
        return mean / np.linalg.norm(mean)

    def vectors(self, token_ids: Sequence[Sequence[int]], cancelled: threading.Event | None = None) -> list[np.ndarray]:
        return self.map(self.vector, token_ids, cancelled)


class SparseEncoder(_Encoder):
    """SPLADE-tiny: token states (after the MLM transform) and term weights read from them."""

    width = 128

    def __init__(self, assets: Assets, pool: ThreadPoolExecutor, max_tokens: int):
        # Stored at half precision (assets/NOTICE.md), computed in float32.
        src = {
            name: value.astype(np.float32)
            for name, value in safetensors.numpy.load_file(assets.splade_safetensors).items()
        }
        # The decoder is tied to the word embeddings: logits = h @ E.T + bias.
        self.vocabulary = np.ascontiguousarray(src["bert.embeddings.word_embeddings.weight"])
        self.vocabulary_bias = np.ascontiguousarray(src["cls.predictions.bias"])
        super().__init__(_session(self._build(src)), max_tokens, pool)

    @staticmethod
    def _build(src: dict[str, np.ndarray]) -> bytes:
        layers = 1 + max(int(k.split(".")[3]) for k in src if k.startswith("bert.encoder.layer."))
        w: dict[str, np.ndarray] = {}
        for i in range(layers):
            s, p = f"bert.encoder.layer.{i}.", f"l{i}."
            # torch Linear stores (out, in); MatMul wants (in, out).
            w[p + "qkv.w"] = np.concatenate(
                [src[f"{s}attention.self.{n}.weight"].T for n in ("query", "key", "value")], axis=1
            )
            w[p + "qkv.b"] = np.concatenate([src[f"{s}attention.self.{n}.bias"] for n in ("query", "key", "value")])
            for name, tensor in (("o", "attention.output.dense"), ("i", "intermediate.dense"), ("out", "output.dense")):
                w[f"{p}{name}.w"], w[f"{p}{name}.b"] = src[s + tensor + ".weight"].T, src[s + tensor + ".bias"]
            for norm, name in (("norm1", "attention.output.LayerNorm"), ("norm2", "output.LayerNorm")):
                w[f"{p}{norm}.g"], w[f"{p}{norm}.b"] = src[f"{s}{name}.gamma"], src[f"{s}{name}.beta"]
        bert = _BertGraph(heads=2)
        g = bert.graph
        # The vocabulary matrix is also the decoder, held here in numpy: the graph takes the
        # looked-up rows as input rather than keep a second copy.
        word = g.input("word_embeddings", np.float32, [1, "length", SparseEncoder.width])
        x = bert.embed(
            word,
            src["bert.embeddings.position_embeddings.weight"],
            src["bert.embeddings.token_type_embeddings.weight"][0],
            src["bert.embeddings.LayerNorm.gamma"],
            src["bert.embeddings.LayerNorm.beta"],
        )
        for i in range(layers):
            x = bert.layer(x, w, f"l{i}.", quantized=False)
        t = "cls.predictions.transform."
        x = g.node("Gelu", [bert.linear(x, src[t + "dense.weight"].T, src[t + "dense.bias"])], domain="com.microsoft")
        x = bert.norm(x, src[t + "LayerNorm.gamma"], src[t + "LayerNorm.beta"])
        return g.to_bytes(x)

    def inputs(self, ids: np.ndarray) -> dict[str, np.ndarray]:
        return {"word_embeddings": self.vocabulary[ids][None]}

    def states(self, token_ids: Sequence[Sequence[int]], cancelled: threading.Event | None = None) -> list[np.ndarray]:
        return self.map(self.hidden, token_ids, cancelled)

    def expand(self, states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The full term vector of one text, as (vocabulary columns, weights) of its nonzero entries."""
        weights = self.weights_at([states], np.arange(len(self.vocabulary)))[0]
        columns = np.flatnonzero(weights)
        return columns, weights[columns]

    def weights_at(self, states: Sequence[np.ndarray], columns: np.ndarray) -> np.ndarray:
        """(texts, columns) term weights of many texts at a few vocabulary columns, in one product."""
        lengths = [len(s) for s in states]
        logits = np.concatenate(states).astype(np.float32) @ self.vocabulary[columns].T + self.vocabulary_bias[columns]
        # log1p(relu(.)) rises monotonically, so the max over tokens may be taken first.
        peaks = np.maximum.reduceat(logits, np.cumsum([0, *lengths[:-1]]), axis=0)
        return np.log1p(np.maximum(peaks, 0.0))

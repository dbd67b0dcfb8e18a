"""The reader: a cross-encoder that reads a question and a text together.

A sentence vector sees what a text is about, not what a question asks of it:
"Is the customer reporting a problem?" and "Is this review positive?" are
near 0.5 for every text when answered by similarity. The reader is a
sentence encoder (the first layers of all-MiniLM-L6-v2, or of all-mpnet-base-v2:
:class:`Reader`) fine-tuned by ``training/cross_encoder.py`` to read
``question [SEP] text`` and give the logit of "yes". It answers three shapes,
each phrased by :mod:`._questions` so that training and answering phrase them alike:

- a yes/no question, with its ``true``/``false`` descriptions after it (:func:`~._questions.yes_no_asked`);
- one option of a choice, "Which team should handle this? billing: payments and refunds"
  (:func:`~._questions.option_asked`);
- one level of a graded score question asked "how", "How urgent is this message? high"
  (:func:`~._questions.level_asked`): each level is read, and :meth:`Blend.levels` makes one distribution of them.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields

import numpy as np

from ._encoders import _BertGraph, _Encoder, _session, word_embedding
from ._questions import NEGATED_READS

__all__ = [
    "Blend",
    "ChoiceBlend",
    "Reader",
    "four_bit_rows",
    "is_mpnet",
    "pair_ids",
    "reader_layers",
    "relative_buckets",
    "unpacked_rows",
]

#: Options of a choice the reader reads: the bi-encoder's best this many (the rest keep the bi-encoder's share).
READ_OPTIONS = 8


def reader_layers(weights: dict[str, np.ndarray]) -> int:
    """How many layers a reader's weights hold (``l0.…``, ``l1.…``, as ``training/cross_encoder.py`` exports them)."""
    return 1 + max(int(k.split(".")[0][1:]) for k in weights if k.startswith("l") and k[1].isdigit())


def pair_ids(
    question_ids: Sequence[int], text_ids: Sequence[int], max_tokens: int, between: Sequence[int] = ()
) -> list[int]:
    """``[CLS] question [SEP] text [SEP]`` from each one's own ``[CLS] … [SEP]`` tokens; only the text is cut.
    ``between`` goes between the two: MPNet's pairs are ``<s> question </s></s> text </s>``."""
    room = max(2, max_tokens - len(question_ids) - len(between))
    text = list(text_ids[1:])
    if len(text) > room:
        text = [*text[: room - 1], text[-1]]  # keep the closing [SEP]
    return [*question_ids, *between, *text]


#: MPNet's relative positions: how many buckets, and the distance from which all share the farthest one.
RELATIVE_BUCKETS, RELATIVE_DISTANCE = 32, 128


def relative_buckets(length: int) -> np.ndarray:
    """The bucket of each (query, key) pair of positions, as MPNet's encoder computes them: one per distance
    up to 7 tokens on each side, then logarithmic out to 128. Computed in float32, as there, so that the
    buckets agree at their edges."""
    position = np.arange(length)
    distance = position[:, None] - position[None, :]  # query minus key
    half = RELATIVE_BUCKETS // 2
    exact = half // 2
    n = np.abs(distance)
    scaled = np.log(np.maximum(n, 1).astype(np.float32) / np.float32(exact)) / np.float32(
        np.log(RELATIVE_DISTANCE / exact)
    )
    far = np.minimum(exact + (scaled * np.float32(half - exact)).astype(np.int64), half - 1)
    return (distance < 0) * half + np.where(n < exact, n, far)


def four_bit_rows(table: np.ndarray, group: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """A float table in 4 bits a value, one float16 scale per ``group`` values of a row (symmetric, -8 … 7):
    two values a byte, the first in the low half; and the scales, (rows, columns / group)."""
    rows, columns = table.shape
    grouped = table.reshape(rows, columns // group, group)
    scales = (np.maximum(np.abs(grouped).max(axis=2), 1e-8) / 7.0).astype(np.float16)
    values = np.clip(np.round(grouped / scales[..., None].astype(np.float32)), -8, 7).astype(np.int8)
    nibbles = (values.reshape(rows, columns) + 8).astype(np.uint8)
    return nibbles[:, 0::2] | (nibbles[:, 1::2] << 4), scales


def unpacked_rows(packed: np.ndarray) -> np.ndarray:
    """:func:`four_bit_rows`' values, one int8 a value (-8 … 7)."""
    values = np.empty((packed.shape[0], 2 * packed.shape[1]), np.int8)
    values[:, 0::2] = (packed & 0x0F).astype(np.int8) - 8
    values[:, 1::2] = (packed >> 4).astype(np.int8) - 8
    return values


def is_mpnet(weights: dict[str, np.ndarray]) -> bool:
    """Whether a reader's weights are an MPNet's (its own word embeddings and relative positions)."""
    return "relative_bias" in weights


class Reader(_Encoder):
    """The fine-tuned cross-encoder (``assets/reader.npz``), of either base ``training/cross_encoder.py``
    fine-tunes:

    - **MiniLM**: training froze the word embeddings, so the int8 table of the packaged all-MiniLM-L6-v2
      (``minilm``) serves both this and the dense encoder, and the reader ships only its layers; it reads the
      runtime's own WordPiece tokens.
    - **MPNet** (:func:`is_mpnet`): its word embeddings ship with it in 4 bits a value (:func:`four_bit_rows`),
      widened to int8 on loading; ``between`` is its pairs' second ``</s>``; each layer adds a bias by relative
      position to its attention scores, and its layer norms take MPNet's epsilon. It reads the tokens of its
      own tokenizer (the caller's ``tokenizer``, from ``assets/reader_tokenizer.json``).
    """

    def __init__(
        self,
        weights: dict[str, np.ndarray],
        pool: ThreadPoolExecutor,
        max_tokens: int,
        *,
        minilm: dict[str, np.ndarray] | None = None,
        tokenizer=None,
        between: Sequence[int] = (),
    ):
        self.output_weight = weights["output.w"].astype(np.float32)
        self.output_bias = float(weights["output.b"][0])
        #: the reader's own tokenizer (an MPNet's), or None where it reads the runtime's tokens
        self.tokenizer = tokenizer
        self.between = list(between)
        graph = self._build_mpnet(weights, max_tokens) if is_mpnet(weights) else self._build(weights, minilm)
        super().__init__(_session(graph), max_tokens, pool)

    @staticmethod
    def _build(w: dict[str, np.ndarray], minilm: dict[str, np.ndarray] | None) -> bytes:
        if minilm is None:
            raise ValueError("a MiniLM reader reads with the packaged MiniLM's word embeddings: none were given")
        bert = _BertGraph(heads=12)
        g = bert.graph
        ids = g.input("input_ids", np.int64, [1, "length"])
        x = bert.embed(
            word_embedding(g, minilm, ids),
            w["positions"],
            w["token_type"],
            w["embeddings.norm.g"],
            w["embeddings.norm.b"],
        )
        for i in range(reader_layers(w)):
            x = bert.layer(x, w, f"l{i}.", quantized=True)
        return g.to_bytes(x)

    @staticmethod
    def _build_mpnet(w: dict[str, np.ndarray], max_tokens: int) -> bytes:
        bert = _BertGraph(heads=w["relative_bias"].shape[1], epsilon=1e-5)
        g = bert.graph
        ids = g.input("input_ids", np.int64, [1, "length"])
        values, scales = unpacked_rows(w["words.q"]), w["words.s"].astype(np.float32)
        columns, groups = values.shape[1], scales.shape[1]
        # Each token's row widened to float only when used: its 4-bit values times its groups' scales.
        grouped = g.node(
            "Mul",
            [
                g.node(
                    "Reshape",
                    [
                        g.node("Cast", [g.node("Gather", [g.constant(values), ids])], to=1),
                        g.constant(np.array([1, -1, groups, columns // groups], np.int64)),
                    ],
                ),
                g.node(
                    "Unsqueeze", [g.node("Gather", [g.constant(scales), ids]), g.constant(np.array([-1], np.int64))]
                ),
            ],
        )
        word = g.node("Reshape", [grouped, g.constant(np.array([1, -1, columns], np.int64))])
        x = bert.embed(word, w["positions"].astype(np.float32), None, w["embeddings.norm.g"], w["embeddings.norm.b"])
        # The relative positions' bias of every pair of positions up to max_tokens, (1, heads, n, n); each
        # text takes its own length's corner of it.
        table = w["relative_bias"].astype(np.float32)[relative_buckets(max_tokens)].transpose(2, 0, 1)[None]
        length = g.node(
            "Slice", [g.node("Shape", [ids]), g.constant(np.array([1], np.int64)), g.constant(np.array([2], np.int64))]
        )
        bias = g.node(
            "Slice",
            [
                g.constant(np.ascontiguousarray(table)),
                g.constant(np.zeros(2, np.int64)),
                g.node("Concat", [length, length], axis=0),
                g.constant(np.array([2, 3], np.int64)),
            ],
        )
        for i in range(reader_layers(w)):
            x = bert.layer(x, w, f"l{i}.", quantized=True, attention_bias=bias)
        return g.to_bytes(x)

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text in the reader's own tokens, cut at ``max_tokens`` (only a reader with a tokenizer). Only
        16 characters a token are tokenized: far more than English needs, and a 1 MB text costs no more."""
        return [encoding.ids for encoding in self.tokenizer.encode_batch([t[: 16 * self.max_tokens] for t in texts])]

    def pair(self, question_ids: Sequence[int], text_ids: Sequence[int]) -> list[int]:
        """One question and text as the reader reads them together (:func:`pair_ids`)."""
        return pair_ids(question_ids, text_ids, self.max_tokens, self.between)

    def truncate(self, ids: Sequence[int]) -> list[int]:
        return list(ids)  # pair_ids has cut the text already

    def logit(self, ids: Sequence[int]) -> np.ndarray:
        """The logit of "yes" for one ``[CLS] question [SEP] text [SEP]``: mean-pooled states, one linear output."""
        return np.float64(self.hidden(ids).mean(axis=0) @ self.output_weight + self.output_bias)

    def logits(self, token_ids: Sequence[Sequence[int]], cancelled: threading.Event | None = None) -> np.ndarray:
        return np.array(self.map(self.logit, token_ids, cancelled), dtype=np.float64)


@dataclass(frozen=True)
class ChoiceBlend:
    """A choice's options read by the reader: their softmax, and the map of "none of these"."""

    reader: float
    cosine: float
    none_best: float
    none_cosine: float
    none_offset: float

    @classmethod
    def of(cls, fitted: dict) -> ChoiceBlend:
        return cls(**{field.name: float(fitted[field.name]) for field in fields(cls)})


@dataclass(frozen=True)
class Blend:
    """How the reader's logits become answers, fitted on held-out predictions by ``training/stack.py``.

    - yes/no: ``logit = sum_k pi_k (head_k * h + reader_k * r + offset_k)``, with ``h`` the decision head's
      logit, ``r`` the reader's and ``pi`` what kind of question it is (topic, attribute, request, quality,
      passage: a logistic regression over the MiniLM vector of the question without its negation), for the
      question's plain form; a negated question gets its plain form's answer turned round, as the head does,
      ``r`` then read from both forms or from one (``negated_reads``, :func:`~._questions.negated_reading`).
    - choice: ``softmax(reader * r_k + cosine * sharpness * cos_k)`` over the options read, and "none of
      these" ``sigmoid(none_best * max_k r_k + none_cosine * sharpness * max_k cos_k + none_offset)``
      (:class:`ChoiceBlend`); options named only ("billing", "shipping") have a blend of their own, as the
      reader reads a bare name with less certainty than a described option.
    - score asked "how": ``softmax(levels_reader * r_i)`` over the levels, ``r_i`` the reader's logit of level
      i. (The head's contrast of the two ends is left out: it reads a complaint as the bottom of every
      scale, which is right for satisfaction and wrong for urgency; docs/experiments.md.)
    """

    kind_weights: np.ndarray
    kind_bias: np.ndarray
    #: one weight per kind of question
    head: np.ndarray
    reader: np.ndarray
    offset: np.ndarray
    #: options described, and options named only (:func:`~._questions.named_only`)
    choice: ChoiceBlend
    bare_choice: ChoiceBlend
    levels_reader: float
    #: where "topic" is among the kinds
    topic_index: int
    #: how a negated question is read (:data:`~._questions.NEGATED_READS`)
    negated_reads: str

    @classmethod
    def load(cls, path) -> Blend:
        with open(path, encoding="utf-8") as file:
            fitted = json.load(file)
        yes_no, choice = fitted["yes_no"], fitted["choice"]
        if yes_no.get("negated_reads") not in NEGATED_READS:
            raise ValueError(f"{path}: yes_no.negated_reads must be one of {NEGATED_READS}")
        return cls(
            kind_weights=np.array(yes_no["kind_weights"], dtype=np.float64),
            kind_bias=np.array(yes_no["kind_bias"], dtype=np.float64),
            head=np.array(yes_no["head"], dtype=np.float64),
            reader=np.array(yes_no["reader"], dtype=np.float64),
            offset=np.array(yes_no["offset"], dtype=np.float64),
            choice=ChoiceBlend.of(choice),
            bare_choice=ChoiceBlend.of(fitted["choice_bare"]),
            levels_reader=float(fitted["score"]["reader"]),
            topic_index=yes_no["kinds"].index("topic"),
            negated_reads=yes_no["negated_reads"],
        )

    def kinds(self, question_vector: np.ndarray) -> np.ndarray:
        """How likely the question is of each kind (topic, attribute, request, quality, passage)."""
        z = self.kind_weights @ question_vector + self.kind_bias
        e = np.exp(z - z.max())
        return e / e.sum()

    def topic(self, question_vector: np.ndarray) -> float:
        """How likely the question is a topic question ("Is this about pets?")."""
        return float(self.kinds(question_vector)[self.topic_index])

    def yes_no(self, question_vector: np.ndarray, head: np.ndarray, reader: np.ndarray) -> np.ndarray:
        """The blended logit of "yes" to a plain question for each text, from the head's and the reader's."""
        pi = self.kinds(question_vector)
        return head * (pi @ self.head) + reader * (pi @ self.reader) + pi @ self.offset

    def levels(self, reader: np.ndarray) -> np.ndarray:
        """A score question's distribution over its levels, from the reader's logit of each."""
        z = self.levels_reader * reader
        e = np.exp(z - z.max())
        return e / e.sum()

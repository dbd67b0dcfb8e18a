"""The reader: a cross-encoder that reads a question and a text together.

A sentence vector sees what a text is about, not what a question asks of it:
"Is the customer reporting a problem?" and "Is this review positive?" are
near 0.5 for every text when answered by similarity. The reader is
all-MiniLM-L6-v2 fine-tuned by ``training/cross_encoder.py`` to read
``question [SEP] text`` and give the logit of "yes". It answers three shapes,
each phrased here so that training and answering phrase them alike:

- a yes/no question, with its ``true``/``false`` descriptions after it (:func:`asked`);
- one option of a choice, "Which team should handle this? billing: payments and refunds" (:func:`option_asked`);
- one level of a graded score question asked "how", "How urgent is this message? high" (:func:`level_asked`):
  each level is read, and :meth:`Blend.levels` makes one distribution of them.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields

import numpy as np

from ._encoders import _BertGraph, _Encoder, _session, word_embedding

__all__ = [
    "Blend",
    "ChoiceBlend",
    "Reader",
    "asked",
    "level_asked",
    "named_only",
    "negated_reading",
    "option_asked",
    "pair_ids",
    "reader_layers",
]

#: Options of a choice the reader reads: the bi-encoder's best this many (the rest keep the bi-encoder's share).
READ_OPTIONS = 8


def asked(question: str, true: str | None = None, false: str | None = None) -> str:
    """A yes/no question as the reader reads it, its descriptions (if any) after it."""
    question = question.strip()
    return f"{question} (yes: {true or '-'}; no: {false or '-'})" if true or false else question


def negated_reading(plain, negated, topic):
    """The reader's evidence for the plain form of a negated question, from its logit of the plain form and
    of the negated question as asked (turned round), weighted by ``topic``, how likely the question is a
    topic question (:meth:`Blend.kinds`). Of "Is the laptop not working?" the two readings are averaged:
    each alone is right about as often on domains the reader never saw, together more often, and the answers
    better calibrated. Of "Is this not about pets?" the plain form alone counts: the reader's own reading of
    a negated topic is near chance on new domains (training/README.md, "Negated questions")."""
    asked = 0.5 * (1.0 - topic)
    return (1.0 - asked) * plain - asked * negated


def _label(key: str) -> str:
    return key.replace("_", " ").strip()


def named_only(key: str, description: str) -> bool:
    """Whether an option is its name alone, as in a caller's list of labels ("billing", "shipping")."""
    description = (description or "").strip()
    return not description or description.lower() in (key.strip().lower(), _label(key).lower())


def option_asked(question: str, key: str, description: str) -> str:
    """One option of a choice as a yes/no question: the question, the option's name and what it covers."""
    name, description = _label(key), (description or "").strip()
    if named_only(key, description):
        return f"{question.strip()} {name}"
    if name.isdigit():  # a position, as rank keys its items: it says nothing of the option
        return f"{question.strip()} {description}"
    return f"{question.strip()} {name}: {description}"


def level_asked(question: str, level: str) -> str:
    """One level of a graded score question: "How urgent is this message? high"."""
    return f"{question.strip()} {level.strip()}"


def reader_layers(weights: dict[str, np.ndarray]) -> int:
    """How many layers a reader's weights hold (``l0.…``, ``l1.…``, as ``training/cross_encoder.py`` exports them)."""
    return 1 + max(int(k.split(".")[0][1:]) for k in weights if k.startswith("l") and k[1].isdigit())


def pair_ids(question_ids: Sequence[int], text_ids: Sequence[int], max_tokens: int) -> list[int]:
    """``[CLS] question [SEP] text [SEP]`` from each one's own ``[CLS] … [SEP]`` tokens; only the text is cut."""
    room = max(2, max_tokens - len(question_ids))
    text = list(text_ids[1:])
    if len(text) > room:
        text = [*text[: room - 1], text[-1]]  # keep the closing [SEP]
    return [*question_ids, *text]


class Reader(_Encoder):
    """The fine-tuned cross-encoder (``assets/reader.npz``) on the packaged MiniLM's word embeddings.

    Training froze the word embeddings, so the int8 table of the packaged
    all-MiniLM-L6-v2 serves both this and the dense encoder, and the reader
    ships only its four layers (about 7 MB).
    """

    def __init__(
        self, weights: dict[str, np.ndarray], minilm: dict[str, np.ndarray], pool: ThreadPoolExecutor, max_tokens: int
    ):
        self.output_weight = weights["output.w"].astype(np.float32)
        self.output_bias = float(weights["output.b"][0])
        super().__init__(_session(self._build(weights, minilm)), max_tokens, pool)

    @staticmethod
    def _build(w: dict[str, np.ndarray], minilm: dict[str, np.ndarray]) -> bytes:
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
      ``r`` then read from both forms (:func:`negated_reading`).
    - choice: ``softmax(reader * r_k + cosine * sharpness * cos_k)`` over the options read, and "none of
      these" ``sigmoid(none_best * max_k r_k + none_cosine * sharpness * max_k cos_k + none_offset)``
      (:class:`ChoiceBlend`); options named only ("billing", "shipping") have a blend of their own, as the
      reader reads a bare name with less certainty than a described option.
    - score asked "how": ``softmax(levels_reader * r_i)`` over the levels, ``r_i`` the reader's logit of level
      i. (The head's contrast of the two ends is left out: it reads a complaint as the bottom of every
      scale, which is right for satisfaction and wrong for urgency; training/README.md.)
    """

    kind_weights: np.ndarray
    kind_bias: np.ndarray
    #: one weight per kind of question
    head: np.ndarray
    reader: np.ndarray
    offset: np.ndarray
    #: options described, and options named only (:func:`named_only`)
    choice: ChoiceBlend
    bare_choice: ChoiceBlend
    levels_reader: float
    #: where "topic" is among the kinds
    topic_index: int

    @classmethod
    def load(cls, path) -> Blend:
        with open(path, encoding="utf-8") as file:
            fitted = json.load(file)
        yes_no, choice = fitted["yes_no"], fitted["choice"]
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

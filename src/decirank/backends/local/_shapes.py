"""Question shapes: what each question compares with what, and one map from similarity to probability per shape.

A bi-encoder compares meanings; it does not follow instructions. So each
question is first given a *shape* (:func:`plan_question`), a class that says
what is compared with what and how the similarity becomes a probability:

- **passage** (:class:`PassagePlan`; rank and rerank: a query judged against
  passages; any question with a leading frame such as "This note bears on the
  request: <doc>"): the state against each passage with both encoders fused::

      s = DENSE * cosine(MiniLM(query), MiniLM(subject))
        + SPARSE * SPLADE(query) . SPLADE(subject) / |SPLADE(query)|

  likelihood ``sigmoid(slope * s + offset)``, choice ``softmax(sharpness * s)``,
  chosen on TREC DL19 (fusion weight by nDCG@10, Platt map by log loss against
  "grade 2 or more", each validated by 2-fold cross-validation over its queries).
  The query is the state; the instructions only stand in for an empty state
  (on DL19 adding "Which passage best answers the question?" costs 0.05 nDCG@10).
  A passage longer than one window of MAX_TOKENS is read in overlapping windows
  (up to MAX_WINDOWS) and ``s`` is its best window's: on DL19 passages hidden in
  long documents, nDCG@10 0.555 against 0.424 for the first window alone
  (``benchmarks/long_documents.py``); a one-window passage reads as before.
- **yes/no** (:class:`YesNoPlan`; a yes/no or score question about a text: the
  filter tool's item, else the state): the question is read
  (``_questions.read_yes_no``: its topic, its true and false sides, its
  negation) and the trained decision head (``_head``) turns the text's and the
  question's vectors into a logit; the reader (``_reader``, a cross-encoder)
  reads the plain question with the text, and a blend by kind of question
  combines the two (``_reader.Blend``); a negated question gets its plain
  form's answer turned round. A score question asked "how" is read by the
  reader level by level (below); one worded yes/no spreads that question's
  likelihood over its levels.
- **labels** (:class:`LabelsPlan`; a choice whose options are short): the
  state against each label (its description's vector and half its name's,
  ``_questions.option_texts``), MiniLM alone (SPLADE's term matches
  hurt short texts), ``softmax``; the best READ_OPTIONS of them are then read by the
  reader, and "none of these" is whether even the best one read fits.
- **items** (:class:`ItemsPlan`; a choice among short items with no state:
  "Which one is about pets?"): each item's yes/no likelihood from the head,
  shared out among them.
- **none of these** (an option keyed ``none`` or described as such) gets the
  probability that no option fits, from each choice shape's own evidence,
  never from the similarity to the words "none of these".
- **examples** on a question fit a few-shot head on the frozen MiniLM vectors
  (``_fewshot``).

A score question asked "how" ("How urgent is this message?") is answered
level by level (:class:`LevelsPlan`): the reader reads each level with the
text, one softmax over the levels (``Blend.levels``). One worded yes/no
("Is it urgent?") is a binomial over its levels whose mean is the question's
likelihood: a binomial keeps the levels ordered and its expected level equal
to the likelihood (``normalized_score == p``).

The decision head is trained by ``training/train.py`` on every development set
and judged leave-one-domain-out, and so is the "none" map; the label map's
sharpness is fitted by ``benchmarks/fit_local_maps.py``.

A plan names the texts it needs: each is encoded once per call, whatever
plans share it (``_model``), and the plan then answers from the call's
:class:`Evidence`: its vectors and reader logits, the variant, and the runtime
(``_runtime``) whose heads and blend it reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from ...errors import InvalidInputError
from ...types.answers import Answer, ChoiceAnswer, LikelihoodAnswer, Note, ScoreAnswer
from ...types.questions import ChoiceQuestion, LikelihoodQuestion, Question, ScoreQuestion
from ..base import binomial_levels, render_state
from ._fewshot import ChoiceHead, LikelihoodHead, head_key, heads
from ._head import yes_no_features
from ._language import looks_non_english
from ._questions import (
    YesNoReading,
    asks_yes_or_no,
    is_none_option,
    level_asked,
    named_only,
    negated_reading,
    option_asked,
    option_reading,
    option_texts,
    question_kind,
    read_yes_no,
    reads_as_asked,
    refers_to_state,
    split_frame,
    split_question,
    yes_no_asked,
)
from ._reader import READ_OPTIONS
from ._runtime import Runtime, TextReading

__all__ = [
    "MAPS",
    "VARIANTS",
    "Evidence",
    "ItemsPlan",
    "LabelsPlan",
    "LevelsPlan",
    "PassagePlan",
    "ShapePlan",
    "Variant",
    "Vectors",
    "YesNoPlan",
    "option_vector",
    "plan_question",
]


@dataclass(frozen=True)
class Variant:
    """Weights of the two similarities (0 leaves an encoder out) and the maps from similarity."""

    dense: float
    sparse: float
    #: likelihood = sigmoid(slope * s + offset)
    slope: float
    offset: float
    #: choice = softmax(sharpness * s)
    sharpness: float


VARIANTS = {
    "default": Variant(dense=1.0, sparse=0.26, slope=2.62, offset=-4.45, sharpness=13.7),
    "minilm": Variant(dense=1.0, sparse=0.0, slope=5.52, offset=-3.69, sharpness=25.7),
    "splade": Variant(dense=0.0, sparse=1.0, slope=0.968, offset=-3.96, sharpness=5.5),
}

#: Choice options longer than this (median, in words) are passages; shorter ones are labels.
LABEL_MAX_WORDS = 12


@dataclass(frozen=True)
class ChoiceMaps:
    """Maps from MiniLM cosine similarity to a choice among short labels, and to "none of these"."""

    #: a choice among labels: softmax(label_sharpness * cos(text, label))
    label_sharpness: float
    #: "none of these" among labels: sigmoid(none_top * best + none_margin * (best - second)
    #: + none_options * log(options) + none_offset), fitted by ``training/train.py`` across eight
    #: choice domains with a quarter of their labels held out (leave-one-domain-out figures there)
    none_top: float
    none_margin: float
    none_options: float
    none_offset: float


MAPS = ChoiceMaps(label_sharpness=16.5, none_top=-4.037, none_margin=-5.027, none_options=0.372, none_offset=-0.124)


class Vectors:
    """The call's MiniLM vectors by text, SPLADE token states of its passage texts, and the reader's logits.

    A passage read in windows also has each window's vector and states; the plain ones are its first window's.
    """

    def __init__(self, texts: list[str]):
        self.index = {text: i for i, text in enumerate(texts)}
        self.dense: np.ndarray | None = None
        self.sparse: dict[str, np.ndarray] = {}
        self.dense_windows: dict[str, np.ndarray] = {}
        self.sparse_windows: dict[str, list[np.ndarray]] = {}
        #: the reader's logit of each (question, text) of the call
        self.read: dict[tuple[str, str], float] = {}

    def window_count(self, text: str) -> int:
        windows = self.dense_windows.get(text)
        if windows is None:
            windows = self.sparse_windows.get(text)
        return 1 if windows is None else len(windows)

    def dense_of(self, text: str) -> np.ndarray:
        """The (windows, 384) MiniLM vectors of a text."""
        windows = self.dense_windows.get(text)
        return self.of([text]) if windows is None else windows

    def sparse_of(self, text: str) -> list[np.ndarray]:
        """The SPLADE token states of each window of a text."""
        return self.sparse_windows.get(text) or [self.sparse[text]]

    def of(self, texts: Sequence[str]) -> np.ndarray:
        assert self.dense is not None
        return self.dense[[self.index[text] for text in texts]]

    def cosines(self, query: str, subjects: Sequence[str]) -> np.ndarray:
        return (self.of(subjects) @ self.of([query])[0]).astype(np.float64)


@dataclass(frozen=True)
class Evidence:
    """What a call's plans answer from: the vectors and reader logits of its texts, the variant that weighs the
    two similarities, and the runtime whose decision heads and blend turn them into logits."""

    variant: Variant
    runtime: Runtime
    vectors: Vectors

    def fused(self, query: str, subjects: list[str]) -> np.ndarray:
        """The passage similarity: MiniLM cosine and SPLADE dot product, weighted by the variant.

        A passage read in several windows scores as its best window: an answer anywhere in a
        long document counts as it would in a short one, and filler around it does not dilute it.
        """
        vectors = self.vectors
        owners = [i for i, s in enumerate(subjects) for _ in range(vectors.window_count(s))]
        result = np.zeros(len(owners))
        if self.variant.dense:
            window_vectors = np.concatenate([vectors.dense_of(s) for s in subjects])
            result += self.variant.dense * (window_vectors @ vectors.of([query])[0]).astype(np.float64)
        if self.variant.sparse:
            columns, weights = self.runtime.sparse_query(query, vectors.sparse[query])
            if columns.size:
                states = [state for s in subjects for state in vectors.sparse_of(s)]
                subject_weights = self.runtime.sparse.weights_at(states, columns)
                result += self.variant.sparse * (subject_weights @ weights) / np.linalg.norm(weights)
        if len(owners) == len(subjects):
            return result
        starts = np.flatnonzero(np.diff([-1, *owners]))
        return np.maximum.reduceat(result, starts)

    def passage_likelihood(self, similarity):
        """The passage map: the likelihood that a passage of this similarity answers the query."""
        return sigmoid(self.variant.slope * similarity + self.variant.offset)

    def head_logits(self, reading: YesNoReading, subjects: list[str]) -> np.ndarray:
        """The decision head's logit of "yes" to a read yes/no question, for each subject."""
        vectors = self.vectors
        features = yes_no_features(
            vectors.of(subjects),
            vectors.of([reading.topic])[0],
            vectors.of([reading.question])[0],
            [(vectors.of([true])[0], vectors.of([false])[0]) for true, false in reading.contrasts],
            self.runtime.background_vectors(),
            len(reading.topic.split()),
            self.runtime.token_counts(subjects),
        )
        logits = self.runtime.heads[question_kind(reading)].logits(features)
        return -logits if reading.negated else logits

    def read_logits(self, question: str | None, subjects: list[str]) -> np.ndarray:
        """The reader's logit of ``question`` for each subject; NaN for a form not read (a negated question read
        once), which :func:`negated_reading` leaves aside."""
        if question is None:
            return np.full(len(subjects), np.nan)
        return np.array([self.vectors.read[(question, text)] for text in subjects])


@dataclass(kw_only=True)
class ShapePlan:
    """How one question is answered: the texts it compares, and which is which.

    Each shape is a subclass. It says what the call must compute for it (the texts it needs a MiniLM vector
    of, those SPLADE reads, those read in windows, the pairs the reader reads), then answers from what
    was computed (:meth:`answer`).
    """

    #: the shape's name, part of the key of a few-shot head fitted for it
    shape: ClassVar[str]
    #: whether the first query is the caller's own text (the state), noted when it does not look English
    notes_query: ClassVar[bool] = False

    #: what the subjects are compared with: the state, a topic, or the true and false descriptions
    queries: list[str]
    #: what is judged: the passage, item or state; for a choice, the options (none left out)
    subjects: list[str]
    #: a choice's option keys, one per subject, and the option that means "none of these"
    keys: list[str] = field(default_factory=list)
    none_key: str | None = None
    #: example states (rendered) for a few-shot head
    example_texts: list[str] = field(default_factory=list)
    #: how a yes/no question (an items choice, one option beside "none") is read: its topic, contrasts and negation
    reading: YesNoReading | None = None

    def dense_texts(self) -> tuple[str, ...]:
        """The texts this question needs a MiniLM vector of."""
        return (*self.queries, *self.subjects, *self.example_texts)

    def sparse_texts(self) -> tuple[str, ...]:
        """The texts this question needs SPLADE token states of: only a passage question's."""
        return ()

    def windowed_texts(self) -> tuple[str, ...]:
        """The texts read whole, window by window, where they are longer than one: only a passage question's."""
        return ()

    def reader_pairs(self, question: Question, evidence: Evidence) -> list[tuple[str, str]]:
        """The (question, text) pairs the reader reads for this question, once the call's vectors are computed."""
        return []

    def answer(self, question: Question, evidence: Evidence) -> Answer:
        """The question's answer from what the call computed."""
        raise NotImplementedError

    def notes(self, readings: dict[str, TextReading], windowed: set[str]) -> tuple[Note, ...]:
        """What to tell the caller about how the question's texts were read: cut short, or not English."""
        notes: list[Note] = []
        for text in self.subjects:
            cut = readings[text].cut_note(text in windowed)
            if cut is not None:
                notes.append(cut)
            if looks_non_english(text):
                notes.append(Note("non_english", "the text does not look English; the local model reads English only"))
        for text in self.queries[:1] if self.notes_query else ():
            if looks_non_english(text):
                message = "the query does not look English; the local model reads English only"
                notes.append(Note("non_english", message, about="state"))
        return tuple(dict.fromkeys(notes))

    # --- a likelihood (passage and yes/no shapes) ---------------------------------------------------

    def zero_shot_logits(self, evidence: Evidence, subjects: list[str] | None = None) -> np.ndarray:
        """The logit of "yes" for each subject (the plan's, or the given ones) from the shape's map."""
        raise NotImplementedError(f"a {self.shape} question has no likelihood of its own")

    def likelihood(self, question: Question, evidence: Evidence) -> Answer:
        """A likelihood, or a score spread over its levels: the zero-shot answer, taught by the examples if any."""
        prior = self.zero_shot_logits(evidence)
        if self.example_texts:
            assert isinstance(question, LikelihoodQuestion)
            head = self._likelihood_head(question, evidence)
            probability = float(head.probabilities(evidence.vectors.of(self.subjects), prior)[0])
        else:
            probability = float(sigmoid(prior[0]))
        return likelihood_answer(question, probability)

    def _likelihood_head(self, question: LikelihoodQuestion, evidence: Evidence) -> LikelihoodHead:
        def fit() -> LikelihoodHead:
            priors = self.zero_shot_logits(evidence, self.example_texts)
            answers = [example.answer for example in question.examples]
            return LikelihoodHead(evidence.vectors.of(self.example_texts), priors, answers)

        # Keyed by what the head is fitted from (the shape's queries and the examples), not by the
        # question's text: the filter tool asks one question per item, and they share one head.
        examples = [(example.state, example.answer) for example in question.examples]
        negated = self.reading is not None and self.reading.negated
        key = head_key("likelihood", evidence.variant, self.shape, self.queries, negated, examples)
        return heads.get(key, fit)

    # --- a choice (passage, labels and items shapes) ------------------------------------------------

    def _options(self, distribution: np.ndarray, none: float) -> dict[str, float]:
        """The options' probabilities from their distribution, "none of these" given ``none`` where offered."""
        probabilities = dict(zip(self.keys, (float(p) for p in distribution), strict=True))
        return with_none(probabilities, self.none_key, none)


@dataclass(kw_only=True)
class PassagePlan(ShapePlan):
    """A query judged against passages (rank and rerank, a framed question, long options): both encoders fused,
    long passages read in windows."""

    shape = "passage"
    notes_query = True

    def sparse_texts(self) -> tuple[str, ...]:
        # The examples too: a few-shot head starts from each example's zero-shot logit, which is fused.
        return (*self.queries, *self.subjects, *self.example_texts)

    def windowed_texts(self) -> tuple[str, ...]:
        return tuple(self.subjects)

    def zero_shot_logits(self, evidence: Evidence, subjects: list[str] | None = None) -> np.ndarray:
        subjects = self.subjects if subjects is None else subjects
        logits = evidence.variant.slope * evidence.fused(self.queries[0], subjects) + evidence.variant.offset
        return np.asarray(logits, dtype=np.float64)

    def shares_a_product(self, question: Question) -> bool:
        """Whether this is one passage's likelihood with no examples, which :meth:`likelihoods_together` answers
        beside the others judged against the same query."""
        return not isinstance(question, ChoiceQuestion) and not self.example_texts

    @staticmethod
    def likelihoods_together(evidence: Evidence, query: str, asked: list[tuple[Question, PassagePlan]]) -> list[Answer]:
        """The likelihoods of passages judged against one query, from one product."""
        subjects = [plan.subjects[0] for _, plan in asked]
        return [
            likelihood_answer(question, float(evidence.passage_likelihood(similarity)))
            for (question, _), similarity in zip(asked, evidence.fused(query, subjects), strict=True)
        ]

    def answer(self, question: Question, evidence: Evidence) -> Answer:
        if not isinstance(question, ChoiceQuestion):
            return self.likelihood(question, evidence)
        similarity = evidence.fused(self.queries[0], self.subjects)
        distribution = softmax(evidence.variant.sharpness * similarity)
        # Nothing fits when even the best passage is unlikely to answer: the passage map's "no".
        none = 1.0 - float(evidence.passage_likelihood(similarity.max()))
        return ChoiceAnswer(self._options(distribution, none))


@dataclass(kw_only=True)
class YesNoPlan(ShapePlan):
    """A yes/no question about one text (the filter tool's item, else the state): the decision head's logit, blended
    with the reader's reading of the plain question."""

    shape = "yes/no"

    reading: YesNoReading
    #: what the reader is asked of each subject: the plain yes/no question, then a negated one as asked
    #: (none: the head answers alone)
    read: list[str] = field(default_factory=list)

    def reader_pairs(self, question: Question, evidence: Evidence) -> list[tuple[str, str]]:
        return [(q, text) for q in self.forms_read(evidence) if q for text in (*self.subjects, *self.example_texts)]

    def forms_read(self, evidence: Evidence) -> list[str | None]:
        """What the reader reads: the question, and a negated one's plain form and as asked, or where the blend
        reads a negated question once (``Blend.negated_reads``) only the form :func:`reads_as_asked` picks, None
        in the other's place."""
        if not (self.read and self.reading.negated and evidence.runtime.blend.negated_reads == "one"):
            return self.read
        if reads_as_asked(evidence.runtime.blend.topic(evidence.vectors.of([self.reading.question])[0])):
            return [None, self.read[1]]
        return [self.read[0], None]

    def zero_shot_logits(self, evidence: Evidence, subjects: list[str] | None = None) -> np.ndarray:
        subjects = self.subjects if subjects is None else subjects
        logits = evidence.head_logits(self.reading, subjects)
        if self.read and evidence.vectors.read:
            # The head sees what the text is about, the reader what the question asks of it: a blend
            # fitted on both models' answers to domains neither was trained on.
            question = evidence.vectors.of([self.reading.question])[0]
            forms = self.forms_read(evidence)
            read = evidence.read_logits(forms[0], subjects)
            if self.reading.negated:
                blend = evidence.runtime.blend
                as_asked = evidence.read_logits(forms[1], subjects)
                read = negated_reading(read, as_asked, blend.topic(question), blend.negated_reads)
            turn = -1.0 if self.reading.negated else 1.0  # the head's logit of the plain question, turned back
            logits = turn * evidence.runtime.blend.yes_no(question, turn * logits, read)
        return np.asarray(logits, dtype=np.float64)

    def answer(self, question: Question, evidence: Evidence) -> Answer:
        return self.likelihood(question, evidence)


@dataclass(kw_only=True)
class LevelsPlan(ShapePlan):
    """A score question asked "how" ("How urgent is this message?"): the reader reads each level with the text, and
    nothing else answers it, so neither the question nor the text needs a vector."""

    shape = "levels"

    #: each level as the reader reads it ("How urgent is this message? high")
    levels: list[str]

    def dense_texts(self) -> tuple[str, ...]:
        return ()

    def reader_pairs(self, question: Question, evidence: Evidence) -> list[tuple[str, str]]:
        return [(level, text) for level in self.levels for text in self.subjects]

    def answer(self, question: Question, evidence: Evidence) -> Answer:
        # Each level read with the text, one softmax over them (Blend.levels).
        read = np.array([evidence.vectors.read[(level, self.subjects[0])] for level in self.levels])
        return ScoreAnswer(tuple(float(p) for p in evidence.runtime.blend.levels(read)))


@dataclass(kw_only=True)
class LabelsPlan(ShapePlan):
    """A choice among short options, judged against the state: MiniLM alone, then the reader reads the best of them.

    With one option beside "none", ``reading`` reads that option as a yes/no question.
    """

    shape = "labels"
    notes_query = True

    @staticmethod
    def read_options(similarity: np.ndarray) -> np.ndarray:
        """Which options the reader reads: the bi-encoder's best READ_OPTIONS."""
        return np.argsort(-similarity, kind="stable")[:READ_OPTIONS]

    def dense_texts(self) -> tuple[str, ...]:
        # The call encodes each distinct text once, so a name that is also its description costs nothing more.
        named = (text for key, subject in zip(self.keys, self.subjects) for text in option_texts(key, subject))
        return (*super().dense_texts(), *named)

    def similarity(self, evidence: Evidence) -> np.ndarray:
        """The state's MiniLM cosine to each option: to its description's vector and half its name's."""
        options = np.stack(
            [option_vector(evidence.vectors.of(option_texts(k, s))) for k, s in zip(self.keys, self.subjects)]
        )
        return (options @ evidence.vectors.of(self.queries[:1])[0]).astype(np.float64)

    def reader_pairs(self, question: Question, evidence: Evidence) -> list[tuple[str, str]]:
        similarity = self.similarity(evidence)
        return [
            (option_asked(question.instructions, self.keys[k], self.subjects[k]), self.queries[0])
            for k in self.read_options(similarity)
        ]

    def answer(self, question: Question, evidence: Evidence) -> Answer:
        assert isinstance(question, ChoiceQuestion)
        if evidence.vectors.read:
            return ChoiceAnswer(self._read_choice(question, evidence))
        similarity = self.similarity(evidence)
        if self.reading is not None:  # the one option's yes/no likelihood (plan_question)
            none = 1.0 - float(sigmoid(evidence.head_logits(self.reading, self.queries[:1])[0]))
        else:
            best, second = np.sort(similarity)[::-1][:2] if len(similarity) > 1 else (similarity[0], similarity[0])
            none_logit = MAPS.none_top * best + MAPS.none_margin * (best - second) + MAPS.none_offset
            none = float(sigmoid(none_logit + MAPS.none_options * np.log(len(similarity))))
        if self.example_texts:
            return ChoiceAnswer(self._few_shot_choice(question, evidence, none))
        return ChoiceAnswer(self._options(softmax(MAPS.label_sharpness * similarity), none))

    def _read_choice(self, question: ChoiceQuestion, evidence: Evidence) -> dict[str, float]:
        """The bi-encoder's best options, each read by the reader as a yes/no question.

        The options read share the bi-encoder's mass for them by a softmax of the reader's logits and their
        similarity; the others keep the bi-encoder's share. "None of these" comes from how well the best option
        reads and how close the closest one is, one map for every domain (``Blend``).
        """
        blend = evidence.runtime.blend
        similarity = self.similarity(evidence)
        distribution = softmax(MAPS.label_sharpness * similarity)
        top = self.read_options(similarity)
        read = np.array(
            [
                evidence.vectors.read[
                    (option_asked(question.instructions, self.keys[k], self.subjects[k]), self.queries[0])
                ]
                for k in top
            ]
        )
        # Options named only are read with less certainty than described ones: they have a blend of their own.
        bare = all(named_only(self.keys[k], self.subjects[k]) for k in top)
        fitted = blend.bare_choice if bare else blend.choice
        mixed = softmax(fitted.reader * read + fitted.cosine * MAPS.label_sharpness * similarity[top])
        distribution[top] = distribution[top].sum() * mixed
        none_logit = fitted.none_best * read.max() + fitted.none_cosine * MAPS.label_sharpness * similarity.max()
        none = float(sigmoid(none_logit + fitted.none_offset))
        if self.example_texts:
            return self._few_shot_choice(question, evidence, none)
        return self._options(distribution, none)

    def _few_shot_choice(self, question: ChoiceQuestion, evidence: Evidence, none: float) -> dict[str, float]:
        answers = [str(example.answer) for example in question.examples]

        def fit() -> ChoiceHead:
            vectors = evidence.vectors
            return ChoiceHead(vectors.of(self.example_texts), answers, vectors.of(self.subjects), self.keys)

        key = head_key("choice", self.keys, self.subjects, [(e.state, e.answer) for e in question.examples])
        probabilities = heads.get(key, fit).probabilities(evidence.vectors.of(self.queries))[0]
        if self.none_key in probabilities:  # the examples teach "none" themselves
            return {key: probabilities.get(key, 0.0) for key in question.options}
        return with_none(probabilities, self.none_key, none)


@dataclass(kw_only=True)
class ItemsPlan(ShapePlan):
    """A choice among short items with no state ("Which one is about pets?"): each item's yes/no likelihood from the
    decision head, shared out among them."""

    shape = "items"

    reading: YesNoReading

    def answer(self, question: Question, evidence: Evidence) -> Answer:
        # Which items have the asked property: each its own topic likelihood, shared out among them.
        likelihoods = sigmoid(np.asarray(evidence.head_logits(self.reading, self.subjects), dtype=np.float64))
        distribution = likelihoods / likelihoods.sum()
        none = 1.0 - float(likelihoods.max())
        return ChoiceAnswer(self._options(distribution, none))


# --- which shape a question has ---------------------------------------------------------------------


def plan_question(state_text: str, question: Question, variant: Variant) -> ShapePlan:
    """The shape of a question, with the texts it compares (module docstring)."""
    examples = [render_state(example.state) for example in getattr(question, "examples", ())]
    if isinstance(question, ChoiceQuestion):
        return _plan_choice(state_text, question, examples, variant)
    frame, _ = split_frame(question.instructions)
    instructions, subject = split_question(question.instructions)
    if frame or not variant.dense:
        # A framed question ("This note bears on the request: <doc>") judges its subject against
        # the state, as rank and rerank ask; instructions stand in for an empty state.
        query = state_text or split_frame(instructions)[1]
        return PassagePlan(queries=[query], subjects=[subject], example_texts=examples)
    # A yes/no question about a text: the filter tool's item, else the state itself.
    text = subject if instructions else state_text
    asked = instructions or question.instructions
    if not text.strip():
        raise InvalidInputError("state", "a state (or an item in the question) for the question to judge")
    if state_text and instructions and refers_to_state(asked):
        return PassagePlan(queries=[state_text], subjects=[text], example_texts=examples)
    if isinstance(question, ScoreQuestion) and not asks_yes_or_no(asked):
        # "How urgent is this ticket?": the reader reads each level ("How urgent is this ticket? high").
        return LevelsPlan(queries=[], subjects=[text], levels=[level_asked(asked, level) for level in question.levels])
    if isinstance(question, ScoreQuestion):
        # The levels of a yes/no question are degrees of its yes ("not at all" … "fully"), which say nothing
        # of the text on their own: its likelihood, spread over them.
        reading = read_yes_no(asked)
        read = [yes_no_asked(reading.question), *([yes_no_asked(asked)] if reading.negated else [])]
    else:
        reading = read_yes_no(asked, question.true, question.false)
        # The reader reads the plain form too: a negated question is its answer turned round (the caller's
        # "true" then describes a no to the plain question), and is also read as asked (``negated_reading``).
        true, false = (question.false, question.true) if reading.negated else (question.true, question.false)
        read = [yes_no_asked(reading.question, true, false)]
        if reading.negated:
            read.append(yes_no_asked(asked, question.true, question.false))
    if examples:
        # Examples teach a head on the decision head's own answer (_fewshot), as measured; the reader's
        # confident zero-shot answer would outweigh what a few examples say.
        read = []
    queries = _reading_texts(reading)
    return YesNoPlan(queries=queries, subjects=[text], example_texts=examples, reading=reading, read=read)


def _plan_choice(state_text: str, question: ChoiceQuestion, examples: list[str], variant: Variant) -> ShapePlan:
    keys, descriptions, none_key = [], [], None
    for key, description in question.options.items():
        if none_key is None and is_none_option(key, description):
            none_key = key
        else:
            keys.append(key)
            descriptions.append(description)
    if not keys:  # every option reads as "none": treat them as plain options
        keys, descriptions, none_key = list(question.options), list(question.options.values()), None
    options = {"subjects": descriptions, "keys": keys, "none_key": none_key, "example_texts": examples}
    words = float(np.median([len(text.split()) for text in descriptions]))
    if words > LABEL_MAX_WORDS or not variant.dense:
        query = state_text or split_frame(question.instructions)[1]
        return PassagePlan(queries=[query], **options)
    if state_text:
        if none_key is not None and len(keys) == 1:
            # One option and "none": whether the text is about that option, a yes/no question.
            reading = option_reading(descriptions[0])
            return LabelsPlan(queries=[state_text, reading.question], reading=reading, **options)
        return LabelsPlan(queries=[state_text], **options)
    # No state: the question asks which of the items has a property ("Which one is about pets?").
    reading = read_yes_no(question.instructions)
    return ItemsPlan(queries=_reading_texts(reading), reading=reading, **options)


#: The weight of a described option's name beside its description's, in its vector (:func:`option_vector`): the
#: best of 0, 0.35, 0.5, 0.7 and 1 on the seven choice sets of the 28 (their own names and descriptions), and
#: near the best on the everyday choices held out (docs/experiments.md, "An option's name beside its description").
NAME_WEIGHT = 0.5


def option_vector(text_vectors: np.ndarray) -> np.ndarray:
    """An option's vector from its texts' (:func:`._questions.option_texts`): a name alone as it is, else the
    name's vector at NAME_WEIGHT beside the description's, their sum at unit length."""
    vectors = np.asarray(text_vectors, dtype=np.float64)
    total = vectors[0] if len(vectors) == 1 else NAME_WEIGHT * vectors[0] + vectors[1:].sum(axis=0)
    return total / max(float(np.linalg.norm(total)), 1e-12)


def _reading_texts(reading: YesNoReading) -> list[str]:
    """The texts a yes/no reading compares a subject with: topic, question, then each contrast's two sides."""
    return [reading.topic, reading.question, *(side for pair in reading.contrasts for side in pair)]


# --- maps ------------------------------------------------------------------------------------------------


def sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, dtype=np.float64)))  # no overflow for any x


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def with_none(probabilities: dict[str, float], none_key: str | None, none: float) -> dict[str, float]:
    """The options' distribution with "none of these" given its own probability, the rest scaled to fit."""
    if none_key is None:
        return probabilities
    scaled = {key: p * (1.0 - none) for key, p in probabilities.items()}
    scaled[none_key] = none
    return scaled


def likelihood_answer(question: Question, likelihood: float) -> Answer:
    """A likelihood question's answer, or a score question's: a binomial over its levels, ``likelihood`` its mean."""
    if isinstance(question, LikelihoodQuestion):
        return LikelihoodAnswer(likelihood)
    assert isinstance(question, ScoreQuestion)
    return ScoreAnswer(binomial_levels(len(question.levels), likelihood))

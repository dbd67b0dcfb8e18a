"""The decision head: small trained models that read a yes/no question and a text together.

MiniLM gives the text, the question and what the question asks about (its
topic, or its true and false sides) one vector each. A similarity of two such
vectors ranks texts well but means different things in different domains:
0.3 to "sports" is a sure yes for a news story and a sure no for a tweet. The
head turns the vectors into a probability that carries over:

- **features** (:func:`yes_no_features`): the scalars named in
  :data:`SCALAR_FEATURES` (similarity to the topic and to the question; the
  topic against generic background topics as a z-score, log-probability and
  rank; the true-minus-false contrast; lengths), then the text, topic and
  contrast vectors;
- **a head per kind of question** (:func:`~._questions.question_kind`): a topic question
  and a statement are answered by a logistic regression on the scalars; a
  question with two sides to contrast adds a low-rank bilinear term whose
  learned axes read attributes such as sentiment (:class:`DecisionHead`); a
  question about what the text is like ("Is this tweet ironic?") borrows the
  topic weights under a temperature of its own, measured on such questions.

They are trained by ``training/train.py`` on questions built from the
development sets (``training/corpus.py``), judged leave-one-domain-out; the
weights ship as ``assets/decision_head.npz`` with their hash in
:data:`~._assets.SHA256`.

A question is read before it is answered (:func:`~._questions.read_yes_no`): its
topic, its sides, and whether it is negated, in which case it is answered as
its plain form and the probability turned round.
"""

from __future__ import annotations

import numpy as np

from ._questions import KINDS

__all__ = [
    "BACKGROUND_TOPICS",
    "SCALAR_FEATURES",
    "DecisionHead",
    "yes_no_features",
]

#: Generic topics a yes/no topic question is contrasted with: "is it about pets?" reads as "is it
#: closer to pets than to these?". Written as everyday subject areas, not taken from any data set.
BACKGROUND_TOPICS = (
    "sports", "politics and elections", "cooking and recipes", "weather", "health and medicine",
    "money and banking", "travel and holidays", "music", "movies and television", "computers and software",
    "science", "history", "education and school", "jobs and careers", "cars and driving", "animals and pets",
    "family and relationships", "shopping", "fashion and clothing", "housing and real estate", "law and crime",
    "religion", "art and design", "books and literature", "video games", "food and restaurants",
    "fitness and exercise", "nature and the environment", "business and companies", "technology and gadgets",
    "mathematics", "languages", "war and the military", "space and astronomy", "farming and gardening",
    "celebrities", "insurance", "taxes", "phones and telecommunications", "weddings", "children and parenting",
    "energy and electricity", "transport and public transit", "emotions and feelings", "philosophy",
    "social media", "hobbies and crafts", "the internet", "customer service", "delivery and shipping",
)  # fmt: skip

#: Background topics within this cosine of the asked topic are its near-synonyms and left out of the contrast.
SYNONYM_COSINE = 0.6
#: Softmax temperature of the topic against the background topics.
TOPIC_TEMPERATURE = 10.0
DIMENSIONS = 384

#: The scalar features of :func:`yes_no_features`, in the order of their columns. The saved heads' ``mean``,
#: ``scale`` and ``w`` (``assets/decision_head.npz``) hold one value per name in this order, so a new
#: feature goes at the end, and the heads are trained again.
SCALAR_FEATURES = (
    "topic_similarity",  # cosine of the text and the topic
    "question_similarity",  # cosine of the text and the whole question
    "topic_z_score",  # the text's cosine to the topic as a z-score among its cosines to the background topics
    "topic_log_probability",  # log-softmax of the text's cosine to the topic among those to it and the background
    "topic_rank",  # share of the background topics the text is less similar to than to the topic
    "best_background_similarity",  # the text's highest cosine to a background topic
    "contrast",  # the text's similarity to the true side minus that to the false side
    "has_contrast",  # 1 when the question has sides to contrast, else 0
    "topic_words",  # log(1 + words in the topic)
    "text_tokens",  # log(1 + tokens in the text)
    "topic_nearest_background",  # the topic's cosine to its nearest background topic (near-synonyms left out)
)
SCALARS = len(SCALAR_FEATURES)
#: The scalar that is the true-minus-false similarity: it turns round when the sides swap (:func:`swap_sides`).
CONTRAST_COLUMN = SCALAR_FEATURES.index("contrast")
#: Columns of :func:`yes_no_features`: the scalars, then the text, the topic and the contrast (true - false) vectors.
FEATURES = SCALARS + 3 * DIMENSIONS


def yes_no_features(
    texts: np.ndarray,
    topic: np.ndarray,
    question: np.ndarray,
    contrasts: list[tuple[np.ndarray, np.ndarray]],
    background: np.ndarray,
    topic_words: int,
    text_tokens: np.ndarray,
) -> np.ndarray:
    """The head's input for each text (rows of ``texts``, unit MiniLM vectors) against one question."""
    texts = np.asarray(texts, dtype=np.float64)
    topic = np.asarray(topic, dtype=np.float64)
    background = np.asarray(background, dtype=np.float64)
    background = background[background @ topic <= SYNONYM_COSINE]
    to_topic = texts @ topic
    to_question = texts @ np.asarray(question, dtype=np.float64)
    to_background = texts @ background.T
    mean, spread = to_background.mean(axis=1), to_background.std(axis=1) + 1e-6
    scaled = TOPIC_TEMPERATURE * to_background
    log_p = TOPIC_TEMPERATURE * to_topic - np.logaddexp(
        TOPIC_TEMPERATURE * to_topic, np.logaddexp.reduce(scaled, axis=1)
    )
    if contrasts:
        sides = np.mean([np.asarray(t, np.float64) - np.asarray(f, np.float64) for t, f in contrasts], axis=0)
        contrast = texts @ sides
    else:
        sides = np.zeros(DIMENSIONS)
        contrast = np.zeros(len(texts))
    named = {
        "topic_similarity": to_topic,
        "question_similarity": to_question,
        "topic_z_score": (to_topic - mean) / spread,
        "topic_log_probability": log_p,
        "topic_rank": (to_background < to_topic[:, None]).mean(axis=1),
        "best_background_similarity": to_background.max(axis=1),
        "contrast": contrast,
        "has_contrast": np.full(len(texts), float(bool(contrasts))),
        "topic_words": np.full(len(texts), np.log1p(topic_words)),
        "text_tokens": np.log1p(np.asarray(text_tokens, dtype=np.float64)),
        "topic_nearest_background": np.full(len(texts), float((background @ topic).max())),
    }
    # Stacked by SCALAR_FEATURES, not by the order written above: the columns are where the saved heads expect them.
    scalars = np.column_stack([named[name] for name in SCALAR_FEATURES])
    n = len(texts)
    return np.hstack([scalars, texts, np.broadcast_to(topic, (n, DIMENSIONS)), np.broadcast_to(sides, (n, DIMENSIONS))])


def swap_sides(features: np.ndarray) -> np.ndarray:
    """The features of the same question with its true and false sides swapped."""
    swapped = np.array(features, dtype=np.float64)
    swapped[:, CONTRAST_COLUMN] *= -1
    swapped[:, SCALARS + 2 * DIMENSIONS :] *= -1
    return swapped


class DecisionHead:
    """A linear map of the standardised scalars, plus a low-rank bilinear term of the vectors.

    ``logit = w . scalars + b + sum_k (U text)_k * (V topic + W contrast)_k``: ``U`` projects
    the text onto a few learned axes (sentiment, subjectivity, subject areas), ``V`` and ``W``
    say which axes the question asks about and in which direction. Then a temperature and
    an offset fitted on domains the head was not trained on.
    """

    NAMES = ("mean", "scale", "w", "b", "U", "V", "W", "temperature", "offset", "odd")

    def __init__(self, weights: dict[str, np.ndarray]):
        self.weights = {name: np.asarray(weights[name], dtype=np.float64) for name in self.NAMES}

    @staticmethod
    def load_all(path) -> dict[str, DecisionHead]:
        """The heads of a weights file, by kind; each weight is saved as ``<kind>.<name>``."""
        with np.load(path) as archive:
            return {kind: DecisionHead({n: archive[f"{kind}.{n}"] for n in DecisionHead.NAMES}) for kind in KINDS}

    @staticmethod
    def save_all(path, heads: dict[str, DecisionHead]) -> None:
        arrays = {f"{kind}.{name}": value for kind, head in heads.items() for name, value in head.arrays().items()}
        with open(path, "wb") as file:
            np.savez(file, **arrays)

    def arrays(self) -> dict[str, np.ndarray]:
        return {name: value.astype(np.float32) for name, value in self.weights.items()}

    def raw_logits(self, features: np.ndarray) -> np.ndarray:
        if self.weights["odd"]:
            # A contrast's answer turns round when its sides swap: only the part odd in the sides counts.
            return 0.5 * (self._logits(features) - self._logits(swap_sides(features)))
        return self._logits(features)

    def _logits(self, features: np.ndarray) -> np.ndarray:
        w = self.weights
        scalars = (features[:, :SCALARS] - w["mean"]) / w["scale"]
        text, topic, sides = np.split(np.asarray(features[:, SCALARS:], np.float64), 3, axis=1)
        axes = text @ w["U"].T
        asked = topic @ w["V"].T + sides @ w["W"].T
        return scalars @ w["w"] + float(w["b"]) + (axes * asked).sum(axis=1)

    def logits(self, features: np.ndarray) -> np.ndarray:
        """Calibrated logits of "yes"."""
        return self.raw_logits(features) / float(self.weights["temperature"]) + float(self.weights["offset"])

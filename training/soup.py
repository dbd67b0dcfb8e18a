"""Average final readers weight by weight and export the average as the runtime reads it.

Draws of one recipe differ most on the single texts that sit near a decision (training/README.md, "The
final model's seed"): each draw gets a few of the newcomer examples wrong, not always the same few. Averaging
two draws' answers would settle some, at twice the cost of a read. Averaging their weights costs nothing at
run time, and for fine-tuned readers it tends to answer like that ensemble, provided the draws start from the
same point: the same pretrained encoder (always) and the same random start of the output layer, which
``cross_encoder.py --init-seed`` gives a second draw. Fine-tuning moves an MPNet-6 reader's layers by about
3% and barely turns its output layer (cosine 0.995 to its start), so draws of a shared start stay near each
other; draws of different starts have near-orthogonal output layers (cosine 0.03), and their average
answers nothing. This script refuses those.

``--judge N`` reads up to N of the 28 sets' judged questions whose texts none of the draws trained on (their
training questions drawn again from their seeds) with each draw and with the average, the reader alone, so
an average that reads worse than its draws is seen before it is tried on the newcomer tests.

    python training/soup.py --base mpnet --layers 6 \\
        training/.cache/cross_encoder/final-3.0-2-*.pt training/.cache/cross_encoder/final-3.0-3-*.pt \\
        --reader-out training/.cache/reader-mpnet-6-soup.npz
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import everyday
import numpy as np
import torch
import train
from bases import BASES, base_path
from corpus import choice_rows, yes_no_rows
from cross_encoder import (
    CORPUS_CHOICES,
    FINAL_SEED,
    CrossEncoder,
    averaged,
    export,
    judged_rows,
    logits,
    training_groups,
    training_pairs,
)
from transformers import AutoTokenizer

from decirank.backends.local._reader import asked

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "decisions"

#: The least cosine between two draws' output layers for their weights to be averaged.
SHARED_START = 0.9


def check_shared_start(states: list[dict[str, torch.Tensor]], paths: list[Path]) -> None:
    head = states[0]["output.weight"].flatten()
    for state, path in zip(states[1:], paths[1:]):
        cosine = torch.nn.functional.cosine_similarity(head, state["output.weight"].flatten(), dim=0).item()
        print(f"{path.name}: output layer's cosine to {paths[0].name}'s {cosine:.3f}")
        if cosine < SHARED_START:
            raise SystemExit(
                f"{path.name} did not start where {paths[0].name} did (cosine {cosine:.3f} < {SHARED_START}): "
                "train it with cross_encoder.py --init-seed set to the first draw's --seed"
            )


def draw_seed(checkpoint: Path) -> int:
    """The seed a final checkpoint's questions were drawn with: ``final-{epochs}-{--seed}-{recipe}.pt``."""
    parts = checkpoint.stem.split("-")
    if len(parts) != 4 or parts[0] != "final" or not parts[2].isdigit():
        raise SystemExit(f"{checkpoint.name}: not a final checkpoint as cross_encoder.py names it")
    return int(parts[2]) + FINAL_SEED


def unseen_questions(seeds: list[int], limit: int) -> list:
    """Up to ``limit`` of the 28 sets' judged rows whose texts no draw of these seeds trained on."""
    corpus_rows = yes_no_rows(DATA, 0)
    corpus_choices = choice_rows(DATA, 0, per_domain=CORPUS_CHOICES * 4)
    data = everyday.load(everyday.DEFAULT_DATA)
    seen: set[str] = set()
    for seed in seeds:  # the final model's draw, as cross_encoder.run_fold makes it with the recipe's defaults
        seen.update(text for _, text, _ in training_pairs(corpus_rows, data, set(), set(), seed))
        seen.update(group.text for group in training_groups(data, set(), seed, corpus_choices, set()))
    rows = [row for row in judged_rows(corpus_rows, {row.domain for row in corpus_rows}) if row.text not in seen]
    print(f"{len(rows)} judged questions of the 28 sets are on texts these draws never trained on")
    return random.Random(0).sample(rows, min(limit, len(rows)))


def judge(models: dict[str, CrossEncoder], tokenizer, rows: list) -> None:
    pairs = [(asked(row.question, row.true, row.false), row.text) for row in rows]
    y = np.array([row.label for row in rows])
    by_family = [
        (family, np.array([row.family == family for row in rows])) for family in sorted({r.family for r in rows})
    ]
    print(f"the reader alone on {len(rows)} unseen questions of the 28 sets (accuracy / AUROC / ECE):")
    for name, model in models.items():
        p = train.sigmoid(logits(model, tokenizer, pairs, "cpu"))
        shown = ", ".join(f"{family} {train.metrics(p[m], y[m])['accuracy']:.3f}" for family, m in by_family)
        print(f"  {name}: {'{accuracy:.3f} / {auroc:.3f} / {ece:.3f}'.format(**train.metrics(p, y))} ({shown})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", type=Path, nargs="+", help="final checkpoints of one recipe (two or more)")
    parser.add_argument("--base", choices=BASES, default="minilm")
    parser.add_argument("--layers", type=int, default=0, help="as the draws were trained (default all)")
    parser.add_argument("--reader-out", type=Path, required=True)
    parser.add_argument("--judge", type=int, default=0, help="judge the draws and their average on N questions")
    args = parser.parse_args()
    if len(args.checkpoints) < 2:
        parser.error("give two or more checkpoints")
    states = [torch.load(path, map_location="cpu")["model"] for path in args.checkpoints]
    check_shared_start(states, args.checkpoints)
    path = base_path(args.base)
    model = CrossEncoder(path, layers=args.layers)
    model.load_state_dict(averaged(states))
    export(model.eval(), args.reader_out)
    if args.judge:
        models = {}
        for checkpoint, state in zip(args.checkpoints, states):
            models[checkpoint.name] = CrossEncoder(path, layers=args.layers)
            models[checkpoint.name].load_state_dict(state)
        models["their average"] = model
        rows = unseen_questions([draw_seed(checkpoint) for checkpoint in args.checkpoints], args.judge)
        judge(models, AutoTokenizer.from_pretrained(path), rows)


if __name__ == "__main__":
    main()

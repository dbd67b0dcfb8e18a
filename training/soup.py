"""Average final readers weight by weight and export the average as the runtime reads it.

Draws of one recipe differ most on the single texts that sit near a decision (training/README.md, "The
final model's seed"): each draw gets a few of the newcomer examples wrong, and not the same few. Averaging
two draws' answers would settle those, at twice the cost of a read. Averaging their weights costs nothing at
run time, and for fine-tuned readers it answers close to that ensemble, provided the draws start from the
same point: the same pretrained encoder (always) and the same random start of the output layer, which
``cross_encoder.py --init-seed`` gives a second draw. Fine-tuning moves an MPNet-6 reader's layers by about
3% and barely turns its output layer (cosine 0.995 to its start), so draws of a shared start stay near each
other; draws of different starts have near-orthogonal output layers (cosine 0.03), and their average
answers nothing. This script refuses those.

    python training/soup.py --base mpnet --layers 6 \\
        training/.cache/cross_encoder/final-3.0-2-*.pt training/.cache/cross_encoder/final-3.0-3-*.pt \\
        --reader-out training/.cache/reader-mpnet-6-soup.npz
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from bases import BASES, base_path
from cross_encoder import CrossEncoder, export

#: The least cosine between two draws' output layers for their weights to be averaged.
SHARED_START = 0.9


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", type=Path, nargs="+", help="final checkpoints of one recipe (two or more)")
    parser.add_argument("--base", choices=BASES, default="minilm")
    parser.add_argument("--layers", type=int, default=0, help="as the draws were trained (default all)")
    parser.add_argument("--reader-out", type=Path, required=True)
    args = parser.parse_args()
    if len(args.checkpoints) < 2:
        parser.error("give two or more checkpoints")
    states = [torch.load(path, map_location="cpu")["model"] for path in args.checkpoints]
    check_shared_start(states, args.checkpoints)
    model = CrossEncoder(base_path(args.base), layers=args.layers)
    model.load_state_dict(averaged(states))
    export(model.eval(), args.reader_out)


if __name__ == "__main__":
    main()

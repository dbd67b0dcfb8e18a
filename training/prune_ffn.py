"""An exported reader with fewer feed-forward units in each layer, to measure what a read would cost.

    python training/prune_ffn.py training/.cache/reader-mpnet-6-phase-b.npz /tmp/half.npz --keep 1536

Keeps, in each layer, the ``--keep`` units with the largest product of the norms of their weights in and out
(dequantized), and nothing is retrained: the answers are not meant to be read, only the cost, since a read
costs the same whatever the weights. Put the result in place with ``try_reader.py OUT --blend B --keep``, run
``benchmarks/single_decision.py`` and ``benchmarks/batch.py``, then put the shipped files back
(``git checkout -- src/decirank/backends/local/assets`` and remove ``reader_tokenizer.json`` there).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from decirank.backends.local._reader import reader_layers


def pruned(weights: dict[str, np.ndarray], keep: int) -> dict[str, np.ndarray]:
    out = dict(weights)
    for layer in range(reader_layers(weights)):
        name = f"l{layer}."
        into = weights[name + "i.w"].astype(np.float32) * weights[name + "i.s"]
        back = weights[name + "out.w"].astype(np.float32) * weights[name + "out.s"]
        importance = np.linalg.norm(into, axis=0) * np.linalg.norm(back, axis=1)
        units = np.sort(np.argsort(-importance)[:keep])
        out[name + "i.w"] = np.ascontiguousarray(weights[name + "i.w"][:, units])
        out[name + "i.s"], out[name + "i.b"] = weights[name + "i.s"][units], weights[name + "i.b"][units]
        out[name + "out.w"] = np.ascontiguousarray(weights[name + "out.w"][units])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("export", type=Path, help="a reader as cross_encoder.py --reader-out wrote it")
    parser.add_argument("out", type=Path)
    parser.add_argument("--keep", type=int, required=True, help="feed-forward units kept in each layer")
    args = parser.parse_args()
    with np.load(args.export) as archive:
        weights = dict(archive)
    np.savez(args.out, **pruned(weights, args.keep))
    print(f"wrote {args.out}: {reader_layers(weights)} layers of {args.keep} feed-forward units")


if __name__ == "__main__":
    main()

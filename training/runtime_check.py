"""A fold's held-out questions read by its reader as the runtime reads it, to judge what quantizing costs.

    python training/runtime_check.py --fold 0 --base mpnet --layers 6 --checkpoint training/.cache/cross_encoder/fold-0-….pt \
        --like training/heldout/mpnet-6 --out DIR
    python training/stack.py --no-write --heldout DIR

A fold file of ``cross_encoder.py`` holds torch's float logits. The runtime
reads the exported reader instead: int8 matrices with activations quantized
on the fly, and an MPNet's word embeddings in 4 bits (``cross_encoder.export``).
This exports the fold's checkpoint (``cross_encoder.py`` keeps it in its
cache, named by its recipe; ``--base`` and ``--layers`` as it was trained), reads every held-out question of
the fold through ``decirank``'s own reader (``_model.read_reader``: its graph
and its tokenizer, one thread), and writes the fold's file again into
``--out``, its logits the runtime's and everything else as in the file of
``--like``, so that ``stack.py`` judges the reader as it would ship.
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import everyday
import numpy as np
import torch
from bases import BASES, base_path
from cross_encoder import CrossEncoder, export, held_out_predictions, yes_no_rows

from decirank.backends.local._model import _runtime, read_reader

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fold", type=int, required=True)
    parser.add_argument("--base", choices=BASES, default="minilm")
    parser.add_argument("--layers", type=int, default=0, help="as the fold was trained with (default: all)")
    parser.add_argument("--checkpoint", type=Path, required=True, help="the fold's checkpoint")
    parser.add_argument("--like", type=Path, required=True, help="the folder of the fold's own file")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--data", type=Path, default=HERE.parents[1] / "shared/data/decisions")
    args = parser.parse_args()
    like = json.loads((args.like / f"fold-{args.fold}.json").read_text(encoding="utf-8"))
    path = base_path(args.base)
    model = CrossEncoder(path, 0, args.layers)
    model.load_state_dict(torch.load(args.checkpoint, map_location="cpu")["model"])
    exported = args.out / f"reader-fold-{args.fold}.npz"
    export(model, exported)
    del model
    tokenizer = Path(path) / "tokenizer.json" if args.base != "minilm" else None
    with ThreadPoolExecutor(1) as pool:
        reader = read_reader(exported, pool, tokenizer)

        def read(pairs: list[tuple[str, str]]) -> np.ndarray:
            started = time.monotonic()
            out = reader.logits(_runtime.reader_ids(pairs, reader))
            print(f"read {len(pairs)} questions in {time.monotonic() - started:.0f} s", flush=True)
            return out

        predictions = held_out_predictions(
            read, yes_no_rows(args.data, 0), everyday.load(), set(like["held_everyday"]), set(like["held_corpus"])
        )
    record = {key: value for key, value in like.items() if key not in predictions}
    record.update(predictions, read_by="the runtime's graph (training/runtime_check.py)")
    target = args.out / f"fold-{args.fold}.json"
    target.write_text(json.dumps(record, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {target}", flush=True)


if __name__ == "__main__":
    main()

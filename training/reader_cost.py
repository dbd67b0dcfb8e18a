"""What one read of a reader costs on this CPU, by base and depth, before one is trained and wired in.

    python training/reader_cost.py [--threads 1] [--rounds 30] [--json PATH]

Each reader (MiniLM or MPNet, cut to its first N layers, untrained weights: a read costs the same whatever
they are) is exported to ONNX and quantized to int8 with onnxruntime's dynamic quantizer, then asked one
question about a 48-word message on ``--threads`` threads; beside them, the shipped reader's own int8 graph
(``_reader.Reader``, built by ``_onnx.py``) reads the same pair on one thread, as the runtime reads a text. Prints the median and the fastest of
``--rounds`` reads, and each int8 graph's size (for MPNet, its word embeddings are a quarter of it).
Needs the ``train`` extra (torch, transformers, onnx).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch
from onnxruntime.quantization import QuantType, quantize_dynamic
from transformers import AutoTokenizer

sys.path.insert(0, str(Path(__file__).parent))
from bases import base_path
from cross_encoder import CrossEncoder, encode

QUESTION = "Is the customer reporting a problem with billing?"
TEXT = (
    "I was charged twice for my subscription this month and the app keeps logging me out. I have tried "
    "reinstalling it, resetting my password and clearing the cache, but nothing works. Can someone please "
    "look into the double charge and refund one of them as soon as possible?"
)
READERS = (("minilm", 4), ("minilm", 6), ("mpnet", 4), ("mpnet", 6), ("mpnet", 12))


class _Inputs(torch.nn.Module):
    """The reader with its inputs as two tensors, as the exporter traces them."""

    def __init__(self, reader: CrossEncoder):
        super().__init__()
        self.reader = reader

    def forward(self, input_ids, attention_mask):
        return self.reader({"input_ids": input_ids, "attention_mask": attention_mask})


def timed(run, rounds: int) -> tuple[float, float]:
    for _ in range(3):
        run()
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        run()
        times.append(1000 * (time.perf_counter() - started))
    return float(np.median(times)), float(min(times))


def exported(base: str, layers: int, folder: Path, threads: int, rounds: int) -> dict:
    path = base_path(base)
    reader = CrossEncoder(path, layers=layers).eval()
    inputs = encode(AutoTokenizer.from_pretrained(path), [(QUESTION, TEXT)])
    fp32, int8 = folder / f"{base}-{layers}.onnx", folder / f"{base}-{layers}-int8.onnx"
    axes = {"input_ids": {0: "batch", 1: "tokens"}, "attention_mask": {0: "batch", 1: "tokens"}}
    torch.onnx.export(
        _Inputs(reader),
        (inputs["input_ids"], inputs["attention_mask"]),
        str(fp32),
        input_names=list(axes),
        output_names=["logit"],
        dynamic_axes=axes,
        opset_version=17,
        dynamo=False,
    )
    quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8, per_channel=True)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(str(int8), options, providers=["CPUExecutionProvider"])
    feed = {name: inputs[name].numpy() for name in axes}
    median, fastest = timed(lambda: session.run(None, feed), rounds)
    return {
        "tokens": int(inputs["input_ids"].shape[1]),
        "median_ms": median,
        "fastest_ms": fastest,
        "int8_mb": int8.stat().st_size / 1e6,
    }


def shipped(rounds: int) -> dict:
    """The shipped reader's own graph: a one-thread session, as the runtime reads each text."""
    from concurrent.futures import ThreadPoolExecutor

    from decirank.backends.local._assets import find_assets, find_reader
    from decirank.backends.local._model import MAX_TOKENS, _Runtime
    from decirank.backends.local._onnx import read_initializers
    from decirank.backends.local._reader import Reader, pair_ids

    with np.load(find_reader()) as archive:
        weights = {name: archive[name] for name in archive.files}
    minilm = read_initializers(str(find_assets().minilm_onnx))
    reader = Reader(weights, minilm, ThreadPoolExecutor(1), MAX_TOKENS)
    question, text = _Runtime().token_ids([QUESTION, TEXT])
    ids = pair_ids(question, text, MAX_TOKENS)
    median, fastest = timed(lambda: reader.logit(ids), rounds)
    return {"tokens": len(ids), "median_ms": median, "fastest_ms": fastest}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    figures = {"shipped reader (its own graph)": shipped(args.rounds)}
    with tempfile.TemporaryDirectory() as folder:
        for base, layers in READERS:
            figures[f"{base}, {layers} layers (exported)"] = exported(
                base, layers, Path(folder), args.threads, args.rounds
            )
    print(
        f"one read of a {figures['shipped reader (its own graph)']['tokens']}-token question and text, "
        f"{args.threads} thread(s), ms of wall time: median (fastest)"
    )
    for name, figure in figures.items():
        size = f", int8 graph {figure['int8_mb']:.1f} MB" if "int8_mb" in figure else ""
        print(f"  {name:32} {figure['median_ms']:6.2f} ({figure['fastest_ms']:.2f}){size}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

"""MiniLM vectors and token counts of every string the corpus uses, computed once and kept on disk.

The vectors come from the runtime's own encoder (int8 MiniLM through
onnxruntime, cut at the runtime's token window), so the head is trained on
exactly what it is given when it answers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from rich.progress import Progress

from decirank.backends.local import runtime

__all__ = ["VectorStore"]

CHUNK = 256


def _key(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


class VectorStore:
    """text -> (unit vector, tokens), backed by an ``.npz`` file that grows as new texts are asked for."""

    def __init__(self, path: Path):
        self.path = path
        self.index: dict[str, int] = {}
        self.vectors = np.zeros((0, 384), np.float32)
        self.tokens = np.zeros(0, np.int32)
        if path.exists():
            with np.load(path) as archive:
                self.index = {key: i for i, key in enumerate(archive["keys"].tolist())}
                self.vectors, self.tokens = archive["vectors"], archive["tokens"]

    def ensure(self, texts: Iterable[str]) -> None:
        missing = list(dict.fromkeys(t for t in texts if _key(t) not in self.index))
        if not missing:
            return
        vectors, tokens = [self.vectors], [self.tokens]
        with Progress() as progress:
            task = progress.add_task("MiniLM vectors", total=len(missing))
            for start in range(0, len(missing), CHUNK):
                chunk = missing[start : start + CHUNK]
                vectors.append(runtime.dense_vectors(chunk).astype(np.float32))
                tokens.append(np.array([len(ids) for ids in runtime.token_ids(chunk)], np.int32))
                for text in chunk:
                    self.index[_key(text)] = len(self.index)
                progress.advance(task, len(chunk))
                if start // CHUNK % 20 == 19:
                    self._save(vectors, tokens)
        self._save(vectors, tokens)

    def _save(self, vectors: list[np.ndarray], tokens: list[np.ndarray]) -> None:
        self.vectors, self.tokens = np.concatenate(vectors), np.concatenate(tokens)
        vectors[:], tokens[:] = [self.vectors], [self.tokens]
        keys = np.array(sorted(self.index, key=self.index.get))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_suffix(".partial.npz")
        np.savez(partial, keys=keys[: len(self.vectors)], vectors=self.vectors, tokens=self.tokens)
        partial.replace(self.path)

    def of(self, texts: list[str]) -> np.ndarray:
        return self.vectors[[self.index[_key(t)] for t in texts]].astype(np.float64)

    def tokens_of(self, texts: list[str]) -> np.ndarray:
        return self.tokens[[self.index[_key(t)] for t in texts]]

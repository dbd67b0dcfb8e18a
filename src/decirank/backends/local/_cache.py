"""A bounded, thread-safe LRU of encoder outputs keyed by a digest of the text."""

from __future__ import annotations

import hashlib
import sys
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

__all__ = ["ENTRY_OVERHEAD", "VectorCache", "text_key"]

#: Bytes an entry costs beyond its arrays' objects: its key, the ordered dict's node and the size kept for it.
ENTRY_OVERHEAD = 200


def text_key(kind: str, text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16, person=kind.encode()[:16]).digest()


class VectorCache:
    """Least recently used entries go first once the memory held passes ``max_bytes``.

    An entry is counted at what it holds in memory, its arrays' object headers and the cache's own
    bookkeeping included: counted by their data alone, the short texts of small requests (token states
    of a few hundred bytes each) held about three times the bound, and a server's memory kept rising
    for the first ten thousand requests.
    """

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._entries: OrderedDict[bytes, Any] = OrderedDict()
        self._sizes: dict[bytes, int] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    @staticmethod
    def _size(value: Any) -> int:
        parts = [value] if isinstance(value, np.ndarray) else list(value)
        size = ENTRY_OVERHEAD + (0 if isinstance(value, np.ndarray) else sys.getsizeof(value))
        for part in parts:
            # getsizeof counts an array's header, and its data when the array owns it; a view's data is the base's.
            size += sys.getsizeof(part) + (part.nbytes if part.base is not None else 0)
        return size

    def get(self, key: bytes) -> Any | None:
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: bytes, value: Any) -> None:
        size = self._size(value)
        if size > self.max_bytes:
            return
        with self._lock:
            if key in self._entries:
                self._bytes -= self._sizes[key]
            self._entries[key] = value
            self._entries.move_to_end(key)
            self._sizes[key] = size
            self._bytes += size
            while self._bytes > self.max_bytes:
                old, _ = self._entries.popitem(last=False)
                self._bytes -= self._sizes.pop(old)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._sizes.clear()
            self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

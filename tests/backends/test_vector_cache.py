"""The embedded model's vector cache holds no more memory than its bound, however small its entries."""

from __future__ import annotations

import gc
import tracemalloc

import numpy as np

from decirank.backends.local._cache import VectorCache, text_key

BOUND = 1024 * 1024


def _held_by(fill) -> int:
    """Bytes still allocated after ``fill`` returns what it made (kept alive here)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = fill()
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    del kept
    return held


def test_small_entries_are_counted_at_what_they_hold_so_the_bound_is_the_memory():
    """20,000 short texts' entries (a header and a window of token ids, as the reader keeps them) in a 1 MiB
    cache: it keeps about 1 MiB of memory, where counting only the arrays' data let it hold three times that."""

    def fill() -> VectorCache:
        cache = VectorCache(BOUND)
        for n in range(20_000):
            head = np.array([40 + n % 7, 1, 12], np.int64)
            window = np.arange(12, dtype=np.int32) + n
            cache.put(text_key("reading", f"ticket {n}: the printer is on fire"), (head, window))
        return cache

    held = _held_by(fill)
    assert held < 1.25 * BOUND, f"a cache bounded at {BOUND} bytes holds {held}"
    cache = fill()
    assert 0 < len(cache) < 20_000
    assert cache.get(text_key("reading", "ticket 19999: the printer is on fire")) is not None  # the newest stays
    assert cache.get(text_key("reading", "ticket 0: the printer is on fire")) is None  # the oldest went


def test_a_vector_of_its_own_and_a_view_count_their_data():
    """A lone vector counts its data and header; a view counts the data it keeps alive."""
    cache = VectorCache(BOUND)
    vector = np.ones(384, np.float32)
    cache.put(b"a", vector)
    alone = cache._bytes
    assert alone >= vector.nbytes
    base = np.ones((2, 384), np.float32)
    cache.put(b"b", base[0])
    assert cache._bytes - alone >= vector.nbytes

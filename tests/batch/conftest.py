"""Small files of generated tickets in every format, and one local Ray instance for the session."""

from __future__ import annotations

import csv
import json
import logging
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

SUBJECTS = ["my card", "the refund", "the parcel", "my dog", "the app", "the invoice", "our cat", "the screen"]
VERBS = [
    "was charged twice for",
    "never arrived with",
    "stopped working after",
    "loves",
    "crashed during",
    "is late for",
]
OBJECTS = ["the update", "last week", "the payment", "dinner", "my order", "the vet visit"]


def ticket_rows(count: int) -> list[dict]:
    """``count`` tickets ``{"id", "text", "queue"}``, every text different, no randomness."""
    rows = []
    for index in range(count):
        text = (
            f"{SUBJECTS[index % len(SUBJECTS)]} {VERBS[(index // 8) % len(VERBS)]} "
            f"{OBJECTS[(index // 48) % len(OBJECTS)]} (ticket {index})"
        )
        rows.append({"id": index, "text": text, "queue": ["billing", "pets", "tech"][index % 3]})
    return rows


def write_rows(path: Path, rows: list[dict]) -> Path:
    """``rows`` as a JSON Lines, CSV or Parquet file, by ``path``'s extension."""
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    elif path.suffix == ".csv":
        with open(path, "w", encoding="utf-8", newline="") as file:
            writer = csv.DictWriter(file, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    else:
        pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def read_output(path: Path) -> list[dict]:
    """An output file's rows, whatever its format (CSV values are strings)."""
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    if path.suffix == ".csv":
        with open(path, encoding="utf-8", newline="") as file:
            return list(csv.DictReader(file))
    return pq.read_table(path).to_pylist()


class Stop(KeyboardInterrupt):
    """Raised by :func:`interrupt_after`: a batch stopped part-way, as Ctrl-C stops it."""


def interrupt_after(chunks: int):
    """An ``on_progress`` that stops the batch once ``chunks`` chunks are done (its first call reports the start)."""
    seen = {"calls": 0}

    def on_progress(progress):
        seen["calls"] += 1
        if seen["calls"] > chunks:
            raise Stop()

    return on_progress


@pytest.fixture
def tickets(tmp_path) -> Path:
    """120 tickets as JSON Lines."""
    return write_rows(tmp_path / "tickets.jsonl", ticket_rows(120))


@pytest.fixture(scope="session")
def ray_instance():
    """One local Ray for every test that needs it: 2 CPUs, a small object store, quiet."""
    import ray

    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        object_store_memory=200 * 2**20,
        logging_level=logging.ERROR,
    )
    yield ray
    ray.shutdown()

"""decirank.batch with engine="ray" on a real local Ray instance (one for the session, 2 CPUs).

Kept to one Ray Data run: a batch started here, interrupted, and finished on
Ray must write what an uninterrupted batch in this process writes, with every
chunk's tool run (written by the actors) a child of the one batch run.
"""

from __future__ import annotations

import pytest

import decirank
from decirank.stores.runlog import current_runlog

from .conftest import Stop, interrupt_after, ticket_rows, write_rows


def test_a_batch_resumed_on_ray_writes_what_one_process_writes(tmp_path, ray_instance):
    source = write_rows(tmp_path / "in.jsonl", ticket_rows(300))
    options = {"question": "Is this about a payment?", "text": "text", "model": "lexical", "batch_size": 50}
    reference = decirank.batch("filter", source, tmp_path / "reference.jsonl", workers=0, **options)

    out = tmp_path / "out.jsonl"
    with pytest.raises(Stop):
        decirank.batch("filter", source, out, workers=0, on_progress=interrupt_after(2), **options)
    result = decirank.batch("filter", source, out, engine="ray", workers=2, **options)

    assert (result.engine, result.workers, result.resumed, result.answered) == ("ray", 2, 100, 300)
    assert out.read_bytes() == (tmp_path / "reference.jsonl").read_bytes()
    assert ray_instance.is_initialized()  # a Ray the caller started is left running

    run = current_runlog().run(result.run_id)
    assert run["status"] == "success" and run["tool"] == "batch"
    chunk_runs = [child for child in run["children"] if child["tool"] == "filter"]
    assert len(chunk_runs) == 6 and {child["status"] for child in chunk_runs} == {"success"}
    assert run["calls"] == reference.usage.calls

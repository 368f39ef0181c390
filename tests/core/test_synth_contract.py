"""The trace contract does not move: synthesis today gives, row for row and column for column, the
trace the code of commit 6e983e3 gave, for every preset x policy family (tests/core/synth_cases.py
wrote the fixture with that code). One deliberate change since: the GPU cases' `grid` and `config`
columns were re-recorded when issue 11 retiled the GEMVs (the fixture's `regrid` note) and again for
the cases whose GEMV tile issue 22's re-measured SASS changed (`regrid_issue22`), and the `config`
of the interpreter cases whose one-row group GEMV runs issue 22's fp16 partial sums at BLOCK_K 32
(`regrid_issue22_partial_sums`), and the any-precision GPU cases' `grid`, `config` and
`bytes_read` when stop 31 retiled those kernels and charged the pair table on every path
(`regrid_issue22_anyprec`), and the `config` of the GPU case with one-row GEMVs when stop 58
pipelined their K loop (`regrid_loop_stages`), and the `config` of the cases with group W_hat loops
when stop 61 gave them scale-zero words (`regrid_sz_words`), and the `config` and `bytes_read` of
the any-precision cases whose 4-bit launches of 2+ rows read the LUT's words (`regrid_lut_words`);
every other column's digest is still the old code's."""

from __future__ import annotations

import json
from typing import Any

import pytest
from synth_cases import FIXTURE, case_id, cases, digest, synthesize_case

from mpsim.traces.schema import KV_FORMAT_OF_BITS, SCHEMA_VERSION

EXPECTED: dict[str, Any] = json.loads(FIXTURE.read_text())["cases"]
NEW_MODEL_KEYS = ("max_context_len", "context_source")
# schema 2, 5 and 6, after the fixture: checked against their definitions below
NEW_COLUMNS = ("kv_tokens", "kv_format", "tp", "stage", "msg_bytes", "comm_library", "micro_batch")


@pytest.mark.parametrize("case", cases(), ids=case_id)
def test_synthesis_matches_the_old_code(case: dict[str, Any]) -> None:
    want = EXPECTED[case_id(case)]
    trace = synthesize_case(case)
    rows = trace.rows
    decode = ((rows["op"] == "attention") & (rows["q_len"] == 1)).to_numpy(dtype=bool)
    tokens = rows["kv_tokens"]  # a uniform batch: batch x kv_len on decode attention, NA elsewhere
    assert tokens[~decode].isna().all()
    assert (tokens[decode] == (rows["batch"] * rows["kv_len"])[decode]).all()
    assert (rows["tp"] == 1).all() and (rows["stage"] == 0).all() and (rows["micro_batch"] == 0).all()
    assert rows["msg_bytes"].isna().all() and rows["comm_library"].isna().all()
    kv = rows["op"].isin(["attention", "kv_quant"]).to_numpy(dtype=bool)  # schema 5: int caches by bits
    assert rows["kv_format"][~kv].isna().all()
    assert (rows["kv_format"][kv] == rows["k_bits"][kv].map(KV_FORMAT_OF_BITS)).all()
    got = digest(rows.drop(columns=list(NEW_COLUMNS)))
    assert got["rows"] == want["rows"]
    assert got["columns"] == want["columns"]
    changed = [c for c in want["columns"] if got["digests"][c] != want["digests"][c]]
    assert not changed, f"columns whose values differ from the old synthesis: {changed}"
    meta = trace.meta.as_dict()
    for key in NEW_MODEL_KEYS:  # what specs gained since: the context length and its source
        meta["model"].pop(key)
    assert meta.pop("schema_version") == SCHEMA_VERSION and want["meta"].pop("schema_version") == 1
    assert meta.pop("protocol") is None  # schema 3: a synthesized trace has no measured times
    assert meta.pop("engine") == "mpsim"  # schema 4: the default engine, mpsim's own kernels
    assert meta == want["meta"]

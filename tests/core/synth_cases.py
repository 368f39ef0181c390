"""The synthesis contract fixture: per-column digests of synthesized traces, written by the old code.

tests/core/data/synth_digests.json holds, for every case below (every preset and the tiny model x
every policy family, with KV widths, batch, paged KV, interpreter configs and a long progressive
run), the row count, the metadata and one SHA-256 per column over the column's values in row order
(as plain Python values: NA -> None, so narrower dtypes give the same digest). It was written by
this module at commit 6e983e3 (before synthesis and validation became columnar); the test
(test_synth_contract.py) recomputes the digests with today's code and compares them.

Regenerate only on purpose (a deliberate change of the launch list):
    .venv/bin/python tests/core/synth_cases.py
"""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

FIXTURE = Path(__file__).parent / "data" / "synth_digests.json"
MODELS = ("vicuna-7b", "llama-2-7b", "mobilellama-1.4b", "stablelm-zephyr-3b", "phi-1.5",
          "llama-3-8b", "qwen2.5-1.5b", "tiny")
# Every family: fp16, uniform group (g128, g64, whole row), any-precision, phase-aware, progressive
# (one and two switches), with fp16, int8 and int4 KV caches.
POLICIES = ("fp16", "w8", "w4g64+kv8", "w3grow", "w2+kv4", "ap3", "ap4-3+kv8", "ap4-4@2-3@3-2+kv4")


def cases() -> list[dict[str, Any]]:
    """(model, policy, prompt_len, gen_len, batch, on_gpu, kv_block) of every case, as dicts."""
    out = [dict(model=m, policy=p, prompt_len=62, gen_len=5, batch=2, on_gpu=True, kv_block=None)
           for m in MODELS for p in POLICIES]  # decode kv_len 63..66 crosses a 64-token KV tile
    out += [dict(model=m, policy="w4+kv8", prompt_len=9, gen_len=3, batch=1, on_gpu=False, kv_block=None)
            for m in MODELS]  # the interpreter's launch configs
    out += [dict(model=m, policy="ap4-4@1-3+kv4", prompt_len=70, gen_len=4, batch=3, on_gpu=True,
                 kv_block=64) for m in ("vicuna-7b", "llama-3-8b", "phi-1.5")]  # paged KV
    out += [dict(model="mobilellama-1.4b", policy="ap4-4@40-3", prompt_len=100, gen_len=130, batch=3,
                 on_gpu=True, kv_block=None),  # many decode steps in two segments
            dict(model="llama-3-8b", policy="fp16", prompt_len=1, gen_len=1, batch=1, on_gpu=True,
                 kv_block=None)]  # prefill only
    return out


def case_id(c: dict[str, Any]) -> str:
    return (f"{c['model']}|{c['policy']}|p{c['prompt_len']}|g{c['gen_len']}|b{c['batch']}"
            f"|{'gpu' if c['on_gpu'] else 'interp'}|kvb{c['kv_block']}")


def plain(v: Any) -> Any:
    """A value as plain Python, independent of the column's dtype (NA and NaN -> None)."""
    if v is None or v is pd.NA:
        return None
    if isinstance(v, bool | np.bool_):
        return bool(v)
    if isinstance(v, int | np.integer):
        return int(v)
    if isinstance(v, float | np.floating):
        return None if math.isnan(v) else float(v)
    return str(v)


def column_digest(series: pd.Series) -> str:
    values = [plain(v) for v in series.astype(object).tolist()]
    return hashlib.sha256(json.dumps(values).encode()).hexdigest()[:16]


def digest(rows: pd.DataFrame) -> dict[str, Any]:
    return {"rows": len(rows), "columns": list(rows.columns),
            "digests": {c: column_digest(rows[c]) for c in rows.columns}}


def synthesize_case(c: dict[str, Any]) -> Any:
    from mpsim.models import get_model
    from mpsim.policy import parse_policy
    from mpsim.synth import synthesize
    from mpsim.workload import Workload

    return synthesize(get_model(c["model"]), parse_policy(c["policy"]),
                      Workload(c["prompt_len"], c["gen_len"], c["batch"]), on_gpu=c["on_gpu"],
                      kv_block=c["kv_block"])


def main() -> int:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent, check=True).stdout.strip()
    table = {}
    for c in cases():
        trace = synthesize_case(c)
        table[case_id(c)] = {**digest(trace.rows), "meta": trace.meta.as_dict()}
    FIXTURE.write_text(json.dumps({"written_by_commit": commit, "cases": table}, indent=1,
                                  sort_keys=True) + "\n")
    print(f"wrote {FIXTURE}: {len(table)} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A policy x hardware comparison table from synthesized traces and the roofline baseline.

The first answer to "what does this policy buy me on that hardware?": for each model and workload,
synthesize one trace per policy, bound it on each hardware model, and report speedups over fp16.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from mpsim.hw_models.loader import load_hardware
from mpsim.models import get_model
from mpsim.policy import parse_policy
from mpsim.sim.roofline import roofline
from mpsim.sim.summary import summarize
from mpsim.synth import synthesize
from mpsim.workload import Workload


def roofline_table(models: Sequence[str], policies: Sequence[str], hardware: Sequence[str],
                   workloads: Sequence[Workload]) -> pd.DataFrame:
    """One row per (model, workload, policy, hardware) with TTFT, TPOT, tokens/s, speedup over fp16."""
    hws = [load_hardware(h) for h in hardware]
    records = []
    for model in models:
        spec = get_model(model)
        for wl in workloads:
            for pol in policies:
                trace = synthesize(spec, parse_policy(pol), wl)
                decode = trace.rows["phase"] == "decode"
                weight_gb = trace.rows.loc[decode & (trace.rows["op"] == "gemm"), "bytes_read"].sum()
                for hw in hws:
                    t = roofline(trace.rows, hw)["t_lower_s"].to_numpy()
                    s = summarize(trace.rows, t, wl.batch, wl.gen_len)
                    records.append({
                        "model": spec.name, "prompt_len": wl.prompt_len, "gen_len": wl.gen_len,
                        "batch": wl.batch, "policy": pol, "hw": hw.name, "ttft_ms": s.ttft_s * 1e3,
                        "tpot_ms": s.tpot_mean_s * 1e3, "tokens_per_s": s.tokens_per_s,
                        "decode_weight_GB_per_step": weight_gb / max(1, wl.decode_steps) / 1e9,
                    })
    table = pd.DataFrame.from_records(records)
    keys = ["model", "prompt_len", "gen_len", "batch", "hw"]
    base = table[table["policy"] == "fp16"].set_index(keys)["tokens_per_s"]
    table["speedup_vs_fp16"] = table["tokens_per_s"].to_numpy() / base.reindex(
        pd.MultiIndex.from_frame(table[keys])).to_numpy()
    return table

"""The memory chart writes above each bar the GPUs of each swept device the point needs."""

from __future__ import annotations

import pandas as pd

from mpsim.analysis.plots.memory import memory_figure
from mpsim.memory import point_memory
from mpsim.models import get_model
from mpsim.policy import parse_policy
from mpsim.workload import Workload


def _table() -> pd.DataFrame:
    rows = []
    spec, wl = get_model("llama-2-70b"), Workload(prompt_len=3584, gen_len=512)
    for policy in ("fp16", "w4"):
        mem = point_memory(spec, parse_policy(policy), wl)
        for hw, gb in (("h100-sxm", 80), ("l40s", 48)):
            rows.append({"model": spec.name, "policy": policy, "prompt_len": 3584, "gen_len": 512,
                         "batch": 1, "weights_bytes": mem.weights_bytes,
                         "kv_cache_bytes": mem.kv_cache_bytes,
                         "peak_activation_bytes": mem.peak_activation_bytes,
                         "hw": hw, "hw_memory_bytes": gb * 10**9})
    return pd.DataFrame(rows)


def test_bars_carry_the_gpus_needed_per_device() -> None:
    fig = memory_figure(_table())
    bars = [t.get_text() for t in fig.axes[0].texts if "GB" not in t.get_text()]
    # fp16: 138 GB of weights -> 2 H100 (80 GB) or 4 L40S (48 GB); w4 (group 128): 36 GB -> 1 of each,
    # which the bar leaves unlabelled (the figure's note says so)
    assert bars == ["2x h100-sxm\n4x l40s", ""]
    assert "no label: one of each fits" in fig.legends[0].get_title().get_text()

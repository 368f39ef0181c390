"""The NPU figures of docs/npu.md: decode against the bandwidth bound, prefill against the padded peak,
where a decode step's time and energy go, J/token beside a GPU, and how the speedups move with the
assumptions. The bounds are computed here, outside the simulator, from the trace and the hardware file.

    python -m mpsim.analysis.bench.npu [--out analysis/results] [--doc docs/npu.md]

Writes analysis/results/npu_*.csv and the tables between the `<!-- npu:NAME:begin/end -->` markers.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from mpsim.hw_models.loader import load_hardware
from mpsim.hw_models.schema import HardwareSpec, NpuSpec
from mpsim.models import get_model
from mpsim.policy import parse_policy
from mpsim.sim import SimResult, simulate
from mpsim.sim.energy import energy_breakdown
from mpsim.sim.keys import bucketed_kv
from mpsim.sim.memo import LaunchMemo
from mpsim.synth import synthesize
from mpsim.traces.accounting import FP16, kv_bytes_per_token_head, weight_bytes
from mpsim.traces.atomic import write_csv_atomic, write_text_atomic
from mpsim.traces.trace import Trace
from mpsim.workload import Workload

ROOT = Path(__file__).resolve().parents[2]
MODEL = "vicuna-7b"
DECODE = Workload(256, 32, 1)
PREFILL = Workload(512, 2, 1)
POLICIES = ("fp16", "w8", "w4", "w3", "w2", "ap3", "ap2", "ap4-3", "ap4-4@8-3")
ENERGY_POLICIES = ("fp16", "w4", "ap3")
ENERGY_HW = ("npu-llm", "h200-sxm")


def trace_of(policy: str, wl: Workload, model: str = MODEL) -> Trace:
    return synthesize(get_model(model), parse_policy(policy), wl)


def _decode(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows["phase"] == "decode"]


def stream_bytes(rows: pd.DataFrame) -> tuple[float, float]:
    """(weight bytes, KV-cache bytes) the decode steps of `rows` read, per step."""
    dec = _decode(rows)
    steps = max(1, dec["step"].nunique())
    gemm = dec[dec["op"] == "gemm"]
    weights = 0.0
    for r in gemm.itertuples(index=False):
        g = None if pd.isna(r.group_size) else int(r.group_size)
        weights += float(weight_bytes(int(r.n), int(r.k), str(r.w_format), int(r.w_bits), g))
    attn = dec[dec["op"] == "attention"]
    q = (attn["batch"] * attn["q_len"] * attn["num_q_heads"] * attn["head_dim"] * FP16).astype(float)
    kv = float((attn["bytes_read"].astype(float) - q).sum())
    return weights / steps, kv / steps


def decode_costs(rows: pd.DataFrame, hw: NpuSpec) -> dict[str, float]:
    """The costs per decode step that weight and KV streaming cannot hide, in seconds.

    extra DRAM traffic: every launch's writes, the embedding gather, and the KV tokens the simulator
    adds by rounding decode attention up to whole 64-token tiles (its memo buckets); the tail: the
    last tile lands (DRAM latency + DMA setup) and is decoded, then the array drains (rows + cols
    cycles)."""
    dec = _decode(rows)
    steps = max(1, dec["step"].nunique())
    bw = hw.dram_bandwidth_Bps() * hw.achievable_bandwidth_fraction
    writes = float(dec["bytes_written"].astype(float).sum())
    gather = float(dec.loc[dec["op"] == "embed", "bytes_read"].astype(float).sum())
    attn = dec["op"] == "attention"
    pad_tokens = (bucketed_kv(dec)[0][attn] - dec.loc[attn, "kv_len"]).astype(float)
    a = dec[attn]
    per_token = np.asarray([
        (kv_bytes_per_token_head(int(d), int(kb)) + kv_bytes_per_token_head(int(d), int(vb))) * h * b
        for d, kb, vb, h, b in zip(a["head_dim"], a["k_bits"], a["v_bits"], a["num_kv_heads"],
                                   a["batch"], strict=True)])
    padding = float((pad_tokens.to_numpy() * per_token).sum())
    clock = hw.clock_MHz * 1e6
    tile_weights = 128 * 1024 / FP16  # the last DMA tile per core is the fp16 lm_head's
    tail = ((hw.dram.latency_ns + hw.dma.setup_latency_ns) * 1e-9
            + tile_weights / hw.weight_decoder.weights_per_cycle[16] / clock
            + (hw.mac_array.rows + hw.mac_array.cols) / clock)
    return {"writes_s": writes / steps / bw, "gather_s": gather / steps / bw,
            "kv_padding_s": padding / steps / bw, "tail_s": tail}


def decode_bars(hw_name: str, policies: Sequence[str] = POLICIES, memo: LaunchMemo | None = None,
                hw: NpuSpec | None = None) -> pd.DataFrame:
    """Per policy: simulated decode time per token against the streaming bound (and + costs)."""
    spec = hw or load_hardware(hw_name)
    assert isinstance(spec, NpuSpec)
    bw = spec.dram_bandwidth_Bps() * spec.achievable_bandwidth_fraction
    out = []
    for policy in policies:
        tr = trace_of(policy, DECODE)
        res = simulate(tr, spec, memo=memo or LaunchMemo(None))
        w, kv = stream_bytes(tr.rows)
        bound = (w + kv) / bw
        costs = decode_costs(tr.rows, spec)
        with_costs = bound + sum(costs.values())
        tpot = res.summary.tpot_mean_s
        out.append({"hw": spec.name, "policy": policy, "weights_MB": w / 1e6, "kv_MB": kv / 1e6,
                    "tpot_ms": tpot * 1e3, "bound_ms": bound * 1e3,
                    **{k.replace("_s", "_us"): v * 1e6 for k, v in costs.items()},
                    "bound_plus_costs_ms": with_costs * 1e3, "vs_bound": tpot / bound,
                    "vs_bound_plus_costs": tpot / with_costs,
                    "j_per_token": res.summary.j_per_token})
    return pd.DataFrame(out)


def padding_efficiency(rows: pd.DataFrame, rows_pe: int, cols_pe: int) -> np.ndarray:
    """M/ceil(M/R)R x N/ceil(N/C)C of every launch's matrix shape on an R x C array (1 otherwise)."""
    eff = np.ones(len(rows))
    for i, r in enumerate(rows.itertuples(index=False)):
        if r.op == "gemm":
            m, n = int(r.m), int(r.n)
        elif r.op == "attention":
            m, n = int(r.q_len) * (int(r.num_q_heads) // int(r.num_kv_heads)), int(r.kv_len)
        else:
            continue
        eff[i] = m / (math.ceil(m / rows_pe) * rows_pe) * n / (math.ceil(n / cols_pe) * cols_pe)
    return eff


def prefill_bar(hw_name: str, policy: str = "fp16", memo: LaunchMemo | None = None) -> dict[str, object]:
    """Simulated prefill against FLOPs / (peak x padding efficiency), and its bound shares."""
    hw = load_hardware(hw_name)
    assert isinstance(hw, NpuSpec)
    tr = trace_of(policy, PREFILL)
    res = simulate(tr, hw, memo=memo or LaunchMemo(None))
    pre = tr.rows["phase"] == "prefill"
    rows = tr.rows[pre]
    eff = padding_efficiency(rows, hw.mac_array.rows, hw.mac_array.cols)
    bound = float((rows["flops"].astype(float) / (hw.matrix_peak_flops("fp16") * eff)).sum())
    shares = res.launches.loc[pre].groupby("bound", observed=True)["time_s"].sum()
    ttft = res.summary.ttft_s
    return {"hw": hw_name, "policy": policy, "prompt": PREFILL.prompt_len, "ttft_ms": ttft * 1e3,
            "bound_ms": bound * 1e3, "vs_bound": ttft / bound,
            "matrix_bound_share": float(shares.get("mac", 0.0)) / ttft,
            "j_per_prompt_token": res.summary.j_per_prompt_token}


def step_split(res: SimResult, rows: pd.DataFrame, hw: HardwareSpec) -> dict[str, float]:
    """Where one decode step's time (ms) and energy (mJ) go, averaged over the decode steps."""
    dec = (rows["phase"] == "decode").to_numpy()
    steps = max(1, rows.loc[dec, "step"].nunique())
    la = res.launches[dec]
    op = rows.loc[dec, "op"].astype(str).to_numpy()
    t = la["time_s"].to_numpy()
    compute = la["bound"].astype(str).isin(["decoder", "mac", "vector", "sram", "tensor", "cuda"])
    parts = energy_breakdown(res.launches, hw, res.model)
    e = {k: float(v[dec].sum()) / steps * 1e3 for k, v in parts.items()}
    return {
        "weights_ms": float(t[op == "gemm"].sum()) / steps * 1e3,
        "kv_ms": float(t[op == "attention"].sum()) / steps * 1e3,
        "other_ops_ms": float(t[(op != "gemm") & (op != "attention")].sum()) / steps * 1e3,
        "dispatch_ms": float(la["overhead_s"].sum()) / steps * 1e3,
        "compute_bound_ms": float(t[compute.to_numpy()].sum()) / steps * 1e3,
        "dram_mJ": e["dram"], "onchip_mJ": e["onchip"], "compute_mJ": e["compute"],
        "static_mJ": e["static"],
    }


def where_it_goes(hw_name: str, policies: Sequence[str] = POLICIES) -> pd.DataFrame:
    hw = load_hardware(hw_name)
    out = []
    for policy in policies:
        tr = trace_of(policy, DECODE)
        res = simulate(tr, hw, cache_dir=None)
        out.append({"hw": hw_name, "policy": policy, "tpot_ms": res.summary.tpot_mean_s * 1e3,
                    **step_split(res, tr.rows, hw), "j_per_token": res.summary.j_per_token})
    return pd.DataFrame(out)


def energy_table(hw_names: Sequence[str] = ENERGY_HW,
                 policies: Sequence[str] = ENERGY_POLICIES) -> pd.DataFrame:
    """J/token of decode per policy and hardware (sim), with the DRAM share."""
    out = []
    for hw_name in hw_names:
        hw = load_hardware(hw_name)
        for policy in policies:
            tr = trace_of(policy, DECODE)
            res = simulate(tr, hw, cache_dir=None)
            split = step_split(res, tr.rows, hw)
            total = split["dram_mJ"] + split["onchip_mJ"] + split["compute_mJ"] + split["static_mJ"]
            out.append({"hw": hw_name, "policy": policy, "tpot_ms": res.summary.tpot_mean_s * 1e3,
                        "j_per_token": res.summary.j_per_token, "dram_share": split["dram_mJ"] / total,
                        "static_share": split["static_mJ"] / total,
                        "avg_power_w": res.summary.avg_power_w})
    return pd.DataFrame(out)


def variants(hw: NpuSpec) -> dict[str, NpuSpec]:
    """The assumptions docs/npu.md#sensitivity moves, one at a time."""
    r = dataclasses.replace
    dec = hw.weight_decoder
    half = {b: v / 2 for b, v in dec.weights_per_cycle.items()}
    half_ap = None if dec.anyprec_weights_per_cycle is None else \
        {b: v / 2 for b, v in dec.anyprec_weights_per_cycle.items()}
    compiler = hw.compiler
    return {
        "as shipped": hw,
        "no GEMV path (array only)": r(hw, gemv=None),
        "decoder at half rate": r(hw, weight_decoder=r(dec, weights_per_cycle=half,
                                                       anyprec_weights_per_cycle=half_ap)),
        "no operator fusion": r(hw, compiler=None if compiler is None else r(compiler, fusion=False)),
        "dispatch x5": r(hw, dispatch=r(hw.dispatch, overhead_us=hw.dispatch.overhead_us * 5)),
        "achievable bandwidth x0.8": r(hw, dram=r(
            hw.dram, achievable_bandwidth_fraction=hw.dram.achievable_bandwidth_fraction * 0.8)),
    }


def sensitivity(hw_name: str, policies: Sequence[str] = ("w4", "w2", "ap3", "ap4-4@8-3")) -> pd.DataFrame:
    """Decode speedup over fp16 of each policy under each variant of the hardware file."""
    hw = load_hardware(hw_name)
    assert isinstance(hw, NpuSpec)
    out = []
    for name, spec in variants(hw).items():
        memo = LaunchMemo(None)
        t = {p: simulate(trace_of(p, DECODE), spec, memo=memo).summary.tpot_mean_s
             for p in ("fp16", *policies)}
        out.append({"hw": hw_name, "variant": name, "fp16_tpot_ms": t["fp16"] * 1e3,
                    **{f"{p} speedup": t["fp16"] / t[p] for p in policies}})
    return pd.DataFrame(out)


def markdown(table: pd.DataFrame, formats: dict[str, str] | None = None) -> str:
    formats = formats or {}
    cols = list(table.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in table.itertuples(index=False):
        cells = []
        for c, v in zip(cols, row, strict=True):
            if isinstance(v, float):
                cells.append(format(v, formats.get(c, ".4g")))
            else:
                cells.append(str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def fill(doc: Path, name: str, text: str) -> None:
    begin, end = f"<!-- npu:{name}:begin -->", f"<!-- npu:{name}:end -->"
    content = doc.read_text()
    if begin not in content or end not in content:
        raise ValueError(f"{doc}: no {begin} ... {end} block to fill")
    head, rest = content.split(begin, 1)
    _, tail = rest.split(end, 1)
    write_text_atomic(f"{head}{begin}\n{text}\n{end}{tail}", doc)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "analysis" / "results"))
    p.add_argument("--doc", default=str(ROOT / "docs" / "npu.md"), help="'' to skip the doc")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    bars = pd.concat([decode_bars(h) for h in ("npu-llm", "npu-edge")], ignore_index=True)
    prefill = pd.DataFrame([prefill_bar(h, pol) for h in ("npu-llm", "npu-edge")
                            for pol in ("fp16", "w4")])
    split = pd.concat([where_it_goes(h) for h in ("npu-llm", "npu-edge")], ignore_index=True)
    energy = energy_table()
    sens = pd.concat([sensitivity(h) for h in ("npu-llm", "npu-edge")], ignore_index=True)
    tables = {"decode": bars, "prefill": prefill, "split": split, "energy": energy,
              "sensitivity": sens}
    for name, table in tables.items():
        write_csv_atomic(table, out / f"npu_{name}.csv", index=False)
        print(f"## {name}\n{markdown(table)}\n")
    if args.doc:
        cols = {"decode": ["hw", "policy", "weights_MB", "kv_MB", "bound_ms", "writes_us", "gather_us",
                           "kv_padding_us", "tail_us", "bound_plus_costs_ms", "tpot_ms", "vs_bound",
                           "vs_bound_plus_costs"]}
        for name, table in tables.items():
            fill(Path(args.doc), name, markdown(table[cols.get(name, list(table.columns))]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

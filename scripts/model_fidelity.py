"""The GPU model against the published measurements: per class, GPU and M band, the simulator's error
next to the roofline's and the three-constant efficiency roofline's (fit on H200, applied to H100).

    python scripts/model_fidelity.py [--classes gemm,decode,...] [--sample N] [--jobs J]
                                     [--out rows.parquet] [--groundtruth DIR]

A developer's check of mpsim.sim's constants (mpsim/sim/params.py cites these row selections),
not the user-facing `mpsim validate --against`. It reads ../shared/groundtruth in place (its README
and PROVENANCE.md give the repositories and commits) and prices every row through the simulator:
cuBLAS GEMMs with the model-guided best config (mpsim.sim.best_config), vLLM FA3 attention with
its KV append in the op's scope and L2 kept warm by the graph replays, TensorRT-LLM's wo GEMV, Vidur's
row-wise kernels. Protocols: the simulator's time is the kernel time plus its per-kernel overhead,
which is the graph protocol's; `kernel` (Vidur, CUPTI durations) drops the overhead;
`trt-profiler` (the wo rows) replaces it by that protocol's per-kernel cost (mpsim/sim/protocols.yaml).

Row selections (issue 11): GEMM: vLLM 0.24.0, bf16, n and k on the grid 2048..16384, m <= 8192;
decode: vLLM 0.24.0 generation, head_dim 128, window 0, 32/8 heads, step >= 255 (kv_len = step + 1);
prefill: vLLM 0.24.0 context, head_dim 128, window 0, bf16/bf16, isl >= 128; wo: TRT-LLM 1.2.0rc5
H200 int4_wo/int8_wo, m <= 4; Vidur: H100 Llama-2-7b and -70b, TP 1, the `mean` statistics.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mpsim.analysis.validation.metrics import nelder_mead

ROOT = Path(__file__).resolve().parents[1]
GT = ROOT.parent / "shared" / "groundtruth"
GPUS = {"h200": ("h200_sxm", "h200-sxm"), "h100": ("h100_sxm", "h100-sxm")}
NK_GRID = [2048, 2560, 3072, 3584, 4096, 5120, 6144, 7168, 8192, 10240, 12288, 16384]
VIDUR_OPS = {"input_layernorm": "vllm_rms_norm", "post_attention_layernorm": "vllm_rms_norm",
             "attn_rope": "vllm_rotary_embedding", "mlp_act": "vllm_silu_and_mul", "add": "torch_add",
             "attn_pre_proj": "gemm", "attn_post_proj": "gemm", "mlp_up_proj": "gemm",
             "mlp_down_proj": "gemm"}


# ---- row selections (read in place) -----------------------------------------------------------

def gemm_rows(gpu: str) -> pd.DataFrame:
    d = pd.read_parquet(GT / f"aiconfigurator/{GPUS[gpu][0]}/gemm/vllm/0.24.0/gemm_perf.parquet")
    d = d[(d.gemm_dtype == "bfloat16") & d.n.isin(NK_GRID) & d.k.isin(NK_GRID) & (d.m <= 8192)]
    return pd.DataFrame({"m": d.m.values, "n": d.n.values, "k": d.k.values,
                         "measured_us": d.latency.values * 1e3, "cls": "gemm_bf16",
                         "protocol": "graph"})


def decode_rows(gpu: str, kv: str) -> pd.DataFrame:
    d = pd.read_parquet(GT / f"aiconfigurator/{GPUS[gpu][0]}/attention/vllm/0.24.0/"
                        "generation_attention_perf.parquet")
    d = d[(d.head_dim == 128) & (d.window_size == 0) & (d.num_heads == 32)
          & (d.num_key_value_heads == 8) & (d.step >= 255)
          & (d.kv_cache_dtype == {"bf16": "bfloat16", "fp8": "fp8"}[kv])]
    return pd.DataFrame({"batch": d.batch_size.values, "heads": d.num_heads.values,
                         "kv_heads": d.num_key_value_heads.values, "head_dim": d.head_dim.values,
                         "kv_len": d.step.values + 1, "kv_bits": 16 if kv == "bf16" else 8,
                         "measured_us": d.latency.values * 1e3, "cls": f"decode_{kv}",
                         "protocol": "graph"})


def prefill_rows(gpu: str) -> pd.DataFrame:
    d = pd.read_parquet(GT / f"aiconfigurator/{GPUS[gpu][0]}/attention/vllm/0.24.0/"
                        "context_attention_perf.parquet")
    d = d[(d.head_dim == 128) & (d.window_size == 0) & (d.attn_dtype == "bfloat16")
          & (d.kv_cache_dtype == "bfloat16") & (d.isl >= 128)]
    return pd.DataFrame({"batch": d.batch_size.values, "q_len": d.isl.values,
                         "heads": d.num_heads.values, "kv_heads": d.num_key_value_heads.values,
                         "head_dim": d.head_dim.values, "measured_us": d.latency.values * 1e3,
                         "cls": "prefill_bf16", "protocol": "graph"})


def wo_rows(bits: int) -> pd.DataFrame:
    d = pd.read_parquet(GT / "aiconfigurator/h200_sxm/gemm/trtllm/1.2.0rc5/gemm_perf.parquet")
    d = d[(d.gemm_dtype == f"int{bits}_wo") & (d.m <= 4)]
    return pd.DataFrame({"m": d.m.values, "n": d.n.values, "k": d.k.values, "w_bits": bits,
                         "measured_us": d.latency.values * 1e3, "cls": f"int{bits}_wo",
                         "protocol": "trt-profiler"})


def vidur_rows() -> pd.DataFrame:
    out = []
    for mdl in ("Llama-2-7b-hf", "Llama-2-70b-hf"):
        d = pd.read_csv(GT / f"vidur/h100/meta-llama/{mdl}/mlp.csv")
        d = d[d.num_tensor_parallel_workers == 1].drop_duplicates()
        hd = (d.n_embd // d.n_head).values
        for col, kernel in VIDUR_OPS.items():
            r = pd.DataFrame({"model": mdl, "kernel": kernel, "tokens": d.num_tokens.values,
                              "hidden": d.n_embd.values, "ffn": d.n_expanded_embd.values,
                              "heads": d.n_head.values, "kv_heads": d.n_kv_head.values,
                              "head_dim": hd, "measured_us": d[f"time_stats.{col}.mean"].values * 1e3,
                              "protocol": "kernel"})
            if kernel == "gemm":
                h, f, nh, nkv = (d.n_embd.values, d.n_expanded_embd.values, d.n_head.values,
                                 d.n_kv_head.values)
                r["n"] = {"attn_pre_proj": (nh + 2 * nkv) * hd, "attn_post_proj": h,
                          "mlp_up_proj": 2 * f, "mlp_down_proj": h}[col]
                r["k"] = {"attn_pre_proj": h, "attn_post_proj": nh * hd, "mlp_up_proj": h,
                          "mlp_down_proj": f}[col]
                r["m"] = d.num_tokens.values
                r["cls"] = "vidur_gemm_fp16"
            else:
                r["cls"] = "vidur_" + {"vllm_rms_norm": "rmsnorm", "vllm_rotary_embedding": "rope",
                                       "vllm_silu_and_mul": "silu_mul", "torch_add": "add"}[kernel]
            out.append(r)
    return pd.concat(out, ignore_index=True)


def frames(classes: set[str]) -> list[tuple[str, pd.DataFrame]]:
    out = []
    for gpu in GPUS:
        if "gemm" in classes:
            out.append((gpu, gemm_rows(gpu)))
        for kv in ("bf16", "fp8"):
            if "decode" in classes or f"decode_{kv}" in classes:
                out.append((gpu, decode_rows(gpu, kv)))
        if "prefill" in classes:
            out.append((gpu, prefill_rows(gpu)))
    if "wo" in classes:
        out += [("h200", wo_rows(b)) for b in (4, 8)]
    if "vidur" in classes:
        out.append(("h100", vidur_rows()))
    return out


# ---- prediction -------------------------------------------------------------------------------

def _row(rec: dict[str, Any], sms: int) -> tuple[dict[str, Any] | None, str]:
    """(launch row, how to build it) for one measured row; GEMMs return None (best config)."""
    from mpsim.kernels import launch_config as lc
    from mpsim.launch_plan import attention_row, framework_op_row, gemm_row

    cls = rec["cls"]
    if cls.startswith("decode"):
        return attention_row(int(rec["batch"]), 1, int(rec["kv_len"]), int(rec["heads"]),
                             int(rec["kv_heads"]), int(rec["head_dim"]), int(rec["kv_bits"]),
                             kernel="fa3", kv_append=True, l2_warm=True, sms=sms), ""
    if cls == "prefill_bf16":
        return attention_row(int(rec["batch"]), int(rec["q_len"]), int(rec["q_len"]),
                             int(rec["heads"]), int(rec["kv_heads"]), int(rec["head_dim"]), 16,
                             kernel="fa3", kv_append=True, sms=sms), ""
    if cls.endswith("_wo"):
        return gemm_row(int(rec["m"]), int(rec["n"]), int(rec["k"]), "group", int(rec["w_bits"]),
                        int(rec["k"]), kernel=lc.TRTLLM_WO_GEMV), ""
    if cls.startswith("vidur_") and cls != "vidur_gemm_fp16":
        kernel = rec["kernel"]
        width = int(rec["ffn"]) if kernel == lc.VLLM_SILU_MUL else int(rec["hidden"])
        return framework_op_row(kernel, int(rec["tokens"]), width, heads=int(rec["heads"]),
                                kv_heads=int(rec["kv_heads"]), head_dim=int(rec["head_dim"]),
                                l2_warm=kernel == lc.TORCH_ADD), ""
    return None, "best"


def predict_chunk(args: tuple[str, list[dict[str, Any]], dict[str, float]]) -> list[dict[str, Any]]:
    import dataclasses

    from mpsim.hw_models.loader import load_hardware
    from mpsim.kernels import launch_config as lc
    from mpsim.sim.best_config import best_gemm_row
    from mpsim.sim.gpu.kernels_known import launch_kernels
    from mpsim.sim.params import DEFAULT_PARAMS
    from mpsim.sim.protocols import get_protocol
    from mpsim.sim.replay import simulate_launch
    from mpsim.sim.roofline import MATRIX_OPS

    gpu, recs, overrides = args
    hw = load_hardware(GPUS[gpu][1])
    params = dataclasses.replace(DEFAULT_PARAMS, **overrides)
    out = []
    cache: dict[str, Any] = {}
    for rec in recs:
        row, how = _row(rec, hw.compute_units)
        if how == "best":
            b = best_gemm_row(int(rec["m"]), int(rec["n"]), int(rec["k"]), hw=hw,
                              kernel=lc.CUBLAS_GEMM, params=params)
            row, outcome, config = b.row, b.outcome, b.config.name()
        else:
            assert row is not None
            key = json.dumps({k: v for k, v in row.items() if k != "launch_id"}, sort_keys=True,
                             default=str)
            if key not in cache:
                cache[key] = simulate_launch(row, hw, params)
            outcome, config = cache[key], ""
        kernels = launch_kernels(row)
        if rec["protocol"] == "kernel":
            pred = outcome.kernel_s
        elif rec["protocol"] == "trt-profiler":
            pred = outcome.kernel_s + kernels * get_protocol("trt-profiler").per_launch_us * 1e-6
        else:
            pred = outcome.time_s
        peak = hw.matrix_peak_flops("fp16") if row["op"] in MATRIX_OPS else hw.vector_peak_flops()
        t_math = row["flops"] / peak
        t_mem = (row["bytes_read"] + row["bytes_written"]) / hw.dram_bandwidth_Bps()
        out.append({**rec, "gpu": gpu, "predicted_us": pred * 1e6, "config": config,
                    "t_math_us": t_math * 1e6, "t_mem_us": t_mem * 1e6,
                    "roofline_us": max(t_math, t_mem) * 1e6, "bound": outcome.bound,
                    "clock_MHz": outcome.clock_hz / 1e6})
    return out


# ---- metrics ----------------------------------------------------------------------------------

def stats(pred: np.ndarray, meas: np.ndarray) -> dict[str, float]:
    e = (pred - meas) / meas
    a = np.abs(e)
    return {"n": len(e), "mape": 100 * a.mean(), "p90": 100 * np.quantile(a, 0.9),
            "max": 100 * a.max(), "bias": 100 * e.mean(),
            "r_log": float(np.corrcoef(np.log(pred), np.log(meas))[0, 1]) if len(e) > 2 else np.nan}


def fit_eff_roofline(tm: np.ndarray, tb: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """Best max(t_math/e_c, t_mem/e_m) + c by MAPE (Nelder-Mead from three starts)."""

    def f(x: np.ndarray) -> float:
        return float(np.mean(np.abs(np.maximum(tm / np.exp(x[0]), tb / np.exp(x[1])) + x[2] - y) / y))

    best: tuple[np.ndarray, float] | None = None
    for x0 in ([np.log(0.8), np.log(0.8), 3.0], [np.log(0.5), np.log(0.5), 1.0],
               [np.log(1.0), np.log(0.9), 5.0]):
        x, v = nelder_mead(f, np.asarray(x0, float), 0.3, iters=800)
        x, v = nelder_mead(f, x, 0.05, iters=800)
        if best is None or v < best[1]:
            best = (x, v)
    assert best is not None
    x = best[0]
    return float(np.exp(x[0])), float(np.exp(x[1])), float(x[2])


def band(r: pd.DataFrame) -> pd.Series:
    if "m" in r and r["cls"].iloc[0] in ("gemm_bf16", "vidur_gemm_fp16"):
        m = r["m"].to_numpy()
        return pd.Series(np.where(m <= 16, "1-16", np.where(m <= 256, "17-256", "257-8192")),
                         index=r.index)
    if r["cls"].iloc[0].endswith("_wo"):
        return "m" + r["m"].astype(str)
    return pd.Series("all", index=r.index)


def report(res: pd.DataFrame) -> str:
    lines = []
    res = res.copy()
    res["effroof"] = np.nan
    eff = {}
    for cls in res.cls.unique():
        fit_on = res[(res.cls == cls) & (res.gpu == "h200")]
        if fit_on.empty:
            fit_on = res[res.cls == cls]
        e = fit_eff_roofline(fit_on.t_math_us.to_numpy(), fit_on.t_mem_us.to_numpy(),
                             fit_on.measured_us.to_numpy())
        eff[cls] = e
        m = res.cls == cls
        res.loc[m, "effroof"] = np.maximum(res.t_math_us[m] / e[0], res.t_mem_us[m] / e[1]) + e[2]
    lines.append("| class | GPU | band | n | sim MAPE | p90 | max | bias | r | roofline MAPE | "
                 "eff. roofline MAPE (fit H200) |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for (cls, gpu), g in res.groupby(["cls", "gpu"], sort=False):
        bands = band(g)
        groups = [("all", g)] + ([(b, g[bands == b]) for b in sorted(bands.unique())]
                                 if bands.nunique() > 1 else [])
        for b, gg in groups:
            s = stats(gg.predicted_us.to_numpy(), gg.measured_us.to_numpy())
            rl = stats(gg.roofline_us.to_numpy(), gg.measured_us.to_numpy())
            ef = stats(gg.effroof.to_numpy(), gg.measured_us.to_numpy())
            lines.append(f"| {cls} | {gpu} | {b} | {s['n']} | {s['mape']:.1f} | {s['p90']:.1f} | "
                         f"{s['max']:.0f} | {s['bias']:+.1f} | {s['r_log']:.3f} | {rl['mape']:.1f} | "
                         f"{ef['mape']:.1f} |")
    lines.append("")
    lines.append("efficiency roofline fits (e_c, e_m, c us), on the class's H200 rows (single-GPU "
                 "classes: their own rows, in sample):")
    for cls, e in eff.items():
        lines.append(f"  {cls}: {e[0]:.3f}, {e[1]:.3f}, {e[2]:.2f}")
    return "\n".join(lines)


def fit(args: argparse.Namespace, overrides: dict[str, float]) -> int:
    """Fit named constants on one GPU's rows (a sample when --sample > 1)."""
    from mpsim.sim.params import DEFAULT_PARAMS

    names = args.fit.split(",")
    start = [float(overrides.get(n, getattr(DEFAULT_PARAMS, n))) for n in names]
    recs = [(gpu, frame.iloc[::args.sample].to_dict("records"))
            for gpu, frame in frames(set(args.classes.split(","))) if gpu == args.fit_on]
    pool = ProcessPoolExecutor(args.jobs)
    evals = 0

    def cost(x: np.ndarray) -> float:
        nonlocal evals
        evals += 1
        values = {n: float(np.exp(v)) if s0 > 0 else float(v)
                  for n, v, s0 in zip(names, x, start, strict=True)}
        ov = {**overrides, **values}
        tasks = []
        for gpu, rs in recs:
            step = max(1, len(rs) // args.jobs)
            tasks += [(gpu, rs[i:i + step], ov) for i in range(0, len(rs), step)]
        rows = [r for chunk in pool.map(predict_chunk, tasks) for r in chunk]
        res = pd.DataFrame(rows)
        e = float(np.mean([np.mean(np.abs(g.predicted_us / g.measured_us - 1))
                           for _, g in res.groupby("cls")]))
        print(f"  {evals:3d} {e * 100:.3f}% " + ", ".join(f"{n}={v:.5g}" for n, v in values.items()),
              flush=True)
        return e

    x0 = [np.log(v) if v > 0 else v for v in start]
    try:
        x, v = nelder_mead(cost, np.asarray(x0, float), 0.1, iters=args.fit_iters)
    finally:
        pool.shutdown()
    final = {n: float(np.exp(xi)) if s0 > 0 else float(xi) for n, xi, s0 in zip(names, x, start, strict=True)}
    print(json.dumps(final), f"MAPE {v * 100:.2f}%")
    return 0


def main(argv: list[str] | None = None) -> int:
    global GT
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--classes", default="gemm,decode,prefill,wo,vidur")
    ap.add_argument("--sample", type=int, default=1, help="every N-th row of each class")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--params", default="{}", help="JSON overrides of SimParams fields")
    ap.add_argument("--out", help="per-row predictions (Parquet)")
    ap.add_argument("--groundtruth", default=str(GT))
    ap.add_argument("--report", help="only report the per-row file of an earlier run")
    ap.add_argument("--fit", help="comma-separated SimParams fields to fit (MAPE, Nelder-Mead in log "
                    "space) on the --fit-on GPU's rows of --classes; prints the values")
    ap.add_argument("--fit-on", default="h200")
    ap.add_argument("--fit-iters", type=int, default=60)
    args = ap.parse_args(argv)
    GT = Path(args.groundtruth)
    if args.report:
        print(report(pd.read_parquet(args.report)))
        return 0
    start = time.time()
    overrides = json.loads(args.params)
    if args.fit:
        return fit(args, overrides)
    tasks = []
    for gpu, frame in frames(set(args.classes.split(","))):
        recs = frame.iloc[::args.sample].to_dict("records")
        step = max(1, len(recs) // (4 * args.jobs))
        tasks += [(gpu, recs[i:i + step], overrides) for i in range(0, len(recs), step)]
    with ProcessPoolExecutor(args.jobs) as pool:
        rows = [r for chunk in pool.map(predict_chunk, tasks) for r in chunk]
    res = pd.DataFrame(rows)
    if args.out:
        res.to_parquet(args.out)
    print(report(res))
    print(f"\n{len(res)} rows in {time.time() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

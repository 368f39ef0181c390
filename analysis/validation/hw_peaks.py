"""Check hardware files against what the published measurements show. These are checks, not fits.

    python -m mpsim.analysis.validation.hw_peaks [GROUNDTRUTH_DIR]

Two observations, from ../shared/groundtruth/aiconfigurator (PROVENANCE.md gives columns and units):

- **The L2 size from decode attention** (`l2_bracket`). Effective bandwidth = KV-cache bytes / time,
  where KV bytes = batch x (step + 1) x KV heads x head_dim x 2 (K and V) x bytes per element. A cache
  that fits in L2 is re-read from L2 on each replay of the collector's CUDA graph, so it can run above
  the DRAM peak. A cache that does not fit streams from DRAM and stays below the peak. The largest
  KV size whose median runs above the peak and the smallest whose every row stays below it bracket
  the L2 size. Only bf16-KV rows with full attention are used. The fp8-KV TRT-LLM kernel on L40S is
  compute-bound, so its rows would say nothing about L2.
- **The datasheet peaks bound every GEMM row** (`gemm_peak_fractions`). Achieved FLOP/s = 2mnk /
  time, as a fraction of the file's dense peak for the dtype; nvfp4 is compared with the brief's FP4
  figure (`FP4_DENSE_TFLOPS`; the schema has no fp4 key). Weight streaming = weight bytes / time, a
  lower bound on DRAM traffic, as a fraction of the DRAM peak. It counts only rows where the weight
  copies the collector cycles (`weight_copies`) exceed L2, so the weights must come from DRAM.
  Activations are left out, because they are re-read from L2 across the copies.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from mpsim.hw_models.loader import load_hardware
from mpsim.hw_models.schema import GpuSpec

DEFAULT_ROOT = Path(__file__).resolve().parents[3] / "shared" / "groundtruth"
KV_BYTES = {"bfloat16": 2.0, "fp8": 1.0}
GEMM_BYTES = {"bfloat16": 2.0, "fp8": 1.0, "fp8_block": 1.0, "nvfp4": 0.5}  # per weight element
GEMM_DTYPE = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8"}  # gemm_dtype -> hardware-file dtype
FP4_DENSE_TFLOPS = {"b200-sxm": 9000.0}  # Blackwell technical brief, HGX B200: 18 PFLOP/s sparse FP4
FOLDER = {"l40s": "l40s", "b200-sxm": "b200_sxm", "h100-sxm": "h100_sxm", "h200-sxm": "h200_sxm"}


def _gpu(name: str) -> GpuSpec:
    spec = load_hardware(name)
    assert isinstance(spec, GpuSpec), name
    return spec


def decode_kv_bandwidth(root: Path, hw: str) -> pd.DataFrame:
    """Per framework, KV dtype and KV size: rows, median and max of (KV bytes / time) / DRAM peak."""
    peak = _gpu(hw).dram_bandwidth_Bps()
    frames = []
    for path in sorted((root / "aiconfigurator" / FOLDER[hw] / "attention").glob(
            "*/*/generation_attention_perf.parquet")):
        d = pd.read_parquet(path)
        d = d[d["window_size"] == 0]
        kv = (d["batch_size"] * (d["step"] + 1) * d["num_key_value_heads"] * d["head_dim"] * 2
              * d["kv_cache_dtype"].map(KV_BYTES))
        frames.append(pd.DataFrame({"framework": path.parts[-3], "kv_dtype": d["kv_cache_dtype"],
                                    "kv_bytes": kv.astype(np.int64),
                                    "x_peak": kv / (d["latency"] * 1e-3) / peak}))
    rows = pd.concat(frames, ignore_index=True)
    return (rows.groupby(["framework", "kv_dtype", "kv_bytes"])["x_peak"]
            .agg(rows="count", median="median", max="max").reset_index())


def l2_bracket(table: pd.DataFrame, framework: str) -> tuple[int, int]:
    """(largest bf16 KV size whose median runs above the DRAM peak, smallest whose max stays below)."""
    t = table[(table["framework"] == framework) & (table["kv_dtype"] == "bfloat16")]
    above = int(t.loc[t["median"] > 1.0, "kv_bytes"].max())
    below = int(t.loc[(t["max"] < 1.0) & (t["kv_bytes"] > above), "kv_bytes"].min())
    return above, below


def weight_copies(framework: str, gemm_dtype: str, weight_bytes: pd.Series, l2_bytes: float) -> pd.Series:
    """Weight copies the collector cycles in one graph (PROVENANCE.md, "How it was measured"): vLLM
    0.24.0 six (fp8_block and nvfp4 one); TRT-LLM 1.3.0rc20 clamp(ceil(L2 / weight bytes), 1, 5)."""
    if framework == "vllm":
        return pd.Series(1 if gemm_dtype in ("fp8_block", "nvfp4") else 6, index=weight_bytes.index)
    return np.ceil(l2_bytes / weight_bytes).clip(1, 5)


def gemm_peak_fractions(root: Path, hw: str) -> pd.DataFrame:
    """Per framework and dtype: rows, the highest FLOP fraction of the dense peak (and its shape), and
    the highest weight-streaming fraction of the DRAM peak on rows whose cycled weights exceed L2."""
    spec = _gpu(hw)
    l2 = spec.l2.size_MiB * 2**20
    out = []
    for path in sorted((root / "aiconfigurator" / FOLDER[hw] / "gemm").glob("*/*/gemm_perf.parquet")):
        d = pd.read_parquet(path)
        framework = path.parts[-3]
        for dtype, g in d.groupby("gemm_dtype"):
            if dtype not in GEMM_BYTES:
                continue
            t = g["latency"] * 1e-3
            peak = (FP4_DENSE_TFLOPS[hw] * 1e12 if dtype == "nvfp4"
                    else spec.matrix_peak_flops(GEMM_DTYPE[str(dtype)]))
            flops = 2.0 * g["m"] * g["n"] * g["k"] / t / peak
            weight = g["n"] * g["k"] * GEMM_BYTES[str(dtype)]
            streamed = weight_copies(framework, str(dtype), weight, l2) * weight > l2
            stream = (weight / t / spec.dram_bandwidth_Bps())[streamed]
            best = flops.idxmax()
            out.append({"framework": framework, "dtype": dtype, "rows": len(g),
                        "max_flop_frac": float(flops.max()),
                        "at_mnk": tuple(int(g.loc[best, c]) for c in ("m", "n", "k")),
                        "stream_rows": int(streamed.sum()),
                        "max_stream_frac": float(stream.max()) if len(stream) else math.nan})
    return pd.DataFrame(out)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0]) if args else DEFAULT_ROOT
    if not (root / "aiconfigurator").is_dir():
        print(f"no ground truth at {root}: nothing to check")
        return 0
    kv = decode_kv_bandwidth(root, "l40s")
    sizes = kv[(kv["kv_bytes"] >= 32 << 20) & (kv["kv_bytes"] <= 256 << 20)]
    print("L40S decode attention: effective bandwidth (KV bytes / time) / 864 GB/s, full attention")
    print(sizes.assign(MiB=sizes["kv_bytes"] / 2**20).round(2).to_string(index=False))
    l2 = _gpu("l40s").l2.size_MiB
    for fw in sorted(kv["framework"].unique()):
        lo, hi = l2_bracket(kv, fw)
        print(f"  {fw}: bf16 KV of {lo / 2**20:g} MiB runs above the DRAM peak, {hi / 2**20:g} MiB "
              f"never does: L2 in [{lo / 2**20:g}, {hi / 2**20:g}) MiB; l40s.yaml says {l2:g} MiB")
    print("\nB200 GEMM rows against b200-sxm.yaml's peaks (no row may exceed 1.0)")
    print(gemm_peak_fractions(root, "b200-sxm").round(3).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

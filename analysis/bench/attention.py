"""GPU benchmark of decode attention over an fp16, int8 or int4 KV cache (flash-decoding kernel).

Vicuna-7B shapes (32 heads, head_dim 128), batch 1 and 16, KV lengths 1k..32k: the median time of
kernels/attention_decode.py per KV format, the bytes it must move (traces/accounting.py: K and V
codes, per-token fp16 scale/zero, q and the output), the achieved bandwidth, a device-to-device copy
of the same bytes (the bandwidth ceiling), torch's fp16 SDPA as a baseline, and the speedup of each
quantized format over fp16 KV at the same shape. Cold-L2 CUDA-event medians
(analysis/bench/timing.py). Design goal: at 8k, int8 KV >= 1.6x and int4 KV >= 2.5x over fp16 KV.

    python -m mpsim.analysis.bench.attention --out out/bench_attention.csv   # needs a CUDA device
    python -m mpsim.analysis.bench.attention --dry-run --out out/dry.csv     # CPU: interpreter, tiny

Cache contents are random bits (codes, scales, zeros): timing does not depend on the values.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from mpsim.analysis.bench.timing import CsvTable, Timer, Timing, copy_fn, environment
from mpsim.traces.accounting import kv_bytes_per_token_head, launch_cost


@dataclass(frozen=True)
class AttnDims:
    num_q_heads: int
    num_kv_heads: int
    head_dim: int


MODELS = {
    "vicuna-7b": AttnDims(32, 32, 128),
    "llama-3-8b": AttnDims(32, 8, 128),
    "tiny": AttnDims(2, 2, 64),  # the --dry-run model
}
KV_LENS = (1024, 2048, 4096, 8192, 16384, 32768)
DRY_KV_LENS = (40, 100)
KV_BITS = (16, 8, 4)
GOALS = {8: 1.6, 4: 2.5}  # speedup over fp16 KV at GOAL_KV_LEN
GOAL_KV_LEN = 8192
COLUMNS = (
    "device", "torch_version", "triton_version", "cuda_version", "host", "model", "batch",
    "kv_len", "num_q_heads", "num_kv_heads", "head_dim", "kv_bits", "paged", "impl", "kernel",
    "config", "bytes_moved", "kv_bytes", "median_us", "p10_us", "p90_us", "repeats", "timer",
    "achieved_GBps", "copy_us", "copy_GBps", "fraction_of_copy", "speedup_vs_fp16_kv",
)


def attention_row(shape: dict[str, Any], bits: int, paged: bool) -> dict[str, Any]:
    """The trace-row fields of one decode launch, for the accountant."""
    return {"op": "attention", "kernel": "attention_decode_kernel", "batch": shape["batch"],
            "q_len": 1, "kv_len": shape["kv_len"], "num_q_heads": shape["num_q_heads"],
            "num_kv_heads": shape["num_kv_heads"], "head_dim": shape["head_dim"],
            "k_bits": bits, "v_bits": bits, "causal": True, "kv_block": 64 if paged else None}


def table_row(shape: dict[str, Any], bits: int, paged: bool, impl: str, kernel: str, config: str,
              t: Timing, copy: Timing | None, fp16_us: float | None) -> dict[str, Any]:
    """One CSV row: timing, bytes, bandwidth, the copy ceiling and the speedup over fp16 KV."""
    cost = launch_cost(attention_row(shape, bits, paged))
    moved = cost.bytes_read + cost.bytes_written
    kv = (shape["batch"] * shape["num_kv_heads"] * shape["kv_len"] * 2
          * kv_bytes_per_token_head(shape["head_dim"], bits))
    return dict(shape, kv_bits=bits, paged=paged, impl=impl, kernel=kernel, config=config,
                bytes_moved=moved, kv_bytes=kv, median_us=t.median_us, p10_us=t.p10_us,
                p90_us=t.p90_us, repeats=t.repeats, timer=t.timer,
                achieved_GBps=moved / t.median_us / 1e3,
                copy_us=None if copy is None else copy.median_us,
                copy_GBps=None if copy is None else 2 * moved / copy.median_us / 1e3,
                fraction_of_copy=None if copy is None else copy.median_us / t.median_us,
                speedup_vs_fp16_kv=None if fp16_us is None else fp16_us / t.median_us)


def random_cache(shape: dict[str, Any], bits: int, paged: bool, device: torch.device) -> Any:
    """K and V caches holding random bits, and the block table (identity order) when paged."""
    from mpsim.kernels.kv_cache import KVCache

    b, hkv, t, d = shape["batch"], shape["num_kv_heads"], shape["kv_len"], shape["head_dim"]
    blocks_per_seq = -(-t // 64)
    slots, tokens = (b * blocks_per_seq, 64) if paged else (b, t)

    def one() -> KVCache:
        cache = KVCache.empty(slots, hkv, tokens, d, bits, paged=paged, device=device)
        if bits == 16:
            cache.data.normal_()
        else:
            cache.data.random_(0, 256)
            assert cache.scale is not None and cache.zero is not None
            cache.scale.uniform_(1e-3, 2e-2)
            cache.zero.uniform_(-1.0, 0.0)
        return cache

    table = (torch.arange(slots, dtype=torch.int32, device=device).view(b, blocks_per_seq)
             if paged else None)
    return one(), one(), table


def bench_shape(timer: Timer, table: CsvTable, shape: dict[str, Any], paged: bool,
                device: torch.device, copies: dict[int, Timing]) -> dict[int, float]:
    """Every KV format at one (batch, kv_len), fp16 first (the baseline of the speedups)."""
    from mpsim.kernels import runtime
    from mpsim.kernels.attention_decode import attention_decode
    from mpsim.kernels.launch_config import attention_decode_config

    b, hq, d, kv = shape["batch"], shape["num_q_heads"], shape["head_dim"], shape["kv_len"]
    q = torch.randn(b, hq, d, device=device).half()
    lens = torch.full((b,), kv, dtype=torch.int32, device=device)
    times: dict[int, float] = {}
    for bits in KV_BITS:
        k_cache, v_cache, blocks = random_cache(shape, bits, paged, device)
        cfg = attention_decode_config(b, hq, shape["num_kv_heads"], d, kv, bits,
                                      64 if paged else None, on_gpu=runtime.on_gpu())
        t = timer.time(lambda k=k_cache, v=v_cache, bt=blocks: attention_decode(
            q, k, v, lens, max_kv_len=kv, block_table=bt))
        moved = launch_cost(attention_row(shape, bits, paged))
        nbytes = moved.bytes_read + moved.bytes_written
        if nbytes not in copies:
            copies[nbytes] = timer.time(copy_fn(nbytes, device))
        times[bits] = t.median_us
        row = table_row(shape, bits, paged, "triton", cfg.kernel, json.dumps(cfg.config_dict()),
                        t, copies[nbytes], times[16])
        table.write(row)
        print(f"{shape['model']:>10} B={b:<3} kv={kv:<6} kv{bits:<2} {t.median_us:9.1f} us "
              f"{row['achieved_GBps']:8.1f} GB/s x{row['speedup_vs_fp16_kv']:.2f} vs fp16 KV",
              flush=True)
        del k_cache, v_cache
    bench_sdpa(timer, table, shape, device, times[16])
    return times


def bench_sdpa(timer: Timer, table: CsvTable, shape: dict[str, Any], device: torch.device,
               fp16_us: float) -> None:
    """torch's fp16 scaled_dot_product_attention over the same contiguous fp16 K/V: a baseline."""
    b, hq, hkv = shape["batch"], shape["num_q_heads"], shape["num_kv_heads"]
    kv, d = shape["kv_len"], shape["head_dim"]
    q = torch.randn(b, hq, 1, d, device=device).half()
    k = torch.randn(b, hkv, kv, d, device=device).half()
    v = torch.randn_like(k)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    t = timer.time(lambda: sdpa(q, k, v, enable_gqa=hq != hkv))
    table.write(table_row(shape, 16, False, "torch", "scaled_dot_product_attention", "", t, None,
                          fp16_us))


def check_goals(results: dict[tuple[str, int, int], dict[int, float]]) -> list[str]:
    """Lines saying whether int8/int4 KV met their speedup goal over fp16 KV at 8k."""
    lines = []
    for (model, batch, kv), times in sorted(results.items()):
        if kv != GOAL_KV_LEN:
            continue
        for bits, goal in GOALS.items():
            got = times[16] / times[bits]
            verdict = "met" if got >= goal else "MISSED"
            lines.append(f"goal {model} B={batch} kv={kv} int{bits}: x{got:.2f} "
                         f"(goal x{goal}) {verdict}")
    return lines


def bench_attention(timer: Timer, out_dir: Path, env: dict[str, str], dry_run: bool,
                    models: Sequence[str] = ("vicuna-7b",), batches: Sequence[int] = (1, 16),
                    kv_lens: Sequence[int] | None = None, paged: bool = False) -> Path:
    """Run the sweep into out_dir/bench_attention.csv (the hook analysis/bench/kernels.py calls)."""
    if dry_run:
        models, batches, kv_lens = ("tiny",), (1, 2), DRY_KV_LENS
    out = out_dir / "bench_attention.csv"
    table = CsvTable(out, COLUMNS)
    results: dict[tuple[str, int, int], dict[int, float]] = {}
    copies: dict[int, Timing] = {}
    try:
        for model in models:
            dims = MODELS[model]
            for batch in batches:
                for kv in kv_lens or KV_LENS:
                    shape = dict(env, model=model, batch=batch, kv_len=kv,
                                 num_q_heads=dims.num_q_heads, num_kv_heads=dims.num_kv_heads,
                                 head_dim=dims.head_dim)
                    results[(model, batch, kv)] = bench_shape(timer, table, shape, paged,
                                                              timer.device, copies)
    finally:
        table.close()
    for line in check_goals(results):
        print(line)
    print(f"wrote {table.rows} rows to {out}")
    return out


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--out", type=Path, default=Path("out/bench_attention.csv"))
    p.add_argument("--models", nargs="+", default=["vicuna-7b"], choices=sorted(MODELS))
    p.add_argument("--batches", nargs="+", type=int, default=[1, 16])
    p.add_argument("--kv-lens", nargs="+", type=int, default=list(KV_LENS))
    p.add_argument("--paged", action="store_true", help="paged cache (64-token blocks)")
    p.add_argument("--repeats", type=int, default=50)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--dry-run", action="store_true",
                   help="no GPU: run the table logic on CPU with the Triton interpreter, tiny shapes")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.dry_run:
        # Before any mpsim.kernels import: Triton picks interpreter vs compiler at @triton.jit time.
        os.environ["TRITON_INTERPRET"] = "1"
        args.repeats, args.warmup = min(args.repeats, 2), min(args.warmup, 1)
    elif not torch.cuda.is_available():
        print("bench_attention: no CUDA device found; this benchmark needs an NVIDIA GPU. "
              "Use --dry-run to check its table logic on CPU.", file=sys.stderr)
        return 2
    device = torch.device("cpu") if args.dry_run else torch.device("cuda")
    timer = Timer(device, args.repeats, args.warmup)
    out = bench_attention(timer, args.out.parent, environment(device), args.dry_run, args.models,
                          args.batches, args.kv_lens, args.paged)
    if out != args.out:
        out.replace(args.out)
        print(f"moved to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

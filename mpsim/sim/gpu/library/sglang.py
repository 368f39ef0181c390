"""SGLang's FA3 attention backend (`sglang_fa3_decode`, `sglang_fa3_prefill` rows) as CTA work (names
and row builder: mpsim/library/sglang.py).

SGLang 0.5.14 on sm_90 runs FlashAttention-3 (sgl-kernel's flash_attn_with_kvcache, page size 1)
inside its RadixAttention layer: the KV store (set_kv_buffer, a copy into the token pool) and then
the kernel; with an fp8 cache FA3 casts Q to fp8 itself. The kernels are vLLM's FA3 (fa3.py: tiles,
split heuristic, pack-GQA, the KV-append kernel's shape), so the work is FA3's; what differs is the
op around them: its metadata and launches (`decode_scope_us`, `prefill_scope_us`) and the fp8
path's Q cast (`fp8_extra_us`). Constants: SglangParams (SimParams.sglang), fitted on SGLang 0.5.14
H200 rows (stratified samples of h200_sxm/attention/sglang/0.5.14, seed 23; docs/validation.md);
everything else is FA3's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from mpsim.kernels.launch_config import cdiv
from mpsim.library.sglang import SGLANG_FA3_DECODE, SGLANG_FA3_PREFILL
from mpsim.sim.gpu.library.fa3 import fa3_decode_work, fa3_prefill_work, kv_write_part
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import KernelPart, LaunchWork

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.params import SimParams


@dataclass(frozen=True)
class SglangParams:
    """SGLang's FA3 backend (SimParams.sglang, `--fit-params sglang.NAME`)."""

    # decode_scope_us, fp8_extra_us: refitted at stop 38 with FA3's refitted decode constants, on
    # 140 status-ok rows (the even half of 150 a class) of a stratified draw (seed 23) of
    # h200_sxm/attention/sglang/0.5.14/generation_attention_perf.parquet, `--select stacks`; the
    # scope's argmin was 0.008 us (its floor: nothing over FA3's kernel), taken as 0
    decode_scope_us: float = 0.0       # the rest of SGLang's decode attention op
    fp8_extra_us: float = 2.727        # fp8 KV: the query cast and the fp8 store
    prefill_scope_us: float = 0.0    # the rest of SGLang's prefill attention op
    # FA3's fp8 forward in SGLang's build (an fp8 cache, attn_dtype fp8; no query-cast kernel: with
    # one priced, as vLLM's, the rows came out +15..+20%), its MMAs' share with each score's exp2
    # after them (fa3.EXP_PER_SCORE, as the 16-bit forward: SGLang's fp8 rows follow that law),
    # refitted at stop 57: MAPE scan (0.45-0.75) on the even half of 600 window-0 `attention prefill
    # fp8` rows (seed 23) of h200_sxm/attention/sglang/0.5.14/context_attention_perf.parquet: 8.61%
    # at 0.60 (0.58 / 0.62: 8.73%; before, 0.49 with no exp: 11.43%, head_dim 64 -20.8%); odd half
    # 12.46 -> 9.87%; SGLang publishes H200 rows only, so no other GPU checks it
    prefill_fp8_eta: float = 0.60
    # a sliding window in decode: FA3's tile range and split heuristic only, none of the per-window
    # costs set on vLLM's rows (fa3.window_mask_ops, fa3.window_cta_ns): on every 4th binding
    # window-128 row of h200_sxm/attention/sglang/0.5.14/generation_attention_perf.parquet (GPT-OSS's
    # SWA layers, head_dim 64; 157 fp8-kv / 174 bf16-kv rows) FA3's costs gave 27.1 / 32.9% MAPE
    # (+27 / +33% biased), none 6.1 / 7.5% (-5 / -6%, the bias of the same op's covering-window rows);
    # vLLM's rows of the same windows run about 1.5x SGLang's (docs/validation.md, "Sliding-window
    # attention")
    window_mask_ops: float = 0.0     # lane-ops per score of a windowed decode CTA's edge tiles
    window_cta_ns: float = 0.0       # per windowed decode CTA wave


STORE_WARPS = 4                # the store kernel's block: kNumWarps 4 (128 threads), a warp per
#                                (token, split) (sglang jit_kernel/csrc/elementwise/kvcache.cuh)
STORE_BLOCKS_PER_SM = 16       # 2048 threads an SM / 128 (its registers and shared memory are small)


def store_splits(row_bytes: int) -> int:
    """store_cache's num_split: a token's K (and V) row split over 4 warps when its bytes are a
    multiple of 2048, 2 of 1024, else 1 (jit_kernel/kvcache.py)."""
    return 4 if row_bytes % 2048 == 0 else (2 if row_bytes % 1024 == 0 else 1)


def store_part(tokens: int, kv_heads: int, head_dim: int, kv_bits: int, r: GpuRates,
               p: SimParams, round_ns: float | None = None) -> KernelPart:
    """SGLang's KV store (set_kv_buffer -> the JIT `store_cache` kernel): blocks of 4 warps, a warp
    copying one split of a token's K and V rows after loading its slot index; latency bound like
    vLLM's reshape_and_cache_flash (fa3.kv_append_part): rounds of SMs x 16 resident blocks, each one
    dependent load/store at `fa3.kv_append_round_ns` (the same round trip, an assumption), where
    vLLM's kernel runs a block of up to 512 threads per token, four an SM. `round_ns`: a room's own
    round (SGLang's Triton backend fits its op's)."""
    blocks = cdiv(tokens * store_splits(kv_heads * head_dim * kv_bits // 8), STORE_WARPS)
    return kv_write_part(tokens, kv_heads, head_dim, kv_bits, blocks, STORE_BLOCKS_PER_SM,
                         STORE_WARPS, r, p, "sglang kv store", round_ns)


def sglang_fa3_decode_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int],
                           r: GpuRates, p: SimParams, resident: float) -> LaunchWork:
    s = p.sglang
    fa3 = replace(p.fa3, decode_scope_us=s.decode_scope_us, fp8_extra_us=s.fp8_extra_us,
                  window_mask_ops=s.window_mask_ops, window_cta_ns=s.window_cta_ns)
    return fa3_decode_work(row, cfg, grid, r, replace(p, fa3=fa3), resident, append=store_part)


def sglang_fa3_prefill_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int],
                            r: GpuRates, p: SimParams, resident: float) -> LaunchWork:
    fa3 = replace(p.fa3, prefill_scope_us=p.sglang.prefill_scope_us,
                  prefill_fp8_eta=p.sglang.prefill_fp8_eta)
    return fa3_prefill_work(row, cfg, grid, r, replace(p, fa3=fa3), resident, append=store_part)


WORK = {SGLANG_FA3_DECODE: sglang_fa3_decode_work, SGLANG_FA3_PREFILL: sglang_fa3_prefill_work}

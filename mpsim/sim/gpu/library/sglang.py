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

from mpsim.library.sglang import SGLANG_FA3_DECODE, SGLANG_FA3_PREFILL
from mpsim.sim.gpu.library.fa3 import fa3_decode_work, fa3_prefill_work
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import LaunchWork

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
    # one priced, as vLLM's, the rows came out +15..+20%): 0.53 of the fp8 rate, the MAPE argmin on
    # 300 SGLang 0.5.14 H200 `fa3` context rows (KV and attention fp8, window 0, a 600-row sample,
    # seed 23, alternate rows; 0.50-0.73 tried), 15.2% there and 16.4% on the other 300
    # (docs/validation.md); still the argmin with the fp8 cycle's energy at 1.15 (0.53-0.62 tried on
    # stop 34's sample: 15.4% there, 15.9% on the other 300; 15.4 / 15.8 at 1.0); SGLang publishes
    # H200 rows only, so no other GPU checks it
    prefill_fp8_eta: float = 0.53


def sglang_fa3_decode_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int],
                           r: GpuRates, p: SimParams, resident: float) -> LaunchWork:
    s = p.sglang
    fa3 = replace(p.fa3, decode_scope_us=s.decode_scope_us, fp8_extra_us=s.fp8_extra_us)
    return fa3_decode_work(row, cfg, grid, r, replace(p, fa3=fa3), resident)


def sglang_fa3_prefill_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int],
                            r: GpuRates, p: SimParams, resident: float) -> LaunchWork:
    fa3 = replace(p.fa3, prefill_scope_us=p.sglang.prefill_scope_us,
                  prefill_fp8_eta=p.sglang.prefill_fp8_eta)
    return fa3_prefill_work(row, cfg, grid, r, replace(p, fa3=fa3), resident)


WORK = {SGLANG_FA3_DECODE: sglang_fa3_decode_work, SGLANG_FA3_PREFILL: sglang_fa3_prefill_work}

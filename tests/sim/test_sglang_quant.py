"""SGLang's per-token fp8 quantizer as its source launches it (QUANT_TOKEN_SGL, sgl-kernel
per_token_quant_fp8.cu): a CTA a token below SMs x 16 tokens, a warp a token from there, passes of
4096 / 512 values, and a second read of every row that finds it in L2 only while the rows in
flight fit there (memory.py `cyclic_hits`)."""

from __future__ import annotations

import pytest

from mpsim.hw_models.loader import load_hardware
from mpsim.library.scaled_gemm import (
    QUANT_ROWS_PER_SM,
    QUANT_SGL_PASS_VALUES,
    QUANT_SGL_WARP_FROM,
    QUANT_SGL_WARP_PASS_VALUES,
    QUANT_SGL_WARP_ROWS_PER_SM,
    QUANT_TOKEN_SGL,
)
from mpsim.sim.gpu.library.call_quant import quant_latency, quant_parts, sgl_rows_in_flight
from mpsim.sim.gpu.memory import cyclic_hits, usable_l2
from mpsim.sim.gpu.rates import gpu_rates
from mpsim.sim.params import DEFAULT_PARAMS
from mpsim.traces.accounting import FP16

H200, L40S = load_hardware("h200-sxm"), load_hardware("l40s")


def test_the_source_constants() -> None:
    """16-value vectors: 256 threads x 16 and 32 lanes x 16 values a pass; 8 tokens a CTA, 8 CTAs
    an SM (2048 threads); the warp kernel from SMs x 2 x 8 tokens."""
    assert (QUANT_SGL_PASS_VALUES, QUANT_SGL_WARP_PASS_VALUES) == (4096, 512)
    per_sm = (QUANT_ROWS_PER_SM[QUANT_TOKEN_SGL], QUANT_SGL_WARP_ROWS_PER_SM, QUANT_SGL_WARP_FROM)
    assert per_sm == (8, 64, 16)


def test_each_form_below_and_from_the_switch() -> None:
    r, q = gpu_rates(H200, DEFAULT_PARAMS), DEFAULT_PARAMS.fp8_act
    cyc = 1e9 / r.boost_hz
    below, at = r.sms * QUANT_SGL_WARP_FROM - 1, r.sms * QUANT_SGL_WARP_FROM
    cta_round = (q.sgl_round_cycles + 1 * q.sgl_pass_cycles) * cyc       # K 4096: one pass
    assert quant_latency(QUANT_TOKEN_SGL, below, 4096, q, r) == pytest.approx(
        q.sgl_row_ns + below / (r.sms * 8) * cta_round)
    warp_round = (q.sgl_warp_round_cycles + 8 * q.sgl_warp_pass_cycles) * cyc  # K 4096: 8 passes
    assert quant_latency(QUANT_TOKEN_SGL, at, 4096, q, r) == pytest.approx(warp_round)  # one round at least
    m = 10 * r.sms * QUANT_SGL_WARP_ROWS_PER_SM
    assert quant_latency(QUANT_TOKEN_SGL, m, 4096, q, r) == pytest.approx(10 * warp_round)


def test_passes_step_at_each_forms_vector_width() -> None:
    r, q = gpu_rates(H200, DEFAULT_PARAMS), DEFAULT_PARAMS.fp8_act
    cyc = 1e9 / r.boost_hz
    small, large = 64, 10 * r.sms * QUANT_SGL_WARP_ROWS_PER_SM
    lat = {k: quant_latency(QUANT_TOKEN_SGL, small, k, q, r) for k in (4096, 4097, 8192)}
    assert lat[4097] == lat[8192] > lat[4096]
    assert lat[4097] - lat[4096] == pytest.approx(small / (r.sms * 8) * q.sgl_pass_cycles * cyc)
    lat = {k: quant_latency(QUANT_TOKEN_SGL, large, k, q, r) for k in (512, 513, 1024)}
    assert lat[513] == lat[1024] > lat[512]
    assert lat[513] - lat[512] == pytest.approx(10 * q.sgl_warp_pass_cycles * cyc)


def _reads(m: int, k: int) -> tuple[float, float]:
    r, p = gpu_rates(H200, DEFAULT_PARAMS), DEFAULT_PARAMS
    (part,) = quant_parts({"m": m, "n": 4096, "k": k, "w_format": "fp8"}, {"quant": QUANT_TOKEN_SGL},
                          r, p.fp8_act, 0.0, lambda span: cyclic_hits(span, r, p))
    return part.work.trip.load_bytes * part.work.total_ctas, part.work.dram_read_bytes


def test_the_second_read_misses_once_the_rows_in_flight_outgrow_the_usable_l2() -> None:
    """H200 (a partitioned L2, 60 MiB, 0.75 usable): 8448 warps' rows of 4 KB (K 2048) fit, of
    8 KB (K 4096) do not; both reads pass the L2 ports either way."""
    r, p = gpu_rates(H200, DEFAULT_PARAMS), DEFAULT_PARAMS
    m = 16384
    for k, extra in ((2048, 0.0), (4096, 1.0)):
        src = m * k * FP16
        span = sgl_rows_in_flight(m, k, r)
        assert span == r.sms * QUANT_SGL_WARP_ROWS_PER_SM * k * FP16
        assert (span <= usable_l2(r, p)) == (extra == 0.0)
        l2_read, dram = _reads(m, k)
        assert l2_read == pytest.approx(2 * src)
        assert dram == pytest.approx(src * (1 + extra))


def test_cyclic_hits_all_or_nothing_on_a_partitioned_l2_linear_on_one_partition() -> None:
    p = DEFAULT_PARAMS
    r = gpu_rates(H200, p)
    usable = usable_l2(r, p)
    assert cyclic_hits(usable, r, p) == usable and cyclic_hits(usable * 1.01, r, p) == 0.0
    ada = gpu_rates(L40S, p)
    lo, hi = ada.l2_bytes * p.replay_l2_from, ada.l2_bytes * p.replay_l2_to
    assert cyclic_hits(lo, ada, p) == lo and cyclic_hits(hi, ada, p) == 0.0
    mid = (lo + hi) / 2
    assert cyclic_hits(mid, ada, p) == pytest.approx(mid / 2)

"""The chip's L2 rate (one-partition L2s: SimParams.l2_one_partition_bytes_per_clk) and the bytes it
serves (Trip.l2_bytes: the keys a decode kernel loads, not its padded tiles)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from mpsim.hw_models.loader import load_hardware
from mpsim.hw_models.schema import GpuSpec
from mpsim.launch_plan import attention_row
from mpsim.library.trtllm_attention import TRTLLM_MMHA, TRTLLM_XQA, mmha_tile_keys
from mpsim.sim.gpu.model import launch_work, simulate_gpu_launch
from mpsim.sim.gpu.rates import gpu_rates
from mpsim.sim.params import DEFAULT_PARAMS

P = DEFAULT_PARAMS


def _gpu(name: str) -> GpuSpec:
    return load_hardware(name)  # type: ignore[return-value]


def test_one_partition_l2_has_its_own_rate_and_partitioned_l2s_the_ports() -> None:
    ada, hopper = _gpu("l40s"), _gpu("h200-sxm")
    assert ada.l2.partitions == 1 and hopper.l2.partitions == 2
    r = gpu_rates(ada, P)
    ds = ada.tensor_core.datasheet_clock_MHz * 1e6
    assert r.l2_Bpc * r.clock_hz == pytest.approx(P.l2_one_partition_bytes_per_clk * ds * r.sms)
    assert 4.0e12 < r.l2_Bpc * r.clock_hz < 5.5e12        # about 4.8 TB/s on L40S
    h = gpu_rates(hopper, P)
    # a partitioned L2 is SMs x the thread port (port_bytes_per_clk); Hopper's TMA port is wider
    # (port_bytes_per_clk_hopper), so one busy SM pulls more than its share of a busy chip
    assert h.l2_Bpc == pytest.approx(h.thread_port_Bpc * h.sms)
    assert h.port_Bpc == pytest.approx(h.thread_port_Bpc * P.port_bytes_per_clk_hopper / P.port_bytes_per_clk)
    assert h.l2_Bpc < h.port_Bpc * h.sms


def _decode(kernel: str, batch: int, kv_len: int, heads: int, kv_heads: int, head_dim: int,
            kv_bits: int = 16) -> dict:
    return attention_row(batch, 1, kv_len, heads, kv_heads, head_dim, kv_bits, kernel=kernel,
                         kv_append=kernel == "fa2", l2_warm=True, sms=142)


@pytest.mark.parametrize(("batch", "kv_len", "heads", "kv_heads", "head_dim", "kv_bits", "want"), [
    (128, 8, 32, 8, 128, 16, TRTLLM_XQA),     # HMMA: one 256-key tile, 8 keys loaded
    (16, 3000, 32, 8, 128, 16, TRTLLM_XQA),   # HMMA over many tiles: the last one partial
    (1024, 4, 64, 64, 64, 16, TRTLLM_MMHA),   # MMHA, one loop over 3 cached keys
    (8, 5000, 48, 48, 128, 16, TRTLLM_MMHA),  # MMHA, several loops, split
])
def test_the_l2_serves_the_cached_keys_of_each_cta(batch: int, kv_len: int, heads: int,
                                                   kv_heads: int, head_dim: int, kv_bits: int,
                                                   want: str) -> None:
    row = _decode("trtllm", batch, kv_len, heads, kv_heads, head_dim, kv_bits)
    cfg = json.loads(row["config"])
    assert row["kernel"] == want
    r = gpu_rates(_gpu("l40s"), P)
    w = launch_work(row, r, P, 0.0)[-1].work
    trips = w.total_ctas * w.iters_by_class[0]
    served = trips * w.trip.l2_bytes
    per_key = head_dim * 2 * kv_bits / 8
    splits = int(cfg.get("split_k", 1))
    if want == TRTLLM_XQA:   # each (KV head, sequence) reads its keys once over its splits
        assert served == pytest.approx(batch * kv_heads * kv_len * per_key)
    else:                    # MMHA: each query head's CTAs read its KV head's tile keys
        assert served == pytest.approx(batch * heads * splits * mmha_tile_keys(kv_len, splits) * per_key)
    # the port's count keeps whole tiles (the per-tile cost the constants were fitted with)
    assert w.trip.load_bytes == int(cfg["block_n"]) * per_key >= w.trip.l2_bytes


def test_xqa_gmma_pages_are_served_whole() -> None:
    row = _decode("trtllm", 64, 10, 32, 8, 128, kv_bits=8)   # fp8 cache: the GMMA kernel (TMA pages)
    assert json.loads(row["config"])["gmma"] == 1
    w = launch_work(row, gpu_rates(_gpu("h200-sxm"), P), P, 0.0)[-1].work
    assert w.trip.l2_bytes is None


def test_fa2_decode_serves_the_cached_keys() -> None:
    row = _decode("fa2", 32, 1000, 4, 2, 64)
    cfg = json.loads(row["config"])
    w = launch_work(row, gpu_rates(_gpu("l40s"), P), P, 0.0)[-1].work
    assert w.trip.l2_bytes is not None and w.trip.l2_bytes < w.trip.load_bytes
    served = w.total_ctas * w.iters_by_class[0] * w.trip.l2_bytes
    assert served == pytest.approx(32 * 2 * 1000 * 64 * 2 * 2)
    assert int(cfg["block_n"]) * 64 * 2 * 2 == w.trip.load_bytes


def test_a_short_cache_is_not_priced_as_padded_tiles_through_the_l2() -> None:
    """A few cached keys and many heads (MMHA, 65,536 CTAs): counting the padded loop (256 keys) at
    the one-partition L2 rate doubled the time; the keys the kernel loads leave it near the port's."""
    row = _decode("trtllm", 1024, 4, 64, 64, 64)
    hw = _gpu("l40s")
    shipped = simulate_gpu_launch(row, hw, P).cycles
    ports = replace(P, l2_one_partition_bytes_per_clk=P.port_bytes_per_clk)
    no_cap = simulate_gpu_launch(row, hw, ports).cycles
    assert shipped == pytest.approx(no_cap, rel=0.05)
    out = simulate_gpu_launch(row, hw, P)
    w = launch_work(row, gpu_rates(hw, P, out.clock_hz), P, 0.0)[-1].work
    served = w.total_ctas * w.iters_by_class[0] * w.trip.l2_bytes   # the keys, then the outputs
    assert out.bytes_l2 == pytest.approx(served + w.total_ctas * w.epilogue.write_bytes, rel=1e-6)

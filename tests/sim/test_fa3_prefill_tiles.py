"""FA3's prefill tiles by head_dim, operand width and a binding window (mpsim/library/fa3.py
`fa3_prefill_tile`: hopper/tile_size.h tile_size_fwd_sm90 over a paged cache of short pages), and
the configs vLLM's and SGLang's prefill rows get from it."""

from __future__ import annotations

import json

import pytest

from mpsim.kernels.launch_config import cdiv
from mpsim.launch_plan import attention_row
from mpsim.library.fa3 import fa3_prefill_tile

# (head_dim, e4m3, local) -> (kBlockM, kBlockN), read off tile_size_fwd_sm90 with is_causal = not
# local and paged_kv_non_TMA
TILE_SIZE_H = {
    (64, False, False): (192, 128), (64, False, True): (192, 160), (64, True, False): (192, 160),
    (64, True, True): (192, 160), (96, False, False): (192, 128), (96, True, False): (192, 128),
    (128, False, False): (128, 128), (128, False, True): (128, 128), (128, True, False): (128, 160),
    (128, True, True): (128, 160), (192, False, False): (128, 96), (192, True, False): (128, 160),
    (192, True, True): (128, 128), (256, False, False): (128, 80), (256, False, True): (128, 64),
    (256, True, False): (128, 128), (256, True, True): (128, 64),
}


@pytest.mark.parametrize(("key", "tile"), sorted(TILE_SIZE_H.items()))
def test_the_tile_is_tile_size_h_s(key: tuple[int, bool, bool], tile: tuple[int, int]) -> None:
    assert fa3_prefill_tile(*key) == tile


@pytest.mark.parametrize("kernel", ["fa3", "sglang"])
def test_prefill_rows_take_the_tile_of_their_head_dim_and_cache(kernel: str) -> None:
    def cfg(head_dim: int, kv_bits: int) -> dict[str, object]:
        row = attention_row(2, 1000, 1000, 32, 8, head_dim, kv_bits, kernel=kernel)
        return dict(json.loads(row["config"]), grid=row["grid"])

    for head_dim, kv_bits, (bm, bn) in ((64, 16, (192, 128)), (128, 16, (128, 128)),
                                        (128, 8, (128, 160)), (256, 16, (128, 80))):
        c = cfg(head_dim, kv_bits)
        assert (c["block_m"], c["block_n"]) == (bm, bn)
        # pack-GQA: the 4 query heads of a KV head share the tiles' rows
        assert json.loads(str(c["grid"]))[0] == cdiv(1000 * 4, bm)


def test_a_binding_window_takes_the_local_tile() -> None:
    wide = json.loads(attention_row(1, 4096, 4096, 8, 8, 64, kernel="fa3", window=8192)["config"])
    local = json.loads(attention_row(1, 4096, 4096, 8, 8, 64, kernel="fa3", window=1024)["config"])
    assert (wide["block_m"], wide["block_n"]) == (192, 128)  # a window covering the keys: none
    assert (local["block_m"], local["block_n"]) == (192, 160)


def test_softmax_lanes_outside_the_mmas_by_build() -> None:
    """The exp2 a score after the MMAs: 16-bit forward and SGLang's fp8 build; vLLM's fp8 forward
    none up to head_dim 192, the whole softmax past it (no IntraWGOverlap over a paged cache)."""
    from mpsim.library.fa3 import FA3_PREFILL
    from mpsim.library.sglang import SGLANG_FA3_PREFILL
    from mpsim.sim.gpu.library.fa3 import EXP_PER_SCORE, prefill_pipes
    from mpsim.sim.params import DEFAULT_PARAMS as P
    scores = 128 * 128
    assert prefill_pipes(False, 128, 128, 128, FA3_PREFILL, P) == {"sfu": scores * EXP_PER_SCORE}
    assert prefill_pipes(True, 256, 128, 128, SGLANG_FA3_PREFILL, P) == {"sfu": scores * EXP_PER_SCORE}
    assert prefill_pipes(True, 192, 128, 128, FA3_PREFILL, P) == {}
    assert prefill_pipes(True, 256, 128, 128, FA3_PREFILL, P) == {
        "sfu": scores * EXP_PER_SCORE, "fp32": scores * P.fa3.softmax_ops}


def test_the_16_bit_forward_is_slower_a_flop_at_small_head_dims() -> None:
    """With each score's exp2 after the MMAs, a score costs 4 d FLOPs of MMA plus a fixed exp2, so
    the forward's FLOP rate grows with head_dim, as the published H200 rows do (vLLM 0.24.0, isl
    16384: head_dim 64 / 128 / 256 at 527 / 671 / 772 TFLOP/s)."""
    from mpsim.hw_models import load_hardware
    from mpsim.sim.launch import simulate_launch
    h200 = load_hardware("h200-sxm")

    def tflops(head_dim: int) -> float:
        row = attention_row(1, 16384, 16384, 32, 8, head_dim, 16, kernel="fa3", sms=132)
        t = simulate_launch(row, h200).time_s
        return 4 * 32 * head_dim * 16384 * 16385 / 2 / t / 1e12
    r64, r128, r256 = tflops(64), tflops(128), tflops(256)
    assert r64 < 0.88 * r128 < 0.88 * r256
    assert 0.70 < r64 / r128 < 0.86 and 1.05 < r256 / r128 < 1.30   # the rows: 0.785, 1.15

"""trtllm-gen's decode tile (mpsim/library/flashinfer_trtllm.py `tg_decode_rows`): the query rows a
tile computes follow the runner's kernel choice (swapped operands up to 16 query heads per KV head,
padded to 8 or 16 rows; the kept-operand 128-row tile above), and every row of the tile pays the
MMA, the fp32 softmax lanes and one exp a score on the SFU."""

from __future__ import annotations

import json

import pytest

from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import load_hardware
from mpsim.hw_models.schema import GpuSpec
from mpsim.launch_plan import attention_row
from mpsim.library.flashinfer_trtllm import TG_BLOCK_N, tg_decode_rows
from mpsim.sim.gpu.library.flashinfer_trtllm import tg_decode_work
from mpsim.sim.gpu.rates import gpu_rates
from mpsim.sim.params import DEFAULT_PARAMS

B200: GpuSpec = load_hardware("b200-sxm")  # type: ignore[assignment]


@pytest.mark.parametrize(("group", "rows"), [(1, 8), (8, 8), (9, 16), (16, 16), (17, 128),
                                             (32, 128), (64, 128), (128, 128)])
def test_the_tile_rows_follow_the_runners_kernel_choice(group: int, rows: int) -> None:
    assert tg_decode_rows(group) == rows
    row = attention_row(4, 1, 2048, 8 * group, 8, 128, 8, kernel="flashinfer_trtllm", sms=148)
    assert json.loads(row["config"])["block_m"] == rows


def test_a_group_past_the_tile_is_one_clear_error() -> None:
    with pytest.raises(MpsimInputError, match="at most 128"):
        tg_decode_rows(129)


@pytest.mark.parametrize("group", [4, 12, 24])
def test_every_row_of_the_tile_pays_the_mma_and_the_softmax(group: int) -> None:
    row = attention_row(4, 1, 2048, 8 * group, 8, 128, 8, kernel="flashinfer_trtllm", sms=148)
    cfg = json.loads(row["config"])
    work = tg_decode_work(row, cfg, [], gpu_rates(B200, DEFAULT_PARAMS), DEFAULT_PARAMS, 0.0)[-1].work
    rows = tg_decode_rows(group)
    assert work.trip.mma_flops == 4.0 * rows * TG_BLOCK_N * 128
    assert work.trip.pipes["sfu"] == rows * TG_BLOCK_N
    assert work.trip.pipes["fp32"] == rows * TG_BLOCK_N * DEFAULT_PARAMS.flashinfer.tg_softmax_ops

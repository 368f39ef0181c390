"""Which quantized tl.dot loops the GPU model prices as a pipeline (mpsim/sim/gpu/library/mpsim_gemm.py
`trip_staged`): those whose every load the compiled K loop stages with cp.async. A group weight read as
scale-zero words (the config's sz_words, kernels/sz_words.py) and any-precision at <= 3 bits run
num_stages trips in flight, and so does any-precision at 4 bits reading its LUT as words (lut_words);
the 2-byte scale and zero loads (a config without sz_words, as the 2026-12-04 captures ran) and
any-precision's 2-byte fp16 LUT gathers keep the lock-step trip."""

from __future__ import annotations

import json

import pytest

from mpsim.hw_models.loader import load_hardware
from mpsim.kernels.launch_config import LOOP_STAGES_KEY, LUT_WORDS_KEY, LaunchConfig
from mpsim.launch_plan import gemm_row
from mpsim.sim.launch import price_launch


def _price(m: int, fmt: str, bits: int, group: int | None = 128) -> dict[str, object]:
    row = gemm_row(m, 11008, 4096, fmt, bits, group if fmt == "group" else None)
    return price_launch(row, load_hardware("h200-sxm"))


@pytest.mark.parametrize("m", (16, 512))
@pytest.mark.parametrize("bits", (8, 4, 2))
def test_scale_zero_words_run_the_pipeline(m: int, bits: int,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    staged = _price(m, "group", bits)
    monkeypatch.setenv("MPSIM_SZ_WORDS", "0")
    loads2 = _price(m, "group", bits)
    assert loads2["bound"] == "latency" and staged["bound"] != "latency"
    assert float(staged["time_s"]) < 0.5 * float(loads2["time_s"])  # h200: 2.6-4.1x at these shapes


def test_any_precision_is_staged_with_pair_tables_and_lut_words() -> None:
    """<= 3 bits: the pair table's 4-byte gathers; 4 bits: the LUT's 32-bit words (the config's
    lut_words, kernels/lut_words.py); without the key, its fp16 LUT's 2-byte gathers: lock-step."""
    for m in (16, 512):
        assert _price(m, "anyprec", 3)["bound"] != "latency"
        assert _price(m, "anyprec", 4)["bound"] != "latency"
        row = gemm_row(m, 11008, 4096, "anyprec", 4)
        fp16_lut = json.loads(str(row["config"]))
        assert fp16_lut.pop(LUT_WORDS_KEY) == 1
        row = gemm_row(m, 11008, 4096, "anyprec", 4, config=launch_config(row, fp16_lut))
        plain = price_launch(row, load_hardware("h200-sxm"))
        assert plain["bound"] == "latency"
        assert float(plain["time_s"]) > 1.5 * float(_price(m, "anyprec", 4)["time_s"])
    # fewer bits never slower, across the pair table's edge too (16 rows)
    assert float(_price(16, "anyprec", 3)["time_s"]) < float(_price(16, "anyprec", 4)["time_s"])


def launch_config(row: dict[str, object], cfg: dict[str, int]) -> LaunchConfig:
    """The row's config with `cfg`'s keys (the one the row carries, less what the test dropped)."""
    extra = tuple((k, v) for k, v in cfg.items() if k in (LUT_WORDS_KEY, LOOP_STAGES_KEY))
    grid = tuple(json.loads(str(row["grid"])))
    return LaunchConfig(str(row["kernel"]), grid, cfg["block_m"], cfg["block_n"], cfg["block_k"],
                        cfg["num_warps"], cfg["num_stages"], cfg.get("split_k", 1),
                        cfg.get("group_m"), extra)

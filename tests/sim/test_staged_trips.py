"""Which quantized tl.dot loops the GPU model prices as a pipeline (mpsim/sim/gpu/library/mpsim_gemm.py
`trip_staged`): those whose every load the compiled K loop stages with cp.async. A group weight read as
scale-zero words (the config's sz_words, kernels/sz_words.py) and any-precision at <= 3 bits run
num_stages trips in flight; the 2-byte scale and zero loads (a config without the key, as the
2026-12-04 captures ran) and any-precision's 2-byte LUT gathers at 4 bits keep the lock-step trip."""

from __future__ import annotations

import pytest

from mpsim.hw_models.loader import load_hardware
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


def test_any_precision_is_staged_up_to_three_bits() -> None:
    for m in (16, 512):
        assert _price(m, "anyprec", 3)["bound"] != "latency"
        assert _price(m, "anyprec", 4)["bound"] == "latency"
    # fewer bits never slower, across the staging edge too (16 rows)
    assert float(_price(16, "anyprec", 3)["time_s"]) < float(_price(16, "anyprec", 4)["time_s"])

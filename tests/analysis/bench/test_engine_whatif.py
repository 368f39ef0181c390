"""The engine what-if table (analysis/bench/engine_whatif.py) on a small sample: every engine
variant prices every policy it runs, a ratio is over the same engine's fp16, and the block is a
markdown table of them."""

from __future__ import annotations

import pytest

from mpsim.analysis.bench.engine_whatif import POLICIES, VARIANTS, block, table


def test_the_table_prices_each_engine_against_its_own_fp16() -> None:
    t = table(["h100-sxm"], [1], 64, 4)
    assert len(t) == len(VARIANTS) * len(POLICIES)
    assert t["tok_s"].notna().all()  # every shipped variant runs fp16, w4g128 and fp8 on Hopper
    fp16 = t[t["policy"] == "fp16"]
    assert (fp16["x_fp16"] == 1.0).all()
    w4 = t[t["policy"] == "w4g128"].set_index("engine")["x_fp16"]
    assert (w4 > 1.0).all()  # batch 1 on every engine: fewer weight bytes win
    gemlite, marlin = (t[(t["engine"] == e) & (t["policy"] == "w4g128")]["tok_s"].iloc[0]
                       for e in ("sglang, gemlite (GemLite)", "sglang (Marlin)"))
    assert gemlite != pytest.approx(marlin, rel=1e-3)  # the method picks another kernel
    text = block(t)
    assert text.splitlines()[0] == "| GPU | batch | engine | fp16 | w4g128 | fp8 |"
    assert len(text.splitlines()) == 2 + len(VARIANTS)

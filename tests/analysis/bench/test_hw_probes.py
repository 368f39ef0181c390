"""The GPU kit's probes (analysis/bench/hw_probes.py) on CPU: the collectors' operand values exactly,
the probe GEMM's two load paths against a float64 product within the derived bound, the ratios, the
CSV a dry run writes."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from mpsim.analysis.bench import hw_probes as hp
from mpsim.reference.fp8 import encode_e4m3

CPU = torch.device("cpu")


def _codes(t: torch.Tensor) -> np.ndarray:
    return t.view(torch.uint8).numpy()


def test_weights_are_the_collectors_values() -> None:
    gen = torch.Generator().manual_seed(3)
    const = hp.fp8_weight("constant", 8, 16, CPU, gen)  # vLLM: weight.fill_(0.01), one e4m3 code
    assert (_codes(const) == encode_e4m3(np.array([0.01], np.float32))[0]).all()
    uniform = hp.fp8_weight("uniform", 64, 256, CPU, gen).float()  # SGLang: uniform over +-448
    assert uniform.abs().max() <= hp.E4M3_MAX and uniform.abs().max() > 400 and (uniform < 0).any()
    randn = hp.fp8_weight("randn", 64, 256, CPU, gen).float()  # TensorRT-LLM: randn cast as is
    assert 0.8 < float(randn.std()) < 1.2
    assert (_codes(hp.fp8_weight("zeros", 4, 4, CPU, gen)) == 0).all()
    with pytest.raises(ValueError, match="weight kind 'ones'"):
        hp.fp8_weight("ones", 4, 4, CPU, gen)


def test_tokens_are_quantized_per_row_to_the_e4m3_range() -> None:
    x = hp.fp8_tokens(5, 128, CPU, torch.Generator().manual_seed(0)).float()
    assert torch.equal(x.abs().amax(dim=1), torch.full((5,), hp.E4M3_MAX))


@pytest.mark.parametrize("tma", [True, False])
def test_the_probe_gemm_computes_a_times_b_transposed_past_the_edge(tma: bool) -> None:
    gen = torch.Generator().manual_seed(1)
    m, n, k = 33, 64, 64  # one row past a 32-row tile: the box past M comes back as zeros
    a = torch.randn(m, k, generator=gen).to(torch.float16)
    b = torch.randn(n, k, generator=gen).to(torch.float16)
    c = torch.full((m, n), float("nan"), dtype=torch.float16)
    hp.edge_gemm(a, b, c, hp.DRY_TILE, tma)()
    ref = a.double() @ b.double().t()
    # fp32 accumulation of k products (k unit roundoffs of the absolute sum), then one fp16 rounding
    bound = (k * 2.0**-24) * (a.double().abs() @ b.double().abs().t()) + 2.0**-11 * ref.abs() + 2.0**-24
    assert not torch.isnan(c).any()
    assert ((c.double() - ref).abs() <= bound).all()


def test_the_probe_gemm_needs_whole_n_and_k_tiles() -> None:
    a, b, c = torch.zeros(4, 48, dtype=torch.float16), torch.zeros(32, 48, dtype=torch.float16), None
    with pytest.raises(ValueError, match=r"N \(32\) and K \(48\) in whole 32 / 32 tiles"):
        hp.edge_gemm(a, b, c, hp.DRY_TILE, True)  # type: ignore[arg-type]


def test_ratios_divide_by_the_reference_row() -> None:
    rows = [hp._row("edge", "v", "float16", (m, 8, 8), us, 1, "ok")
            for m, us in ((128, 2.0), (129, 3.0), (256, 4.0))]
    assert [r["ratio"] for r in hp.with_edge_ratios(rows, 128)] == [1.0, 0.75, 1.0]
    ops = [hp._row("operands", v, "fp8", (8, 8, 8), us, 1, "ok")
           for v, us in (("randn", 4.0), ("uniform", 3.0))]
    ops.append(hp._row("operands", "zeros", "fp8", (8, 8, 8), None, 0, "skipped: why"))
    assert [r["ratio"] for r in hp.with_operand_ratios(ops)] == [1.0, 0.75, None]
    assert math.isclose(float(ops[1]["tflops"]), 2 * 8**3 / 3e6)  # type: ignore[arg-type]


def test_a_dry_run_writes_every_row_and_says_why_fp8_did_not_run(tmp_path: Path) -> None:
    out = tmp_path / "probes.csv"
    assert hp.main(["--out", str(out), "--dry-run", "--warm-s", "0", "--repeats", "1", "--calls", "1"]) == 0
    df = pd.read_csv(out)
    assert list(df.columns) == list(hp.COLUMNS)
    fp8 = df[df.dtype == "fp8"]
    assert len(fp8) == len(hp.WEIGHT_KINDS) and fp8.status.str.startswith("skipped: no CUDA").all()
    edge = df[df.probe == "edge"]
    assert sorted(set(edge.variant)) == ["torch", "triton-pointers", "triton-tma"]
    assert sorted(set(edge.m)) == list(hp.DRY_MS) and (edge.median_us > 0).all()
    assert edge[edge.m == 33].ratio.notna().all()  # 33 over 64, the next multiple of the 32-row tile
    with pytest.raises(SystemExit):
        hp.main(["--out", str(out), "--probes", "power"])

"""The one-row GEMVs' pipelined K loop (kernels/launch_config.py LOOP_STAGES_KEY): the GPU configs
ask for it, the launcher passes it to every one-row GEMV kernel, and on the CPU interpreter the
loop computes exactly what the unpipelined loop computes (the same products in the same order: the
pipelining only moves loads), so every bound and twin test of the plain loop holds for it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from mpsim.kernels.gemm_anyprec import gemm_anyprec, pair_exp, pair_table
from mpsim.kernels.gemm_fp16 import gemm_fp16
from mpsim.kernels.gemm_group import gemm_group
from mpsim.kernels.gemv_fp4 import fp4_weight_tensors, gemv_fp4, gemv_fp4_config
from mpsim.kernels.launch_config import (
    LOOP_STAGES_KEY,
    LaunchConfig,
    cdiv,
    gemm_candidates,
    gemm_config,
)
from mpsim.kernels.table_rows import rows_aligned
from mpsim.reference.anyprec import quantize_anyprec
from mpsim.reference.fp4_quant import quantize_fp4
from mpsim.reference.group_quant import quantize_group


def _with_stages(cfg: LaunchConfig, stages: int) -> LaunchConfig:
    return dataclasses.replace(cfg, extra=((LOOP_STAGES_KEY, stages),) if stages else ())


def _bits(y: torch.Tensor) -> np.ndarray:
    return y.numpy().view(np.uint16)


def test_gpu_configs_pipeline_the_one_row_loop_only() -> None:
    for fmt, bits, group in (("fp16", 16, None), ("int4-group", 4, 128), ("int8-group", 8, 128),
                             ("anyprec", 3, None)):
        one = gemm_config(1, 4096, 4096, fmt, bits, group)
        # 3 stages, 2 for the any-precision partial sums (launch_config.one_row_stages: its staged
        # pair-table words would need 156 KB a CTA at 3)
        depth = 2 if fmt == "anyprec" else 3
        assert dict(one.extra)[LOOP_STAGES_KEY] == depth and one.num_stages == 3, one
        assert LOOP_STAGES_KEY not in dict(gemm_config(16, 4096, 4096, fmt, bits, group).extra)
        assert LOOP_STAGES_KEY not in dict(gemm_config(512, 4096, 4096, fmt, bits, group).extra)
        # the interpreter's configs run the plain loop (one stage)
        assert LOOP_STAGES_KEY not in dict(gemm_config(1, 4096, 4096, fmt, bits, group,
                                                       on_gpu=False).extra)
        for c in gemm_candidates(1, 4096, 4096, fmt, bits, group):
            assert dict(c.extra).get(LOOP_STAGES_KEY) == (depth if c.block_m == 1 else None), c


@pytest.mark.parametrize("split", (1, 3))
def test_fp16_one_row_pipelined_equals_the_plain_loop(split: int) -> None:
    rng = np.random.default_rng(split)
    n, k = 70, 448
    x = torch.from_numpy(rng.standard_normal((1, k)).astype(np.float16))
    w = torch.from_numpy(rng.standard_normal((n, k)).astype(np.float16))
    cfg = LaunchConfig("gemv_fp16_kernel", (cdiv(n, 32), split), 1, 32, 64, 4, 1, split)
    plain = gemm_fp16(x, w, config=cfg)
    piped = gemm_fp16(x, w, config=_with_stages(cfg, 3))
    assert np.array_equal(_bits(plain), _bits(piped))


@pytest.mark.parametrize(("bits", "block_k", "k", "split"), [
    (4, 32, 512, 2), (3, 32, 512, 2), (2, 32, 512, 2), (8, 64, 512, 2),
    (3, 32, 384, 3), (2, 32, 512, 1), (3, 32, 448, 1), (2, 32, 640, 2)])
def test_group_one_row_pipelined_equals_the_plain_loop(bits: int, block_k: int, k: int,
                                                       split: int) -> None:
    """4, 3, 2 bits at 32-column tiles take the fp16 partial sums, 8 bits the exact-W_hat loop; 3
    and 2 bits prefetch the next run in registers: 2 runs a split, 1, 4, K = 448 padded to 512 (its
    last run's x masked), 3 + 2 runs (the last run's prefetch reloads that run)."""
    rng = np.random.default_rng(bits + k + split)
    n, group = 40, 128
    gw = quantize_group(rng.standard_normal((n, k)).astype(np.float16), bits, group)
    x = torch.from_numpy(rng.standard_normal((1, k)).astype(np.float16))
    cfg = LaunchConfig("gemv_group_kernel", (cdiv(n, 32), split), 1, 32, block_k, 4, 1, split)

    def run(c: LaunchConfig) -> torch.Tensor:
        return gemm_group(x, torch.from_numpy(gw.qweight), torch.from_numpy(gw.scales),
                          torch.from_numpy(gw.zeros), bits=bits, group_size=group, config=c)

    assert np.array_equal(_bits(run(cfg)), _bits(run(_with_stages(cfg, 3))))


@pytest.mark.parametrize(("bits", "k", "split"), [(3, 256, 2), (4, 256, 2), (3, 640, 2), (2, 480, 1)])
def test_anyprec_one_row_pipelined_equals_the_plain_loop(bits: int, k: int, split: int) -> None:
    """3 and 2 bits read the pair table (their pipelined loop prefetches the next run's plane words
    in registers: 640 columns in 2 splits runs 3 + 2 runs of 128, 480 in one split ends inside its
    fourth run), 4 bits the LUT."""
    rng = np.random.default_rng(10 + bits + k)
    n = 36
    apw = quantize_anyprec(rng.standard_normal((n, k)).astype(np.float16), 4, 2)
    qweight, lut = torch.from_numpy(apw.qweight), rows_aligned(torch.from_numpy(apw.luts[bits]))
    pairs = pair_table(lut) if bits <= 3 else None
    x = torch.from_numpy(rng.standard_normal((1, k)).astype(np.float16))
    cfg = LaunchConfig("gemv_anyprec_kernel", (cdiv(n, 32), split), 1, 32, 32, 4, 1, split)
    e = pair_exp(pairs) if pairs is not None else None
    plain = gemm_anyprec(x, qweight, lut, bits=bits, pairs=pairs, pair_exp=e, config=cfg)
    piped = gemm_anyprec(x, qweight, lut, bits=bits, pairs=pairs, pair_exp=e,
                         config=_with_stages(cfg, 3))
    assert np.array_equal(_bits(plain), _bits(piped))


@pytest.mark.parametrize("kind", ("nvfp4", "mxfp4"))
def test_fp4_one_row_pipelined_equals_the_plain_loop(kind: str) -> None:
    rng = np.random.default_rng(7)
    n, k = 45, 256
    fw = quantize_fp4(rng.standard_normal((n, k)).astype(np.float16), kind)
    qw, sc = fp4_weight_tensors(fw)
    x = torch.from_numpy(rng.standard_normal((1, k)).astype(np.float16))
    cfg = gemv_fp4_config(1, n, k, kind, on_gpu=False)
    assert LOOP_STAGES_KEY not in dict(cfg.extra)
    assert dict(gemv_fp4_config(1, 4096, 4096, kind).extra)[LOOP_STAGES_KEY] == 3

    def run(c: LaunchConfig) -> torch.Tensor:
        return gemv_fp4(x, qw, sc, float(fw.global_scale), kind=kind, k=k, config=c)

    assert np.array_equal(_bits(run(cfg)), _bits(run(_with_stages(cfg, 3))))


def test_the_switch_turns_the_pipelined_loop_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPSIM_LOOP_STAGES", "0")
    assert LOOP_STAGES_KEY not in dict(gemm_config(1, 4096, 4096, "fp16", 16, None).extra)
    assert LOOP_STAGES_KEY not in dict(gemv_fp4_config(1, 4096, 4096, "nvfp4").extra)
    monkeypatch.setenv("MPSIM_LOOP_STAGES", "yes")
    with pytest.raises(ValueError, match="MPSIM_LOOP_STAGES='yes': expected '0' or '1'"):
        gemm_config(1, 4096, 4096, "fp16", 16, None)

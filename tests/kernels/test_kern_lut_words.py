"""Any-precision's 4-bit LUT read as 32-bit words on the 2..16-row and tiled paths (kernels/lut_words.py):
the words' bits and alignment, which configs carry the key, that reading them changes no output bit,
the accountant's bytes, and a bad table."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from mpsim.kernels.gemm import AnyPrecWeight
from mpsim.kernels.gemm_anyprec import gemm_anyprec, lut_word_table
from mpsim.kernels.launch_config import LUT_WORDS_KEY, gemm_candidates, gemm_config, lut_words_of
from mpsim.kernels.table_rows import rows_aligned
from mpsim.reference.anyprec import quantize_anyprec
from mpsim.traces.accounting import gemm_weight_bytes


def _weight(n: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    apw = quantize_anyprec(np.random.default_rng(n + k).standard_normal((n, k)).astype(np.float16), 4, 2)
    # numpy's buffers are 16-byte aligned: the kernels OR into 32-byte LUT rows (kernels/table_rows.py)
    return torch.from_numpy(apw.qweight), rows_aligned(torch.from_numpy(apw.luts[4]))


def test_words_hold_the_lut_bits_in_rows_of_64_bytes() -> None:
    lut = torch.from_numpy(np.random.default_rng(0).standard_normal((7, 16)).astype(np.float16))
    words = lut_word_table(lut)
    assert words.dtype == torch.int32 and words.shape == (7, 16) and words.data_ptr() % 64 == 0
    raw = words.numpy().view(np.uint32)
    np.testing.assert_array_equal(raw & 0xFFFF, lut.numpy().view(np.uint16))
    assert not (raw >> 16).any()


def test_configs_carry_the_key_on_the_dot_paths_at_four_bits() -> None:
    def key(m: int, bits: int, fmt: str = "anyprec") -> bool:
        return lut_words_of(gemm_config(m, 4096, 4096, fmt, bits, None if fmt == "anyprec" else 128).extra)

    assert key(16, 4) and key(2, 4) and key(512, 4)
    assert not key(1, 4)  # the one-row GEMV keeps the fp16 LUT
    assert not key(16, 3) and not key(16, 5) and not key(16, 4, "int4-group")
    cands = gemm_candidates(16, 4096, 4096, "anyprec", 4, None)
    assert all(lut_words_of(c.extra) for c in cands)


@pytest.mark.parametrize("m", (4, 32))
def test_words_change_no_output_bit(m: int) -> None:
    qweight, lut = _weight(96, 256)
    x = torch.from_numpy(np.random.default_rng(m).standard_normal((m, 256)).astype(np.float16))
    cfg = gemm_config(m, 96, 256, "anyprec", 4, None, on_gpu=False)
    assert lut_words_of(cfg.extra)
    plain = dataclasses.replace(cfg, extra=tuple(e for e in cfg.extra if e[0] != LUT_WORDS_KEY))
    words = gemm_anyprec(x, qweight, lut, bits=4, config=cfg)
    fp16 = gemm_anyprec(x, qweight, lut, bits=4, config=plain)
    given = gemm_anyprec(x, qweight, lut, bits=4, config=cfg, lut_words=lut_word_table(lut))
    assert torch.equal(words.view(torch.int16), fp16.view(torch.int16))
    assert torch.equal(given.view(torch.int16), words.view(torch.int16))
    other = gemm_anyprec(x, qweight, lut, bits=4, config=cfg, lut_words=lut_word_table(lut * 2))
    assert not torch.equal(other, words)  # the words are what the launch reads


def test_weight_builds_its_words_and_the_accountant_charges_them() -> None:
    qweight, lut = _weight(9, 64)
    weight = AnyPrecWeight(qweight, {4: lut}, 4, 64)
    assert weight.lut_words is not None and torch.equal(weight.lut_words[4], lut_word_table(lut))
    one, many = (gemm_weight_bytes(m, 4096, 4096, "anyprec", 4, None) for m in (1, 16))
    assert many - one == 4096 * 16 * 2  # 4 bytes an entry instead of 2
    assert gemm_weight_bytes(16, 4096, 4096, "anyprec", 5, None) == gemm_weight_bytes(
        1, 4096, 4096, "anyprec", 5, None)


def test_a_bad_word_table_is_refused() -> None:
    qweight, lut = _weight(9, 64)
    x = torch.ones((4, 64), dtype=torch.float16)
    with pytest.raises(ValueError, match=r"lut_words: expected shape \(9, 16\)"):
        gemm_anyprec(x, qweight, lut, bits=4, lut_words=lut_word_table(lut)[:, :8].contiguous())
    words = lut_word_table(lut)
    buf = torch.empty(words.numel() + 32, dtype=torch.int32)
    start = (-buf.data_ptr() % 64) // 4 + 4  # 16 bytes past a row edge
    off = buf[start:start + words.numel()].view(words.shape)
    off.copy_(words)
    with pytest.raises(ValueError, match="lut_words: its rows of 64 bytes"):
        gemm_anyprec(x, qweight, lut, bits=4, lut_words=off)

"""Scales and zeros as one 32-bit word per row and group (kernels/sz_words.py): the words' bits, which
configs carry the key, that reading the words changes no bit of any output, and a bad `sz`.

The dequantized tiles read from the words are checked against the reference by
tests/kernels/test_kern_gemm_exact.py (`dequant_group` reads the words); here the GEMV and the tiled
GEMM run one launch with and without the key (the 2-byte loads) and must agree bit for bit.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from mpsim.kernels.gemm import GroupWeight
from mpsim.kernels.gemm_group import gemm_group, scale_zero_words
from mpsim.kernels.launch_config import SZ_WORDS_KEY, gemm_candidates, gemm_config, sz_words_of
from mpsim.reference.group_quant import quantize_group
from mpsim.reference.group_quant import scale_zero_words as scale_zero_words_ref


def _weight(n: int, k: int, bits: int, group: int) -> tuple[torch.Tensor, ...]:
    w = np.random.default_rng(n + k + bits).standard_normal((n, k)).astype(np.float16)
    gw = quantize_group(w, bits, group)
    return tuple(torch.from_numpy(a) for a in (gw.qweight, gw.scales, gw.zeros))


def test_words_hold_the_scale_and_zero_bits() -> None:
    rng = np.random.default_rng(0)
    s = (rng.standard_normal((5, 6)) * 100).astype(np.float16)  # negative scales: sign bits too
    z = rng.integers(0, 16, (5, 6)).astype(np.float16)
    z[0, 0] = -0.0
    ref = scale_zero_words_ref(s, z)
    assert ref.dtype == np.uint32
    np.testing.assert_array_equal(ref & 0xFFFF, s.view(np.uint16))
    np.testing.assert_array_equal(ref >> 16, z.view(np.uint16))
    got = scale_zero_words(torch.from_numpy(s), torch.from_numpy(z))
    assert got.dtype == torch.int32
    np.testing.assert_array_equal(got.numpy().view(np.uint32), ref)


def test_configs_carry_the_key_where_the_loop_reads_words() -> None:
    def key(m: int, bits: int, k: int = 4096, group: int = 128, fmt: str | None = None) -> bool:
        return sz_words_of(gemm_config(m, 4096, k, fmt or f"int{bits}-group", bits, group).extra)

    assert key(16, 4) and key(2, 3) and key(512, 4) and key(1, 8)  # the W_hat loops
    assert key(16, 4, k=96, group=32)  # an odd group count a row: words need no pairing
    assert not key(1, 4) and not key(1, 2)  # the one-row partial sums read z once a run
    assert not key(16, 4, fmt="fp16") and not key(16, 4, fmt="anyprec", group=0)
    assert all(sz_words_of(c.extra) for c in gemm_candidates(16, 4096, 4096, "int4-group", 4, 128))
    assert sz_words_of(gemm_config(16, 4096, 4096, "int4-group", 4, 128, on_gpu=False).extra)


def test_the_switch_drops_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPSIM_SZ_WORDS", "0")
    assert not sz_words_of(gemm_config(16, 4096, 4096, "int4-group", 4, 128).extra)
    monkeypatch.setenv("MPSIM_SZ_WORDS", "yes")
    with pytest.raises(ValueError, match="MPSIM_SZ_WORDS='yes': expected '0' or '1'"):
        gemm_config(16, 4096, 4096, "int4-group", 4, 128)


@pytest.mark.parametrize("bits", (8, 4, 3, 2))
@pytest.mark.parametrize("m", (1, 4, 32))
def test_words_change_no_output_bit(bits: int, m: int) -> None:
    """One launch reading 2-byte scales and zeros (no key) and the words: identical outputs; and the
    words are what it reads (other zeros in them change the output). K = 320 with groups of 64:
    five groups a row, K tiles of 64, one group each, so every M runs a W_hat loop (one row too)."""
    n, k, group = 96, 320, 64
    qw, s, z = _weight(n, k, bits, group)
    x = torch.from_numpy(np.random.default_rng(m).standard_normal((m, k)).astype(np.float16))
    cfg = dataclasses.replace(gemm_config(m, n, k, f"int{bits}-group", bits, group, on_gpu=False),
                              block_k=64)
    cfg = dataclasses.replace(cfg, extra=((SZ_WORDS_KEY, 1),))
    plain = dataclasses.replace(cfg, extra=())
    out = [gemm_group(x, qw, s, z, bits=bits, group_size=group, config=c) for c in (cfg, plain)]
    given = gemm_group(x, qw, s, z, bits=bits, group_size=group, config=cfg,
                       sz=scale_zero_words(s, z))
    assert torch.equal(out[0].view(torch.int16), out[1].view(torch.int16))
    assert torch.equal(given.view(torch.int16), out[0].view(torch.int16))
    other = gemm_group(x, qw, s, z, bits=bits, group_size=group, config=cfg,
                       sz=scale_zero_words(s, z + 1))
    assert not torch.equal(other, out[0])


def test_group_weight_builds_its_words_once_and_a_bad_sz_is_refused() -> None:
    qw, s, z = _weight(64, 128, 4, 32)
    weight = GroupWeight(qw, s, z, 4, 32, 128)
    assert weight.sz is not None and torch.equal(weight.sz, scale_zero_words(s, z))
    x = torch.ones((4, 128), dtype=torch.float16)
    with pytest.raises(ValueError, match=r"sz: expected shape \(64, 4\)"):
        gemm_group(x, qw, s, z, bits=4, group_size=32, sz=weight.sz[:, :2].contiguous())
    with pytest.raises(ValueError, match="sz"):
        gemm_group(x, qw, s, z, bits=4, group_size=32, sz=weight.sz.to(torch.int64))

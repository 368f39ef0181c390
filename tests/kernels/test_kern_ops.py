"""Small-op kernels (interpreter on CPU): RMSNorm, LayerNorm, RoPE (full and partial), SiLU-mul, GELU,
residual add, embedding gather, argmax at 1, 7 and 33 rows and widths past the CPU chunk of 128.

Float outputs: within reference/tolerance.py's bound of the float64 model (reference/exact.py), and
within twice it of the numba reference. Exact ops (residual add, gather, argmax, RoPE's pass-through
dims): equal bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mpsim.kernels.activations import gelu, silu_mul
from mpsim.kernels.elementwise import embedding, residual_add
from mpsim.kernels.launch_config import ROWWISE_BLOCK_CPU
from mpsim.kernels.norms import layer_norm, rms_norm
from mpsim.kernels.rope import RopeTable, rope
from mpsim.kernels.sampling import argmax
from mpsim.opspec import rope_angles
from mpsim.reference import exact
from mpsim.reference.activations import gelu_ref, silu_mul_ref
from mpsim.reference.elementwise import embedding_ref, residual_add_ref
from mpsim.reference.norms import layer_norm_ref, rms_norm_ref
from mpsim.reference.rope import rope_ref
from mpsim.reference.sampling import argmax_ref
from mpsim.reference.tolerance import (
    assert_close_bound,
    gelu_bound,
    layer_norm_bound,
    rms_norm_bound,
    rope_bound,
    silu_mul_bound,
)
from mpsim.traces.recorder import Recorder

ROWS = (1, 7, 33)
WIDTHS = (64, 300)  # one chunk; three chunks of ROWWISE_BLOCK_CPU with a ragged tail
assert max(WIDTHS) > 2 * ROWWISE_BLOCK_CPU


def fp16(rng: np.random.Generator, shape: tuple[int, ...], scale: float = 1.0,
         shift: float = 0.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale + shift).astype(np.float16)


def bits(a: np.ndarray | torch.Tensor) -> np.ndarray:
    return np.asarray(a).view(np.uint16)


def check_float(out: torch.Tensor, model: np.ndarray, bound: np.ndarray, ref: np.ndarray,
                what: str) -> None:
    assert_close_bound(out.numpy(), model, bound, what)
    assert_close_bound(out.numpy(), ref, 2 * bound, f"{what} vs reference")


@pytest.mark.parametrize("m", ROWS)
@pytest.mark.parametrize("n", WIDTHS)
def test_rms_norm(m: int, n: int) -> None:
    rng = np.random.default_rng(m * n)
    x, w = fp16(rng, (m, n), 3.0, 0.5), fp16(rng, (n,), 0.5, 1.0)
    out = rms_norm(torch.from_numpy(x), torch.from_numpy(w), 1e-6)
    check_float(out, exact.rms_norm_float64(x, w, 1e-6), rms_norm_bound(x, w, 1e-6),
                rms_norm_ref(x, w, 1e-6), "rms_norm")


@pytest.mark.parametrize("m", ROWS)
@pytest.mark.parametrize("n", WIDTHS)
@pytest.mark.parametrize("with_bias", [True, False])
def test_layer_norm(m: int, n: int, with_bias: bool) -> None:
    rng = np.random.default_rng(m + n)
    x, w = fp16(rng, (m, n), 2.0, 4.0), fp16(rng, (n,), 0.5, 1.0)
    b = fp16(rng, (n,)) if with_bias else np.zeros(n, np.float16)
    out = layer_norm(torch.from_numpy(x), torch.from_numpy(w),
                     torch.from_numpy(b) if with_bias else None, 1e-5)
    check_float(out, exact.layer_norm_float64(x, w, b, 1e-5), layer_norm_bound(x, w, b, 1e-5),
                layer_norm_ref(x, w, b, 1e-5), "layer_norm")


@pytest.mark.parametrize("m", ROWS)
@pytest.mark.parametrize("f", WIDTHS)
def test_silu_mul(m: int, f: int) -> None:
    x = fp16(np.random.default_rng(f - m), (m, 2 * f), 4.0)
    out = silu_mul(torch.from_numpy(x))
    check_float(out, exact.silu_mul_float64(x), silu_mul_bound(x[:, :f], x[:, f:]),
                silu_mul_ref(x), "silu_mul")


OVERFLOW_IS_MEANT = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")


@OVERFLOW_IS_MEANT  # exp(-2t) -> inf in the deep negative tail, x / inf -> -0: the right answer
@pytest.mark.parametrize("m", ROWS)
@pytest.mark.parametrize("n", WIDTHS)
def test_gelu(m: int, n: int) -> None:
    x = fp16(np.random.default_rng(n + 3 * m), (m, n), 4.0)
    x[0, :4] = [-12.0, -5.0, 0.0, 9.0]  # deep tails and zero
    out = gelu(torch.from_numpy(x))
    check_float(out, exact.gelu_float64(x), gelu_bound(x), gelu_ref(x), "gelu")


@pytest.mark.parametrize("d,rot_dim", [(64, 64), (80, 20)], ids=["full", "partial-25%"])
@pytest.mark.parametrize("t", [1, 7])
def test_rope_full_and_partial(d: int, rot_dim: int, t: int) -> None:
    rng = np.random.default_rng(d + t)
    b, hq, hk, theta = 2, 4, 2, 10000.0
    q, k = fp16(rng, (b, t, hq, d), 2.0), fp16(rng, (b, t, hk, d), 2.0)
    pos = rng.integers(0, 4096, (b, t)).astype(np.int32)
    table = RopeTable.build(rot_dim, theta, 4096)
    qo, ko = rope(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(pos), table)
    for x, out in ((q, qo.numpy()), (k, ko.numpy())):
        assert np.array_equal(bits(out[..., rot_dim:]), bits(x[..., rot_dim:])), "pass-through"
        for s in range(b):
            angles = rope_angles(pos[s], rot_dim, theta)
            model = exact.rope_float64(x[s], angles, rot_dim)[..., :rot_dim]
            c, sn = np.cos(angles.astype(np.float64)), np.sin(angles.astype(np.float64))
            bound = rope_bound(x[s][..., :rot_dim], c[:, None, :], sn[:, None, :])
            assert_close_bound(out[s][..., :rot_dim], model, bound, "rope")
            ref = rope_ref(x[s], pos[s], rot_dim, theta)[..., :rot_dim]
            assert_close_bound(out[s][..., :rot_dim], ref, 2 * bound, "rope vs reference")


@OVERFLOW_IS_MEANT  # 60000 + 60000 rounds to inf in fp16
@pytest.mark.parametrize("m", ROWS)
def test_residual_add_is_exact(m: int) -> None:
    rng = np.random.default_rng(m)
    a, b = fp16(rng, (m, 300), 1000.0), fp16(rng, (m, 300), 1e-3)
    a[0, :3], b[0, :3] = [60000.0, -6e-8, 1.0], [60000.0, 6e-8, 2.0**-11]  # inf, subnormal, tie
    out = residual_add(torch.from_numpy(a), torch.from_numpy(b))
    assert np.array_equal(bits(out), bits(residual_add_ref(a, b)))


@pytest.mark.parametrize("id_dtype", [torch.int64, torch.int32])
def test_embedding_is_exact(id_dtype: torch.dtype) -> None:
    rng = np.random.default_rng(0)
    table = fp16(rng, (50, 300))
    ids = rng.integers(0, 50, 33)
    ids[:2] = [0, 49]
    out = embedding(torch.from_numpy(ids).to(id_dtype), torch.from_numpy(table))
    assert np.array_equal(bits(out), bits(embedding_ref(ids, table)))
    with pytest.raises(ValueError, match=r"ids: expected token ids in \[0, 50\).*\[0, 50\]"):
        embedding(torch.tensor([0, 50], dtype=id_dtype), torch.from_numpy(table))


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_argmax_ties_go_to_the_lowest_index(dtype: type) -> None:
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((33, 300)).astype(dtype)
    logits[0, [5, 200]] = 9.0       # tie across chunks
    logits[1, [130, 131]] = 9.0     # tie inside a later chunk
    logits[2, :] = -np.inf          # nothing beats -inf: index 0
    logits[3, [7, 299]] = np.inf
    out = argmax(torch.from_numpy(logits)).numpy()
    assert out.dtype == np.int64
    assert np.array_equal(out, argmax_ref(logits))
    assert out[:4].tolist() == [5, 130, 0, 7]


def test_small_ops_record_rows_the_accountant_knows() -> None:
    rng = np.random.default_rng(2)
    x = torch.from_numpy(fp16(rng, (7, 64)))
    w = torch.from_numpy(fp16(rng, (64,)))
    q = torch.from_numpy(fp16(rng, (1, 7, 2, 64)))
    table = RopeTable.build(32, 10000.0, 16)
    with Recorder() as rec:
        rms_norm(x, w)
        layer_norm(x, w, w)
        silu_mul(x)
        gelu(x)
        residual_add(x, x)
        embedding(torch.arange(7), x)
        argmax(x)
        rope(q, q, torch.arange(7, dtype=torch.int32)[None], table)
    got = [(r["kernel"], r["op"], r["m"], r["n"], r["k"]) for r in rec.finish()]
    assert got == [("rms_norm_kernel", "norm", 7, 64, None),
                   ("layer_norm_kernel", "norm", 7, 64, None),
                   ("silu_mul_kernel", "act", 7, 32, 64),
                   ("gelu_kernel", "act", 7, 64, 64),
                   ("residual_add_kernel", "other", 7, 64, None),
                   ("embedding_kernel", "embed", 7, 64, None),
                   ("argmax_kernel", "sample", 7, 64, None),
                   ("rope_kernel", "rope", 7, 4 * 64, 32)]


def test_errors_name_the_argument() -> None:
    x = torch.zeros(3, 8, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"weight: expected size 8 on axis 0"):
        rms_norm(x, torch.zeros(9, dtype=torch.float16))
    with pytest.raises(ValueError, match="x: expected dtype fp16, got fp32"):
        gelu(x.float())
    with pytest.raises(ValueError, match="x: expected an even number of columns"):
        silu_mul(x[:, :7])
    with pytest.raises(ValueError, match="the last axis must be contiguous"):
        residual_add(x.t(), x.t())
    table = RopeTable.build(8, 10000.0, 4)
    q = torch.zeros(1, 2, 1, 8, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"positions: expected values in \[0, 4\)"):
        rope(q, q, torch.tensor([[0, 4]], dtype=torch.int32), table)

"""Causal prefill attention kernel (interpreter on CPU): MHA and GQA, head_dim 64 and 80, prompts of
1, 7, 33 and 129 tokens, ragged right-padded batches, strided (fused QKV) inputs.

Checked against the float64 model within reference/tolerance.py's attention_bound (P rounded to fp16
for PV, one rescale per key tile), and against reference/attention_prefill.py within the sum of both
bounds; padding rows must be exactly 0.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from mpsim.kernels.attention_prefill import attention_prefill
from mpsim.kernels.launch_config import attention_prefill_config, cdiv
from mpsim.reference.attention_prefill import attention_prefill_ref
from mpsim.reference.exact import attention_float64, causal_mask
from mpsim.reference.tolerance import assert_close_bound, attention_bound
from mpsim.traces.recorder import Recorder

CASES = [  # (B, T, H_q, H_kv, D, lens or None)
    (1, 1, 2, 2, 64, None),
    (1, 7, 2, 1, 80, None),
    (2, 33, 4, 2, 80, [33, 20]),
    (1, 129, 2, 1, 64, None),
    (3, 17, 2, 2, 64, [1, 17, 0]),
]


def qkv(seed: int, b: int, t: int, hq: int, hkv: int, d: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    def draw(h: int, s: float) -> np.ndarray:
        return (rng.standard_normal((b, t, h, d)) * s).astype(np.float16)
    return draw(hq, 1.5), draw(hkv, 1.5), draw(hkv, 1.0)


def expectation(q: np.ndarray, k: np.ndarray, v: np.ndarray, lens: list[int], n_rescales: int,
                p_fp16: bool) -> tuple[np.ndarray, np.ndarray]:
    """float64 causal attention (B, T, H_q, D) and its bound; 0 with bound 0 on padding rows."""
    hq, d = q.shape[2:]
    group = hq // k.shape[2]
    exact, bound = np.zeros(q.shape), np.zeros(q.shape)
    for s, n in enumerate(lens):
        if n == 0:
            continue
        qs = q[s, :n].transpose(1, 0, 2)  # (H_q, n, D)
        ks = np.repeat(k[s, :n].transpose(1, 0, 2), group, axis=0)
        vs = np.repeat(v[s, :n].transpose(1, 0, 2), group, axis=0)
        mask = np.broadcast_to(causal_mask(n, n), (hq, n, n))
        sm = 1.0 / math.sqrt(d)
        exact[s, :n] = attention_float64(qs, ks, vs, sm, mask).transpose(1, 0, 2)
        bound[s, :n] = attention_bound(qs, ks, vs, sm, mask, p_fp16, n_rescales).transpose(1, 0, 2)
    return exact, bound


@pytest.mark.parametrize("b,t,hq,hkv,d,lens", CASES)
def test_prefill_within_the_attention_bound(b: int, t: int, hq: int, hkv: int, d: int,
                                            lens: list[int] | None) -> None:
    q, k, v = qkv(t + d, b, t, hq, hkv, d)
    lens_t = None if lens is None else torch.tensor(lens, dtype=torch.int32)
    out = attention_prefill(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v),
                            lens_t).numpy()
    real = [t] * b if lens is None else lens
    cfg = attention_prefill_config(b, t, hq, hkv, d, on_gpu=False)
    assert cfg.block_n is not None
    exact, bound = expectation(q, k, v, real, cdiv(t, cfg.block_n), True)
    assert_close_bound(out, exact, bound, f"prefill T={t} lens={lens}")
    for s, n in enumerate(real):
        assert not out[s, n:].any(), "padding rows are written as 0"
    _, ref_bound = expectation(q, k, v, real, 0, False)
    ref = attention_prefill_ref(q, k, v, True, None, None if lens is None else np.array(lens))
    assert_close_bound(out, ref, bound + ref_bound, "prefill vs reference")


def test_strided_views_of_a_fused_qkv_projection() -> None:
    b, t, hq, hkv, d = 2, 9, 2, 1, 64
    q, k, v = qkv(7, b, t, hq, hkv, d)
    fused = np.concatenate([q.reshape(b, t, -1), k.reshape(b, t, -1), v.reshape(b, t, -1)], -1)
    ft = torch.from_numpy(fused)
    qv = ft[..., :hq * d].unflatten(-1, (hq, d))
    kv_ = ft[..., hq * d:(hq + hkv) * d].unflatten(-1, (hkv, d))
    vv = ft[..., (hq + hkv) * d:].unflatten(-1, (hkv, d))
    assert not qv.is_contiguous()
    out = attention_prefill(qv, kv_, vv).numpy()
    dense = attention_prefill(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v))
    assert np.array_equal(out.view(np.uint16), dense.numpy().view(np.uint16))


def test_recorded_launch_carries_the_attention_row() -> None:
    q, k, v = (torch.from_numpy(a) for a in qkv(1, 2, 7, 4, 2, 64))
    with Recorder() as rec:
        attention_prefill(q, k, v, torch.tensor([7, 3], dtype=torch.int32))
    (row,) = rec.finish()
    cfg = attention_prefill_config(2, 7, 4, 2, 64, on_gpu=False)
    assert (row["kernel"], row["op"], row["causal"], row["q_len"], row["kv_len"]) == (
        "attention_prefill_kernel", "attention", True, 7, 7)
    assert (row["k_bits"], row["v_bits"], row["kv_block"], row["num_q_heads"]) == (16, 16, None, 4)
    assert json.loads(row["grid"]) == list(cfg.grid) and json.loads(row["config"]) == cfg.config_dict()


def test_errors_name_the_argument() -> None:
    q, k, v = (torch.from_numpy(a) for a in qkv(1, 1, 7, 3, 2, 64))
    with pytest.raises(ValueError, match="k: expected a number of KV heads dividing q's 3"):
        attention_prefill(q, k, v)
    q2 = q[:, :, :2]
    with pytest.raises(ValueError, match=r"v: expected size 7 on axis 1"):
        attention_prefill(q2, k, v[:, :5])
    with pytest.raises(ValueError, match="seq_lens: expected size 1 on axis 0"):
        attention_prefill(q2, k, v, torch.tensor([7, 7], dtype=torch.int32))

"""The attention, KV and small-op kernels compile for a Hopper GPU (sm_90) without one being present.

The interpreter runs kernel bodies as Python, so GPU-only compile errors (a non-constexpr global read
in a @triton.jit body, a layout the backend rejects) pass every CPU test. triton.compile with an
explicit GPUTarget needs no driver: it lowers to PTX and assembles with the ptxas Triton ships. It
runs in a subprocess because this session set TRITON_INTERPRET=1 before the kernels were imported.
The divisibility hints are those the JIT infers for 16-aligned pointers and strides; the test also
checks that the packed int4 KV codes load as vectors of 32-bit words (kernels/kv_fold.py), not byte by byte.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SCRIPT = r'''
import re, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from mpsim.kernels import attention_decode, attention_prefill, kv_quant, norms, rope, sampling

def build(fn, types, consts, num_warps=4, num_stages=2):
    sig, attrs = {}, {}
    for i, name in enumerate(fn.arg_names):
        sig[name] = "constexpr" if name in consts else types.get(name, "i32")
        if sig[name].startswith("*") or name.startswith("stride") or name == "D":
            attrs[(i,)] = [["tt.divisibility", 16]]
    src = ASTSource(fn=fn, signature=sig, constexprs=dict(consts), attrs=attrs)
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                       options={"num_warps": num_warps, "num_stages": num_stages})
    return k.asm["ptx"]

h, u8 = "*fp16", "*u8"
decode_types = dict(q_ptr=h, o_ptr=h, kd_ptr="*i32", ks_ptr=h, kz_ptr=h, vd_ptr="*i32", vs_ptr=h,
                    vz_ptr=h,
                    lens_ptr="*i32", table_ptr="*i32", ws_acc="*fp32", ws_ml="*fp32",
                    counters="*i32", qk_scale="fp32")
for bg in (1, 16):
    ptx = build(attention_decode.attention_decode_kernel, decode_types,
                dict(K_BITS=4, V_BITS=4, PAGED=True, KV_BLOCK=64, BLOCK_G=bg, BLOCK_N=64,
                     BLOCK_D=128, ONE_SPLIT=False))
    assert "atom.global.gpu.acq_rel.add" in ptx, "split counter must be an acq_rel atomic"
    assert not re.search(r"ld\.global\.b8\s", ptx), "int4 codes must load as vectors"
build(kv_quant.kv_quant_kernel,
      dict(k_ptr=h, v_ptr=h, kc_ptr=u8, ks_ptr=h, kz_ptr=h, vc_ptr=u8, vs_ptr=h, vz_ptr=h,
           start_ptr="*i32", lens_ptr="*i32", table_ptr="*i32"),
      dict(K_BITS=4, V_BITS=8, HAS_LENS=True, PAGED=True, KV_BLOCK=64, BLOCK_T=8, BLOCK_D=128),
      num_stages=1)
build(attention_prefill.attention_prefill_kernel,
      dict(q_ptr=h, k_ptr=h, v_ptr=h, o_ptr=h, lens_ptr="*i32", qk_scale="fp32"),
      dict(HAS_LENS=True, BLOCK_M=128, BLOCK_N=64, BLOCK_D=128), num_warps=8)
build(norms.rms_norm_kernel, dict(x_ptr=h, w_ptr=h, y_ptr=h, eps="fp32"), dict(BLOCK=4096),
      num_warps=16, num_stages=1)
build(rope.rope_kernel, dict(q_ptr=h, k_ptr=h, qo_ptr=h, ko_ptr=h, pos_ptr="*i32",
                             cos_ptr="*fp32", sin_ptr="*fp32"),
      dict(BLOCK_HQ=32, BLOCK_HK=8, BLOCK_HALF=16, BLOCK_PASS=64), num_warps=1, num_stages=1)
build(sampling.argmax_kernel, dict(x_ptr=h, y_ptr="*i64"), dict(BLOCK=4096), num_warps=16,
      num_stages=1)
print("compiled")
'''


def test_kernels_compile_for_sm90_without_a_gpu() -> None:
    try:
        import triton.backends.nvidia  # noqa: F401
    except ImportError:
        pytest.skip("this triton build has no NVIDIA backend")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    run = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                         timeout=240)
    assert run.returncode == 0 and "compiled" in run.stdout, run.stderr[-3000:]

"""Bit-exact numba references and the quantization formats every mpsim kernel implements.

Formats: group_quant (+ packing), anyprec (+ anyprec_cluster), kv_quant; fp8 and fp4 (one encoder in
minifloat) with their quantizers fp8_quant and fp4_quant, and numba twins in minifloat_numba.
Ops (fp16 numpy in, fp16 out, fp32 inside numba): gemm_fp16, gemm_group, gemm_anyprec,
attention_prefill, attention_decode, norms, rope, activations, elementwise, sampling. Float64 models
of the ops: exact. The one tolerance rule for every numerical test: tolerance. docs/numerics.md
documents all of them.
"""

"""Triton kernels for low-bit GEMM/GEMV, quantized-KV attention and a decoder's small ops.

The launch-config choice lives in `launch_config` (no triton import), shared with synthesis and the
simulator so a synthesized trace carries the config the real kernel would run with.
"""

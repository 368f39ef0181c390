"""Launch configs of the fp8 / fp4 kernels (issue 26), without Triton or torch: the launchers
(kernels/gemm_fp8.py, gemm_fp8b.py, gemv_fp4.py, fp8_act_quant.py, attention_decode_fp8.py) call
these, and mpsim/library/mpsim_fp.py builds the synthesized rows from the same functions, so a
synthesized row carries the grid and config the launcher records.
"""

from __future__ import annotations

from mpsim.kernels.launch_config import (
    GEMM_GROUP_M,
    LaunchConfig,
    attention_decode_config,
    cdiv,
    gemv_loop_stages,
    next_pow2,
    rowwise_config,
)

SPLIT_TARGET = 264  # programs: two waves of one CTA per SM on a 132-SM H100/H200 (as the fp16 GEMV)
FP8_SCALE_BLOCK = 128  # fp8b: 128 x 128 weight blocks, 1 x 128 activation groups (reference/fp8_quant.py)
FP4_BLOCKS = {"nvfp4": 16, "mxfp4": 32}  # reference/fp4_quant.py FP4_BLOCK
KV_FP8_QUANT_KERNEL = "kv_fp8_quant_kernel"
DECODE_FP8_KERNEL = "attention_decode_fp8_kernel"


def gemm_fp8_config(m: int, n: int, k: int, *, on_gpu: bool = True) -> LaunchConfig:
    """The launch config: GPU M <= 16: 16 x 64 x 128 tiles (4 warps, 3 stages), K split to about
    SPLIT_TARGET programs keeping >= 2 BLOCK_K steps per split; M > 16: 128 x 128 x 128 (8 warps) when
    that gives >= 132 tiles, else 64 x 64 x 128 (4 warps), no split. These tiles are the fp16 GEMM's
    (docs/kernels.md) with BLOCK_K doubled (the same bytes per K step at one byte a code); they are
    compiled for sm_90a without spills (tests/kernels/test_kern_fp8_compile.py) and untimed (no GPU).
    Interpreter: 32 x 64 x 64, split 2 when K >= 128 (so the CPU tests run the split-K path; 16 x 32 x
    32 until stop 64: the interpreter's cost is per program and op, and the tiny model's fp8 prefill
    took 59 s of a 2-layer generate there, 19 s now)."""
    if not on_gpu:
        bm, bn, bk, warps, stages = 32, 64, 64, 4, 1
        split = 2 if k >= 128 else 1
    elif m <= 16:
        bm, bn, bk, warps, stages = 16, 64, 128, 4, 3
        split = max(1, min(cdiv(SPLIT_TARGET, cdiv(n, bn)), k // (2 * bk), 16))
    else:
        big = cdiv(m, 128) * cdiv(n, 128) >= 132
        bm, bn, bk, warps, stages = (128, 128, 128, 8, 3) if big else (64, 64, 128, 4, 3)
        split = 1
    tiles = cdiv(m, bm) * cdiv(n, bn)
    return LaunchConfig("gemm_fp8_kernel", (tiles, split), bm, bn, bk, warps, stages, split,
                        group_m=GEMM_GROUP_M)


def gemm_fp8b_config(m: int, n: int, k: int, *, on_gpu: bool = True) -> LaunchConfig:
    """gemm_fp8_config's tiles (BLOCK_N 64 or 128, BLOCK_K 128 on the GPU; 64 x 64 under the
    interpreter), so every tile lies inside one 128 x 128 scale block; except that its 128 x 128
    tile (8 warps) spills here (255 registers, 84 bytes: the scaled partial is a second accumulator),
    so that one becomes 64 token rows x 128 weight rows, 8 warps (183 registers, no spills, sm_90a)."""
    cfg = gemm_fp8_config(m, n, k, on_gpu=on_gpu)
    bm = cfg.block_m or 1
    if bm == 128:
        bm = 64
        cfg = LaunchConfig(cfg.kernel, (cdiv(m, bm) * cdiv(n, cfg.block_n or 1), 1), bm, cfg.block_n,
                           cfg.block_k, 8, cfg.num_stages, 1, group_m=cfg.group_m)
    return LaunchConfig("gemm_fp8b_kernel", cfg.grid, cfg.block_m, cfg.block_n, cfg.block_k,
                        cfg.num_warps, cfg.num_stages, cfg.split_k, group_m=cfg.group_m)


def gemv_fp4_config(m: int, n: int, kp: int, kind: str, *, on_gpu: bool = True) -> LaunchConfig:
    """GPU: BLOCK_N 64, BLOCK_K 128 (MXFP4 with more than one row: 32, one block a step), 16 rows a
    tile up to M = 16, else 64; 4 warps, 3 stages; K split to about SPLIT_TARGET programs keeping >= 2
    K steps a split and no split empty; one row: the K loop pipelined num_stages deep (loop_stages,
    docs/kernels.md#pipelined-k-loops). Compiled for sm_90a without spills
    (tests/kernels/test_kern_fp8_compile.py), untimed. Interpreter: 32 x 32 tiles (BLOCK_M 1 for one
    row, else 16), split 2 when KP >= 128."""
    mx = kind == "mxfp4"
    bm = 1 if m == 1 else (16 if m <= 16 else 64)
    if on_gpu:
        bn, bk, warps, stages = 64, (32 if mx and bm > 1 else 128), 4, 3
    else:
        bm = min(bm, 16)
        bn, bk, warps, stages = 32, 32, 4, 1
    tiles = cdiv(m, bm) * cdiv(n, bn)
    split = max(1, min(cdiv(SPLIT_TARGET, tiles), kp // (2 * bk), 16)) if on_gpu else 1 + (kp >= 128)
    # whole K tiles a split and none empty (the kernel assumes every split has one: split_columns)
    split = cdiv(cdiv(kp, bk), cdiv(cdiv(kp, bk), split))
    return LaunchConfig("gemv_fp4_kernel", (tiles, split), bm, bn, bk, warps, stages, split,
                        group_m=GEMM_GROUP_M, extra=gemv_loop_stages(bm, stages) if on_gpu else ())


def act_quant_config(m: int, k: int, *, on_gpu: bool = True) -> LaunchConfig:
    """fp8_act_quant_kernel: one program per token, the row-wise kernels' chunk and warps."""
    return rowwise_config("fp8_act_quant_kernel", m, k, on_gpu=on_gpu)


def group_quant_config(m: int, k: int, group: int = FP8_SCALE_BLOCK) -> LaunchConfig:
    """fp8_group_quant_kernel: one program per (token, 1 x group tile), 4 warps."""
    return LaunchConfig("fp8_group_quant_kernel", (m, cdiv(k, group)), None, group, None, 4, 1)


def kv_fp8_quant_config(tokens: int, heads: int, head_dim: int) -> LaunchConfig:
    """kv_fp8_quant_kernel: one program per (token, head) over `heads` rows (the K and V heads of a
    layer stacked: 2 x H_kv), BLOCK_D the head_dim's power of two, 4 warps, no pipeline."""
    return LaunchConfig(KV_FP8_QUANT_KERNEL, (tokens, heads), None, next_pow2(head_dim), None, 4, 1)


def attention_decode_fp8_config(batch: int, heads: int, kv_heads: int, head_dim: int, kv_len: int,
                                kv_block: int | None, *, on_gpu: bool = True) -> LaunchConfig:
    """The fp16-cache decode kernel's config at 8 bits (kernels/launch_config.py
    attention_decode_config), under the fp8 kernel's name."""
    cfg = attention_decode_config(batch, heads, kv_heads, head_dim, kv_len, 8, kv_block, on_gpu=on_gpu)
    return LaunchConfig(DECODE_FP8_KERNEL, cfg.grid, cfg.block_m, cfg.block_n, cfg.block_k,
                        cfg.num_warps, cfg.num_stages, cfg.split_k)

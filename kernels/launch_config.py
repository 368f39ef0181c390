"""Launch-config choice (grid, block sizes, warps, stages, split) for every kernel family of mpsim's
(the config record every library room builds on; other libraries' configs: mpsim/library/*.py).

No triton import: the launchers, the trace synthesizer and the simulator all call these functions, so
a synthesized trace carries the grid and config the real kernel launches with. `on_gpu=False` (the
Triton interpreter) returns one fixed small config per family, since the interpreter cannot autotune.
"""

from __future__ import annotations

from dataclasses import dataclass

from mpsim.kernels.loop_stages import (  # noqa: F401 (re-exported: the launchers' one import)
    LOOP_STAGES_KEY,
    LOOP_STAGES_SWITCH,
    gemv_loop_stages,
    loop_stages_of,
    loop_stages_on,
    loop_stages_or_none,
    one_row_stages,
    prefetched_in_registers,
)
from mpsim.kernels.lut_words import (  # noqa: F401 (re-exported: the launchers' one import)
    LUT_WORDS_KEY,
    lut_words_of,
    staged_extra,
)
from mpsim.kernels.partial_runs import (  # noqa: F401 (re-exported: the launchers' one import)
    ANYPREC_PARTIAL_TRIPS,
    PARTIAL_MAX_BITS,
    PARTIAL_MAX_TRIPS,
    anyprec_partial_trips,
    gemv_k_unit,
    gemv_partial_trips,
    gemv_trips,
)
from mpsim.kernels.sz_words import (  # noqa: F401 (re-exported: the launchers' one import)
    SZ_WORDS_KEY,
    sz_words_of,
)

GPU_SMS = 132            # H100/H200 SXM (docs/sources.md#h100-sxm5-80gb); shape-only: synth == capture


@dataclass(frozen=True)
class LaunchConfig:
    kernel: str
    grid: tuple[int, ...]
    block_m: int | None
    block_n: int | None
    block_k: int | None
    num_warps: int
    num_stages: int
    split_k: int = 1
    group_m: int | None = None  # tiled GEMM only: row tiles per band of the grouped tile order
    # further integer settings of kernels that are not mpsim's (stream_k, kv_append, l2_warm, ...)
    extra: tuple[tuple[str, int], ...] = ()

    def config_dict(self) -> dict[str, int]:
        out = {"num_warps": self.num_warps, "num_stages": self.num_stages, "split_k": self.split_k}
        for key in ("block_m", "block_n", "block_k", "group_m"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        out.update(self.extra)
        return out

    def name(self) -> str:
        """A short label: kernel and tile (what `mpsim op --config best` prints)."""
        parts = [f"{self.block_m}x{self.block_n}x{self.block_k}" if self.block_k else
                 f"{self.block_m}x{self.block_n}", f"w{self.num_warps}", f"s{self.num_stages}"]
        if self.split_k > 1:
            parts.append(f"split{self.split_k}")
        parts += [f"{k}{v}" for k, v in self.extra if v not in (0, None)]
        return f"{self.kernel}[{' '.join(parts)}]"

    @property
    def programs(self) -> int:
        total = 1
        for g in self.grid:
            total *= g
        return total


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def next_pow2(x: int) -> int:
    return 1 << max(0, (x - 1).bit_length())


GEMV_MAX_ROWS = 16       # M <= 16 takes the GEMV path (PMPD fuses up to 8 rows; TurboMind ~16)
TARGET_PROGRAMS = 264    # ~2 waves of CTAs on a 132-SM Hopper part: enough to saturate HBM
PAGED_BLOCK = 64         # TurboMind's paged KV block (docs/sources.md#turbomind-formats)
ROWWISE_BLOCK_GPU = 4096
ROWWISE_BLOCK_CPU = 128
GEMM_GROUP_M = 8         # tiled GEMM: output tiles run in bands of 8 row tiles that share W tiles in L2

DECODE_ATTENTION_KERNEL = "attention_decode_kernel"  # its launch config and KV buckets key on it


def _format_tag(w_format: str) -> str:
    if w_format == "fp16":
        return "fp16"
    if w_format == "anyprec":
        return "anyprec"
    if w_format.endswith("-group"):
        return "group"
    raise ValueError(f"unknown w_format {w_format!r}; expected fp16, int{{8,4,3,2}}-group or anyprec")


def gemm_config(m: int, n: int, k: int, w_format: str, w_bits: int, group_size: int | None,
                *, on_gpu: bool = True) -> LaunchConfig:
    """GEMV (M <= 16, split-K over programs) or tiled GEMM (dequantize the W tile, then tl.dot).

    A fixed heuristic, no autotuning, so this is the config the launcher runs with (kernels/gemm*.py)
    and the one synthesized traces carry. `k` is the logical K; `group_size` the resolved G.
    """
    tag = _format_tag(w_format)
    if m < 1 or n < 1 or k < 1:
        raise ValueError(f"gemm_config: m, n, k must be positive, got m={m}, n={n}, k={k}")
    if m <= GEMV_MAX_ROWS:
        return _gemv_config(m, n, k, tag, w_bits, group_size, on_gpu)
    return _gemm_tile_config(m, n, k, tag, w_bits, group_size, on_gpu)


def _gemv_config(m: int, n: int, k: int, tag: str, w_bits: int, group_size: int | None,
                 on_gpu: bool) -> LaunchConfig:
    """One program per BLOCK_N weight rows x K split; the split fills ~2 waves of programs.

    BLOCK_M = 1 takes the multiply-and-row-sum path; 2..16 rows a swap-AB tl.dot (MMA N side >= 8).
    Tiles of 4096 weights (gemv_tile) compile for sm_90 without spills for every format
    (tests/kernels/test_kern_gemm_compile.py), and every split keeps at least 2 K iterations so the
    3-stage load pipeline has work to overlap.
    """
    block_m = next_pow2(m)
    if not on_gpu:
        # Interpreter: its cost is per program and per op, not per element, so wide tiles run the
        # tiny model fastest; K >= 1024 still takes the split-K reduction (tests force narrower
        # configs to cover awkward splits).
        block_n, block_k = 128, _fit_block_k(256, tag, group_size)
        if gemv_trips(tag, w_bits, group_size, block_m, 32) > 1:
            block_k = 32  # the GPU's fp16 partial sums (gemv_group.py, gemm_anyprec.py)
        split_k = 2 if k >= 1024 else 1
        return LaunchConfig(f"gemv_{tag}_kernel", (cdiv(n, block_n), split_k), block_m, block_n,
                            block_k, 4, 1, split_k,
                            extra=staged_extra(tag, w_bits, group_size, block_m, block_k))
    block_n, block_k = gemv_tile(tag, w_bits, block_m)
    block_k = _fit_block_k(block_k, tag, group_size)
    n_blocks = cdiv(n, block_n)
    max_split = max(1, k // (2 * block_k))
    split_k = min(max_split, max(1, cdiv(TARGET_PROGRAMS, n_blocks)), 16)
    # whole K units per split and no empty split (of the logical K, so of the padded one too)
    tiles = cdiv(k, gemv_k_unit(tag, w_bits, group_size, block_m, block_k))
    split_k = cdiv(tiles, cdiv(tiles, split_k))
    return LaunchConfig(f"gemv_{tag}_kernel", (n_blocks, split_k), block_m, block_n, block_k,
                        4, 3, split_k, extra=gemv_loop_stages(block_m, one_row_stages(tag, w_bits))
                        + staged_extra(tag, w_bits, group_size, block_m, block_k))


# GEMV tiles (BLOCK_N, BLOCK_K): the candidate (GEMV_TILES) whose compiled K loop costs the fewest
# cycles per weight for this format and row count: the most loaded pipe's lanes per weight over its
# issue rate (mpsim/sim/gpu/sass_table.py, counted by scripts/sass_mix.py from the sm_90a SASS; ties
# to the smaller tile). One activation row multiplies on CUDA cores into per-lane partial sums, more
# rows on the tensor cores (group and Hopper's <= 3-bit any-precision tiles in the operand's layout,
# docs/kernels.md#dot-operand-tiles): different code, different tiles.
# Exception: fp16 with one row stays 64 x 64. Its 32 x 256 loop issues fewer slots per weight (2.89
# against 3.19 since issue 22's vector activation load), but fp16 streams at the DRAM bound, where
# 64 x 64's grid splits K better (mpsim simulate, vicuna-7b decode on h200-sxm: 4.493 against 4.520
# ms per token).
GEMV_TILE_ONE_ROW: dict[object, tuple[int, int]] = {
    "fp16": (64, 64), ("group", 8): (64, 128), ("group", 4): (256, 32), ("group", 3): (256, 32),
    ("group", 2): (256, 32), ("anyprec", 3): (256, 32), ("anyprec", 2): (256, 32),
    "anyprec": (64, 128)}
GEMV_TILE_ROWS: dict[object, tuple[int, int]] = {
    "fp16": (64, 128), ("group", 8): (64, 128), ("group", 4): (64, 128), ("group", 3): (64, 128),
    ("group", 2): (64, 128), ("anyprec", 8): (32, 128), ("anyprec", 3): (64, 128),
    ("anyprec", 2): (64, 128), "anyprec": (32, 256)}
GEMV_TILE_DEFAULT = (16, 256)


def gemv_tile(tag: str, w_bits: int, block_m: int) -> tuple[int, int]:
    """(BLOCK_N, BLOCK_K before fitting to the group) of the GEMV for a format and BLOCK_M."""
    table = GEMV_TILE_ONE_ROW if block_m == 1 else GEMV_TILE_ROWS
    return table.get((tag, w_bits), table.get(tag, GEMV_TILE_DEFAULT))


def _gemm_tile_config(m: int, n: int, k: int, tag: str, w_bits: int, group_size: int | None,
                      on_gpu: bool) -> LaunchConfig:
    """Output tiles over the whole K: 128 x 128 (8 warps) when that still gives one tile per SM,
    else 64 x 64 (4 warps). K tiles of 64 for fp16, 32 for quantized weights (the dequantized tile
    lives in registers: 32-column tiles keep every format under ~170 registers, no spills). Tiles
    run in bands of group_m = GEMM_GROUP_M row tiles (the kernel's GROUP_M; recorded in the trace)."""
    if not on_gpu:
        # Interpreter: as for the GEMV, few wide programs beat many small ones (its cost is per
        # program and per op); the tiny model's prefill GEMMs take 1-2 programs per 128 columns.
        bm, bn = 64, 128
        bk = _fit_block_k(128, tag, group_size)
        return LaunchConfig(f"gemm_{tag}_kernel", (cdiv(m, bm) * cdiv(n, bn),), bm, bn, bk, 4, 1,
                            group_m=GEMM_GROUP_M,
                            extra=staged_extra(tag, w_bits, group_size, bm, bk))
    big = cdiv(m, 128) * cdiv(n, 128) >= GPU_SMS
    bm, bn, warps = (128, 128, 8) if big else (64, 64, 4)
    bk = 64 if tag == "fp16" else _fit_block_k(32, tag, group_size)
    if tag == "anyprec":
        # the looked-up tile must give each of the 4 warps' 128 threads a plane word of its own
        # (BLOCK_N x BLOCK_K / 32 >= 128), else it reaches the dot through shared memory with a
        # barrier per few loads (sm_90a SASS, scripts/sass_mix.py, 2-4 bits: 128 x 128 x 32 with 8
        # warps 18.9-29.1 slots per weight, with 4 7.5-9.9; 64 x 64 x 32 18.6-28.3, x 64 8.8-11.3)
        warps, bk = 4, 32 if big else 64
    stages = 3  # fp16 128x128x64: 96 KiB of shared memory, within every listed GPU's limit
    return LaunchConfig(f"gemm_{tag}_kernel", (cdiv(m, bm) * cdiv(n, bn),), bm, bn, bk, warps,
                        stages, group_m=GEMM_GROUP_M,
                        extra=staged_extra(tag, w_bits, group_size, bm, bk))


def _fit_block_k(block_k: int, tag: str, group_size: int | None) -> int:
    """Halve BLOCK_K (a power of two >= 32) until a K tile never straddles a quantization group.

    Group kernels read one scale per row per min(BLOCK_K, G) columns, so one of the two must divide
    the other; G is a multiple of 32 (docs/formats.md), so 32 always fits.
    """
    if tag != "group" or not group_size:
        return block_k
    while block_k > 32 and (group_size % block_k if block_k <= group_size else block_k % group_size):
        block_k //= 2
    return block_k


# Decode attention wants ~4 resident CTAs per SM on a 132-SM part to keep HBM busy (one CTA of 4
# warps streaming one KV head cannot), but each split should stream at least DECODE_MIN_TILES tiles
# so the in-launch reduction stays a small fraction of the work.
DECODE_TARGET_PROGRAMS = 4 * GPU_SMS
DECODE_MIN_TILES = 4
DECODE_MAX_SPLITS = 64
DECODE_MAX_SPLITS_CPU = 8


def decode_group_block(num_q_heads: int, num_kv_heads: int) -> int:
    """Query heads one decode program holds: 1 (MHA, a vector dot) or the GQA group padded to >= 16
    rows so QK^T and PV run as tl.dot (the MMA needs 16 rows)."""
    if num_kv_heads < 1 or num_q_heads % num_kv_heads:
        raise ValueError(f"num_q_heads={num_q_heads} must be a multiple of "
                         f"num_kv_heads={num_kv_heads}")
    group = num_q_heads // num_kv_heads
    return 1 if group == 1 else max(16, next_pow2(group))


def attention_decode_config(batch: int, num_q_heads: int, num_kv_heads: int, head_dim: int,
                            kv_len: int, k_bits: int, kv_block: int | None,
                            *, on_gpu: bool = True) -> LaunchConfig:
    """Flash-decoding over (sequence, KV head, KV split); the last split to finish reduces.

    One program serves all query heads of a KV head (GQA), so K/V are read once per group.
    block_m = query-head rows, block_n = KV tokens per tile, block_k = padded head_dim,
    split_k = KV splits. The split count depends on kv_len only through the grid, not the kernel's
    constexprs, so a growing KV length does not recompile.
    """
    block_g = decode_group_block(num_q_heads, num_kv_heads)
    block_d = next_pow2(head_dim)
    if on_gpu:
        block_n, warps, stages = 64, 4, 2
        wanted = cdiv(DECODE_TARGET_PROGRAMS, batch * num_kv_heads)
        cap = DECODE_MAX_SPLITS
        min_tiles = DECODE_MIN_TILES
    else:
        block_n, warps, stages = 16, 4, 1
        wanted, cap, min_tiles = cdiv(max(kv_len, 1), 32), DECODE_MAX_SPLITS_CPU, 1
    tiles = cdiv(max(kv_len, 1), block_n)
    splits = max(1, min(wanted, tiles // min_tiles, cap))
    splits = cdiv(tiles, cdiv(tiles, splits))  # no trailing empty split for the longest sequence
    return LaunchConfig(DECODE_ATTENTION_KERNEL, (batch, num_kv_heads, splits), block_g,
                        block_n, block_d, warps, stages, splits)


GRAPH_KV_ROUND = 256  # CUDA-graph decoding: cache capacity in multiples of this many tokens


def graph_kv_capacity(tokens: int) -> int:
    """The KV-cache capacity a CUDA-graph decoder allocates for `tokens` (prompt + new tokens), rounded
    up so graphs captured for one length serve nearby ones."""
    return cdiv(max(tokens, 1), GRAPH_KV_ROUND) * GRAPH_KV_ROUND


def attention_decode_graph_config(batch: int, num_q_heads: int, num_kv_heads: int, head_dim: int,
                                  capacity: int, k_bits: int, kv_block: int | None,
                                  *, on_gpu: bool = True) -> LaunchConfig:
    """Decode attention under CUDA-graph replay: the grid cannot follow the KV length (one graph serves
    every step), so the splits are sized for the cache capacity, as `attention_decode_config` would
    size them for a cache that full. Each sequence's true length is read from device memory, so
    splits past it stream nothing. The engine launches with `max_kv_len=capacity`; synthesis calls
    this for `--cuda-graphs` traces."""
    return attention_decode_config(batch, num_q_heads, num_kv_heads, head_dim, capacity, k_bits, kv_block,
                                   on_gpu=on_gpu)


def decode_split_tokens(kv_len: int, cfg: LaunchConfig) -> int:
    """KV tokens per split: whole tiles, so every split starts on a tile edge."""
    assert cfg.block_n is not None
    tiles = cdiv(max(kv_len, 1), cfg.block_n)
    return cdiv(tiles, cfg.split_k) * cfg.block_n


def attention_prefill_config(batch: int, q_len: int, num_q_heads: int, num_kv_heads: int,
                             head_dim: int, *, on_gpu: bool = True) -> LaunchConfig:
    """Causal flash attention over the prompt: programs over (query tile, sequence x query head).

    block_m = query rows per program, block_n = keys per tile, block_k = padded head_dim.
    """
    block_d = next_pow2(head_dim)
    if on_gpu:
        bm, bn, warps, stages = 128, 64, 8, 2
    else:
        bm, bn, warps, stages = 16, 16, 4, 1
    return LaunchConfig("attention_prefill_kernel", (cdiv(q_len, bm), batch * num_q_heads), bm, bn,
                        block_d, warps, stages)


def kv_quant_config(tokens: int, num_kv_heads: int, head_dim: int, bits: int,
                    *, on_gpu: bool = True) -> LaunchConfig:
    """Programs over (block_m new tokens, KV head); each quantizes those tokens' K and V rows.

    block_m = tokens per program, block_n = padded head_dim.
    """
    block_t, warps = (8, 4) if on_gpu else (16, 4)
    return LaunchConfig("kv_quant_kernel", (cdiv(tokens, block_t), num_kv_heads), block_t,
                        next_pow2(head_dim), None, warps, 1)


def rowwise_config(kernel: str, rows: int, width: int, *, on_gpu: bool = True) -> LaunchConfig:
    """Norms, RoPE, activations, residual add, embedding gather, argmax: one program per row.

    block_n is the chunk a program walks its row in; wider rows loop (the CPU chunk is small so the
    interpreter tests exercise the loop at widths of a few hundred).
    """
    block = min(next_pow2(width), ROWWISE_BLOCK_GPU if on_gpu else ROWWISE_BLOCK_CPU)
    warps = min(16, max(1, block // 256)) if on_gpu else 4
    return LaunchConfig(kernel, (rows,), None, block, None, warps, 1)


# ---- candidate sets: what an autotuner may choose from, per architecture ---------------------------
# Tiled GEMM tiles (BLOCK_M tokens x BLOCK_N weights x BLOCK_K, warps, stages). Hopper: the H100
# configs of Triton's matmul tutorial (python/tutorials/03-matrix-multiplication.py,
# get_cuda_autotune_config) plus the heuristic's two; Ampere: 128 x 128 and its neighbours. A quantized
# weight's dequantized tile lives in registers, so its K tile is 32 (fitted to the group).
HOPPER_GEMM_TILES = ((128, 256, 64, 8, 3), (64, 256, 32, 4, 4), (128, 128, 64, 8, 3),
                     (128, 128, 32, 4, 4), (128, 64, 32, 4, 4), (64, 128, 32, 4, 4),
                     (64, 64, 64, 4, 3), (128, 32, 32, 4, 4), (64, 32, 32, 2, 5), (32, 64, 32, 2, 5))
AMPERE_GEMM_TILES = ((128, 128, 32, 4, 3), (128, 128, 64, 8, 3), (64, 128, 32, 4, 4),
                     (128, 64, 32, 4, 4), (64, 64, 64, 4, 3), (64, 64, 32, 4, 4))
# GEMV (up to 64 rows): BLOCK_N x BLOCK_K tiles of 4096 and 8192 weights (the dequantized tile in
# registers; at 8192 only the any-precision kernels spill, one local load or store per trip, which
# the instruction table counts) and split-K widths; every split keeps >= 2 K trips.
GEMV_TILES = ((16, 256), (32, 128), (64, 64), (32, 256), (64, 128), (256, 32))
GEMV_ROW_TILES = (*GEMV_TILES, (128, 128))  # 2..64 rows also 16384 weights (candidate only)
GEMV_SPLITS = (1, 2, 4, 8, 16)
GEMV_CANDIDATE_MAX_ROWS = 64
ARCHITECTURES = ("hopper", "ampere")


def gemm_candidates(m: int, n: int, k: int, w_format: str, w_bits: int, group_size: int | None,
                    arch: str = "hopper") -> list[LaunchConfig]:
    """Every config an autotuner of mpsim's GEMM/GEMV kernels would try for this shape on `arch`
    (the heuristic's own choice included): split-K GEMV configs up to 64 rows, tiled GEMM tiles
    from 17 rows. Order is fixed (the first of equal times wins)."""
    if arch not in ARCHITECTURES:
        raise ValueError(f"unknown architecture {arch!r}; expected one of {ARCHITECTURES}")
    tag = _format_tag(w_format)
    out = [gemm_config(m, n, k, w_format, w_bits, group_size)]
    kp = k
    if m <= GEMV_CANDIDATE_MAX_ROWS:
        block_m = next_pow2(m)
        for bn, bk0 in GEMV_TILES if block_m == 1 else GEMV_ROW_TILES:
            bk = _fit_block_k(bk0, tag, group_size)
            tiles = cdiv(kp, gemv_k_unit(tag, w_bits, group_size, block_m, bk))
            for split in GEMV_SPLITS:
                if split > 1 and (cdiv(kp, split) < 2 * bk or cdiv(tiles, cdiv(tiles, split)) != split):
                    continue
                out.append(LaunchConfig(f"gemv_{tag}_kernel", (cdiv(n, bn), split), block_m, bn, bk,
                                        4, 3, split,
                                        extra=gemv_loop_stages(block_m, one_row_stages(tag, w_bits))
                                        + staged_extra(tag, w_bits, group_size, block_m, bk)))
    if m > GEMV_MAX_ROWS:
        for bm, bn, bk, warps, stages in (HOPPER_GEMM_TILES if arch == "hopper" else AMPERE_GEMM_TILES):
            bk = bk if tag == "fp16" else _fit_block_k(32, tag, group_size)
            out.append(LaunchConfig(f"gemm_{tag}_kernel", (cdiv(m, bm) * cdiv(n, bn),), bm, bn, bk,
                                    warps, stages, group_m=GEMM_GROUP_M,
                                    extra=staged_extra(tag, w_bits, group_size, bm, bk)))
    seen: set[tuple[object, ...]] = set()
    unique = []
    for c in out:
        key = (c.kernel, c.grid, c.block_m, c.block_n, c.block_k, c.num_warps, c.num_stages, c.split_k)
        if key not in seen:
            seen.add(key)
            unique.append(c)
    return unique

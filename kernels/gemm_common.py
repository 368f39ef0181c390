"""What the three weight-only GEMM families share: the split-K epilogue, checks, workspaces, recording.

Every GEMM/GEMV kernel keeps its accumulator as (BLOCK_N, BLOCK_M): the dequantized weight tile is the
left operand of `tl.dot` ("swap AB"), so on Hopper it can feed wgmma straight from registers while
the small activation tile comes from shared memory, and few activation rows pad the MMA's N side (8)
rather than its M side (64).

Split-K reduction inside the one launch (kernels_api pinned interface): each program stores its fp32
partial in a workspace, a CTA barrier makes every thread's stores happen before one acq_rel atomic
increment of the tile's counter, and the program that sees `SPLIT_K - 1` sums all partials in split
order (deterministic whatever the arrival order), adds the bias, writes fp16 and resets the counter
to 0, so the cached workspace is reused without a memset.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import triton
import triton.language as tl

from mpsim.kernels import autotune, runtime
from mpsim.kernels.launch_checks import check_contiguous, check_tensor, launch_recorded
from mpsim.kernels.launch_config import (
    LaunchConfig,
    gemm_candidates,
    gemm_config,
    loop_stages_of,
    loop_stages_or_none,
)
from mpsim.kernels.lut_words import LUT_WORDS_KEY
from mpsim.kernels.sz_words import SZ_WORDS_KEY

# a K loop's tl.range(num_stages=loop_stages(LOOP_STAGES)): LOOP_STAGES 0 leaves Triton's default
# (only loads that feed tl.dot as they are are pipelined), S > 0 pipelines every load of the loop
# S deep (cp.async into shared memory; docs/kernels.md#pipelined-k-loops)
loop_stages = triton.constexpr_function(loop_stages_or_none)


@triton.jit
def load_x_tile(x_ptr, offs_m, k0, M, K, stride_xm, BLOCK_K: tl.constexpr):
    """Activation tile (BLOCK_M, BLOCK_K) fp16, zero past M rows and past K (the weight's padding)."""
    offs_k = k0 + tl.arange(0, BLOCK_K)
    mask = (offs_m[:, None] < M) & (offs_k[None, :] < K)
    return tl.load(x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :], mask=mask, other=0.0)


@triton.jit
def load_x_gemv(x_ptr, offs_m, k0, M, K, stride_xm, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """The GEMV's activation tile: load_x_tile, except that one row is loaded as a vector and
    broadcast. A (1, BLOCK_K) load gets a layout of its own, and the compiler then converted the
    whole dequantized (BLOCK_N, BLOCK_K) weight tile to it through shared memory every K step
    (scripts/sass_mix.py: STS/LDSM and barriers in the loop); a vector is converted instead."""
    if BLOCK_M == 1:
        offs_k = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + offs_k, mask=offs_k < K, other=0.0)[None, :]
    else:
        x = load_x_tile(x_ptr, offs_m, k0, M, K, stride_xm, BLOCK_K)
    return x


@triton.jit
def gemv_program(K_PER_SPLIT, KP, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr):
    """A split-K GEMV program's (pid_n, pid_k, offs_n, offs_m, k_lo, k_hi): BLOCK_N weight rows of
    N tile pid_n over K split pid_k's columns [k_lo, k_hi) of the padded K."""
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, BLOCK_M)
    k_lo = pid_k * K_PER_SPLIT
    k_hi = tl.minimum(k_lo + K_PER_SPLIT, KP)
    if BLOCK_M > 1:
        # No split is empty (split_columns checks it). Told so, the compiler drops the tensor-core K
        # loop's zero-trip path, whose zeroed accumulator made ptxas serialize the loop's wgmmas
        # (its C7515 note: each waited for before the next; docs/kernels.md#unserialized-wgmma).
        # The one-row loops (no MMA) are left as they were: there it only moved a few instructions.
        tl.assume(k_hi > k_lo)
    return pid_n, pid_k, offs_n, offs_m, k_lo, k_hi


@triton.jit
def gemv_acc(BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """The GEMV's fp32 accumulator: one per weight lane (BLOCK_N, BLOCK_K) for one activation row,
    reduced once after the K loop (gemv_total), else the (BLOCK_N, BLOCK_M) MMA accumulator."""
    if BLOCK_M == 1:
        acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    else:
        acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    return acc


@triton.jit
def mma_rows(w, x, acc, BLOCK_M: tl.constexpr):
    """acc += w (BLOCK_N, BLOCK_K) @ x (BLOCK_M, BLOCK_K)^T in fp32, on gemv_acc's accumulator.

    One activation row: a broadcast multiply-add into per-lane partial sums (one FFMA per weight),
    no cross-lane reduction inside the K loop: reducing every K tile with warp shuffles made the
    loop load/store-bound (4-5 LSU lanes per weight in the sm_90a SASS, scripts/sass_mix.py).
    More rows: the tensor-core dot."""
    if BLOCK_M == 1:
        acc += w.to(tl.float32) * x.to(tl.float32)
    else:
        acc = tl.dot(w, tl.trans(x), acc)
    return acc


@triton.jit
def gemv_total(acc, BLOCK_M: tl.constexpr):
    """gemv_acc's accumulator as (BLOCK_N, BLOCK_M): the one row's lane sums reduced once."""
    if BLOCK_M == 1:  # noqa: SIM108 (a static branch on a constexpr, as in gemv_acc)
        out = tl.sum(acc, axis=1)[:, None]
    else:
        out = acc
    return out


@triton.jit
def store_output(acc, out_ptr, bias_ptr, offs_m, offs_n, M, N, stride_om,
                 HAS_BIAS: tl.constexpr):
    """out[m, n] = fp16(acc[n, m] + bias[n]), the bias added in fp32."""
    n_mask = offs_n < N
    if HAS_BIAS:
        bias = tl.load(bias_ptr + offs_n, mask=n_mask, other=0.0).to(tl.float32)
        acc += bias[:, None]
    ptrs = out_ptr + offs_m[None, :] * stride_om + offs_n[:, None]
    tl.store(ptrs, acc.to(tl.float16), mask=n_mask[:, None] & (offs_m[None, :] < M))


@triton.jit
def splitk_finish(acc, out_ptr, bias_ptr, ws_ptr, cnt_ptr, offs_m, offs_n, tile_id, pid_k,
                  M, N, stride_om, HAS_BIAS: tl.constexpr, SPLIT_K: tl.constexpr):
    """Write the output directly (SPLIT_K == 1) or via the last-arriving program's ordered reduction.

    Workspace: fp32 (SPLIT_K, M, N) contiguous; counters: int32, one per N tile, zero between launches.
    """
    if SPLIT_K == 1:
        store_output(acc, out_ptr, bias_ptr, offs_m, offs_n, M, N, stride_om, HAS_BIAS)
    else:
        mask = (offs_n[:, None] < N) & (offs_m[None, :] < M)
        part = ws_ptr + offs_m[None, :] * N + offs_n[:, None]
        tl.store(part + pid_k * M * N, acc, mask=mask)
        # Every thread's partial must be stored before the one thread that performs the atomic
        # publishes it; the barrier plus the release half of acq_rel make them visible GPU-wide.
        tl.debug_barrier()
        arrived = tl.atomic_add(cnt_ptr + tile_id, 1, sem="acq_rel")
        if arrived == SPLIT_K - 1:
            total = tl.zeros_like(acc)
            for s in range(SPLIT_K):
                # .cg: read through L2, never a stale L1 line of another SM's partial.
                total += tl.load(part + s * M * N, mask=mask, other=0.0, cache_modifier=".cg")
            store_output(total, out_ptr, bias_ptr, offs_m, offs_n, M, N, stride_om, HAS_BIAS)
            tl.atomic_xchg(cnt_ptr + tile_id, 0)


@triton.jit
def grouped_tile(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """Tile (pid_m, pid_n) of a 1-D grid in GROUP_M-row bands, so neighbours share W tiles in L2."""
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * num_n
    first_m = (pid // per_group) * GROUP_M
    rows = min(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % rows
    pid_n = (pid % per_group) // rows
    return pid_m, pid_n


class SplitKWorkspaces:
    """fp32 partials and zeroed int32 tile counters, cached per (device, split_k, M, N, tiles).

    One cache per process is enough because kernels of one stream run in order; launches on two
    streams at once must not share a shape (documented in docs/kernels.md).
    """

    def __init__(self) -> None:
        self._cache: dict[tuple[str, int, int, int, int], tuple[torch.Tensor, torch.Tensor]] = {}

    def get(self, device: torch.device, split_k: int, m: int, n: int,
            tiles: int) -> tuple[torch.Tensor, torch.Tensor]:
        key = (str(device), split_k, m, n, tiles)
        if key not in self._cache:
            ws = torch.empty((split_k, m, n), dtype=torch.float32, device=device)
            counters = torch.zeros(tiles, dtype=torch.int32, device=device)
            self._cache[key] = (ws, counters)
        return self._cache[key]

    def discard(self, device: torch.device, split_k: int, m: int, n: int, tiles: int) -> None:
        """Forget a workspace whose counters a failed launch may have left non-zero."""
        self._cache.pop((str(device), split_k, m, n, tiles), None)


WORKSPACES = SplitKWorkspaces()


def launch(kernel: Any, cfg: LaunchConfig, record: dict[str, Any] | None, **kwargs: Any) -> None:
    """Launch `kernel` on cfg.grid with keyword args, as one trace row when a recorder is active
    (record None: an autotuning trial, not recorded)."""
    launch_recorded(cfg, "gemm", record, lambda: kernel[cfg.grid](
        **kwargs, num_warps=cfg.num_warps, num_stages=cfg.num_stages))


def launch_split_k(kernel: Any, cfg: LaunchConfig, record: dict[str, Any] | None, device: torch.device,
                   m: int, n: int, **kwargs: Any) -> None:
    """Launch a GEMV kernel with its cached workspace and counters (none when split_k == 1)."""
    if cfg.split_k == 1:
        launch(kernel, cfg, record, ws_ptr=None, cnt_ptr=None, **kwargs)
        return
    tiles = cfg.grid[0]
    ws, counters = WORKSPACES.get(device, cfg.split_k, m, n, tiles)
    try:
        launch(kernel, cfg, record, ws_ptr=ws, cnt_ptr=counters, **kwargs)
    except BaseException:
        WORKSPACES.discard(device, cfg.split_k, m, n, tiles)
        raise


def launch_gemv_or_gemm(gemv: Any, gemm: Any, cfg: LaunchConfig, record: dict[str, Any] | None,
                        device: torch.device, m: int, n: int, k_loop: int,
                        k_unit: Callable[[LaunchConfig], int] | None = None,
                        gemv_args: dict[str, Any] | None = None,
                        keyed_args: Mapping[str, Callable[[], dict[str, Any]]] | None = None,
                        **kwargs: Any) -> None:
    """Run the path gemm_config chose: the split-K GEMV over k_loop columns (splits start on
    multiples of k_unit(cfg), BLOCK_K by default), or the tiled GEMM in the config's GROUP_M-row
    bands (check_config makes sure a tiled config has group_m). gemv_args: the GEMV's own extra
    arguments (the tiled GEMM does not take them); keyed_args: config_args'."""
    kwargs = {**kwargs, **config_args(cfg, keyed_args)}
    if cfg.kernel == gemv.__name__:
        unit = k_unit(cfg) if k_unit else cfg.block_k or 1
        stages = loop_stages_of(cfg.extra)
        launch_split_k(gemv, cfg, record, device, m, n,
                       K_PER_SPLIT=split_columns(cfg, k_loop, unit),
                       SPLIT_K=cfg.split_k, **(gemv_args or {}),
                       **({"LOOP_STAGES": stages} if stages else {}), **kwargs)
    else:
        launch(gemm, cfg, record, GROUP_M=cfg.group_m, **kwargs)


KEYED = (SZ_WORDS_KEY, LUT_WORDS_KEY)  # config keys that change a kernel's arguments


def config_args(cfg: LaunchConfig,
                keyed_args: Mapping[str, Callable[[], dict[str, Any]]] | None) -> dict[str, Any]:
    """The arguments a config's keys set to 1 add or replace (sz_words: the group kernels' scale-zero
    words, kernels/sz_words.py; lut_words: any-precision's LUT words, kernels/lut_words.py), each
    made by keyed_args[key] when the launch runs; a key the launcher has no maker for is an error."""
    out: dict[str, Any] = {}
    for key, value in cfg.extra:
        if key in KEYED and value:
            if keyed_args is None or key not in keyed_args:
                raise ValueError(f"config: {cfg.name()} asks for {key}, which this kernel does not read")
            out.update(keyed_args[key]())
    return out


def run_gemm(gemv: Any, gemm: Any, config: LaunchConfig | None, record: dict[str, Any],
             device: torch.device, k_loop: int, check: Callable[[LaunchConfig], None],
             k_unit: Callable[[LaunchConfig], int] | None = None,
             variant: tuple[Any, Callable[[LaunchConfig], LaunchConfig], dict[str, Any]] | None = None,
             gemv_args: dict[str, Any] | None = None,
             keyed_args: Mapping[str, Callable[[], dict[str, Any]]] | None = None,
             **args: Any) -> LaunchConfig:
    """Launch one GEMM/GEMV (as one trace row when recording) and return the config it ran:
    `config` when given, else the heuristic gemm_config, or on a GPU with autotuning on the fastest
    candidate of the device's architecture (kernels/autotune.py; its trial launches are not
    recorded). `record` holds the shape columns; `args` the kernel arguments but the block sizes.
    `variant` (kernel, rename, extra arguments): a second GEMV kernel (the group GEMV's inline-asm
    twin) run, with the extra arguments, where rename(cfg) names it (the trace row records it);
    `gemv_args`: the plain GEMV kernel's own extra arguments; `keyed_args` as config_args'."""
    m, n = record["m"], record["n"]

    def run(cfg: LaunchConfig, columns: dict[str, Any] | None) -> LaunchConfig:
        kernel, extra, own = gemv, {}, gemv_args
        if variant is not None and variant[1](cfg).kernel == variant[0].__name__:
            kernel, cfg, extra, own = variant[0], variant[1](cfg), variant[2], None
        check(cfg)
        launch_gemv_or_gemm(kernel, gemm, cfg, columns, device, m, n, k_loop, k_unit, own,
                            keyed_args, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
                            BLOCK_K=cfg.block_k, **args, **extra)
        return cfg

    cfg = config or choose_config(record, device, lambda c: run(c, None))
    return run(cfg, record)


def choose_config(record: dict[str, Any], device: torch.device,
                  trial: Callable[[LaunchConfig], None]) -> LaunchConfig:
    """The config a launch runs when none is forced (see run_gemm)."""
    m, n, k = record["m"], record["n"], record["k"]
    fmt, bits, group = record["w_format"], record["w_bits"], record["group_size"]
    gpu = runtime.on_gpu()
    if not gpu or not autotune.enabled():
        return gemm_config(m, n, k, fmt, bits, group, on_gpu=gpu)
    arch = autotune.gpu_arch(torch.cuda.get_device_capability(device))
    key = (fmt, bits, group, m, n, k, record["bias"], str(device))
    return autotune.TUNER.best(key, gemm_candidates(m, n, k, fmt, bits, group, arch), trial)


def k_per_split(k_loop: int, split_k: int, unit: int) -> int:
    """Columns each split covers: a multiple of `unit` (BLOCK_K, or the group when that is wider),
    so splits start on tile and group edges."""
    per = -(-k_loop // split_k)
    return -(-per // unit) * unit


def split_columns(cfg: LaunchConfig, k_loop: int, unit: int) -> int:
    """A split-K GEMV launch's K_PER_SPLIT (k_per_split), checked to leave no split empty: the
    kernels tell the compiler every split has a K tile (gemv_program's tl.assume)."""
    per = k_per_split(k_loop, cfg.split_k, unit)
    if (cfg.split_k - 1) * per >= k_loop:
        raise ValueError(f"config {cfg.name()}: {cfg.split_k} K splits of {per} columns leave the "
                         f"last of {k_loop} columns' splits empty; expected at most "
                         f"{-(-k_loop // per)} splits")
    return per


def fp16_bits(t: torch.Tensor) -> torch.Tensor:
    """An fp16 tensor's bit patterns as int32, 0..65535: the halves of the 32-bit table words the
    kernels read (the group weights' scale-zero words, any-precision's LUT words)."""
    return t.contiguous().view(torch.int16).to(torch.int32) & 0xFFFF


# ---- argument checks: every error names the argument and what was expected ----------------------

def check_weight(name: str, t: object, dtype: torch.dtype, ndim: int,
                 device: torch.device) -> torch.Tensor:
    """A weight tensor: this dtype, rank and device, and fully contiguous (kernels assume it)."""
    t = check_tensor(name, t, (dtype,), ndim, device=device)
    check_contiguous(name, t)
    return t


def check_activations(x: object, device: torch.device) -> torch.Tensor:
    """x: fp16 (M, K) with unit stride along K (any row stride), M >= 1."""
    t = check_tensor("x", x, (torch.float16,), 2, device=device)
    if t.shape[0] < 1 or t.shape[1] < 1:
        raise ValueError(f"x: expected at least one row and one column, got shape {tuple(t.shape)}")
    if t.stride(1) != 1:  # launch_checks lets a K of 1 through with any stride; the kernel cannot
        raise ValueError(f"x: the last axis must be contiguous (stride 1), got strides "
                         f"{tuple(t.stride())}")
    return t


def check_bias(bias: object, n: int, device: torch.device) -> torch.Tensor | None:
    if bias is None:
        return None
    b = check_tensor("bias", bias, (torch.float16,), 1, shape=(n,), device=device)
    check_contiguous("bias", b)
    return b


def check_config(cfg: LaunchConfig, kernels: Sequence[str], m: int, n: int) -> None:
    """A config passed in by hand must name one of this family's kernels and cover the output."""
    if cfg.kernel not in kernels:
        raise ValueError(f"config: kernel {cfg.kernel!r} is not one of {sorted(kernels)}")
    if cfg.block_m is None or cfg.block_n is None or cfg.block_k is None:
        raise ValueError(f"config: a GEMM config needs block_m/n/k, got {cfg}")
    tiles_n = -(-n // cfg.block_n)
    if cfg.kernel.startswith("gemv"):
        expected: tuple[int, ...] = (tiles_n, cfg.split_k)
        if m > cfg.block_m:
            raise ValueError(f"config: GEMV block_m={cfg.block_m} cannot hold M={m} rows")
    else:
        expected = (-(-m // cfg.block_m) * tiles_n,)
        if cfg.group_m is None or cfg.group_m < 1:
            raise ValueError(f"config: a tiled GEMM config needs group_m >= 1 (its tile bands), "
                             f"got {cfg.group_m}")
    if tuple(cfg.grid) != expected:
        raise ValueError(f"config: grid {cfg.grid} does not cover M={m}, N={n}; expected {expected}")

"""Row helpers every library room shares: a launch config applied to a trace-row dict, the costed
row as the trace stores it, size checks, the GEMM shape columns and the single-launch finisher
(what `mpsim op` prices). mpsim.launch_plan and every room (mpsim/library/*.py) build on these.
"""

from __future__ import annotations

import json
from typing import Any

from mpsim import limits
from mpsim.errors import MpsimInputError
from mpsim.kernels.launch_config import LaunchConfig
from mpsim.traces.accounting import launch_cost
from mpsim.traces.schema import KV_FORMAT_OF_BITS

Row = dict[str, Any]


def apply_config(row: Row, cfg: LaunchConfig) -> Row:
    """The row with the config's kernel, grid and config dict set."""
    row.update(kernel=cfg.kernel, grid=list(cfg.grid), config=cfg.config_dict())
    return row


def with_config(row: Row, key: str, value: int) -> Row:
    """A costed row (JSON config) with `key` set in its config (a property of the launch that the
    row's shape columns do not carry: a measurement's, or an attention's sliding window)."""
    cfg = json.loads(str(row["config"]))
    return {**row, "config": json.dumps({**cfg, key: value}, sort_keys=True)}


def costed(row: Row) -> Row:
    """The row as the trace stores it: grid and config as JSON text, analytic FLOPs and bytes."""
    cost = launch_cost(row)
    row.update(flops=cost.flops, bytes_read=cost.bytes_read, bytes_written=cost.bytes_written,
               grid=json.dumps(row["grid"]), config=json.dumps(row["config"], sort_keys=True))
    return row


def single(row: Row) -> Row:
    """One launch on its own (launch 0, stream 0, step 0, layer 0), its grid within the limit, costed."""
    row.update(launch_id=0, stream=0, step=0, layer=0)
    row.setdefault("tp", 1)  # one GPU, one stage unless the row is a collective's (mpsim/parallel.py)
    row.setdefault("stage", 0)
    row.setdefault("micro_batch", 0)
    ctas = 1
    grid = row["grid"]
    for extent in json.loads(grid) if isinstance(grid, str) else grid:
        ctas *= int(extent)
    limits.GRID_CTAS.check(ctas, f"{row['op']}: grid {row['grid']}")
    return costed(row)


def check_sizes(what: str, **sizes: int) -> None:
    """Every size >= 1 and within the stated limit on one dimension (mpsim/limits.py)."""
    for name, value in sizes.items():
        if value < 1:
            raise MpsimInputError(f"{what}: {name} must be >= 1, got {value}")
        limits.SHAPE_DIM.check(value, f"{what}: {name}")


def check_fp16_prefill(q_len: int, kv_bits: int) -> None:
    """Rooms whose prefill attends to the prompt's fresh 16-bit K/V (mpsim's, FA2) refuse another KV
    width there; a room with a quantized-KV prefill (TensorRT-LLM's FMHA, FA3's fp8 forward,
    FlashInfer's) does not call it."""
    if q_len > 1 and kv_bits != 16:
        raise MpsimInputError("attention: prefill (q_len > 1) attends to fp16 K/V; --kv-bits "
                              "applies to decode (q_len 1)")


def check_prefill_chunk(what: str, batch: int, q_len: int, kv_len: int, heads: int, kv_heads: int,
                        head_dim: int) -> None:
    """A prefill row's q_len queries are the last of its kv_len keys (a chunk after kv_len - q_len
    cached tokens, chunked prefill); more queries than keys is one error naming the row."""
    if q_len > kv_len:
        raise MpsimInputError(f"attention: {what} prefill row (batch {batch}, q_len {q_len}, kv_len "
                              f"{kv_len}, heads {heads}/{kv_heads}, head_dim {head_dim}) has more "
                              f"queries than keys; expected q_len <= kv_len (the queries are the "
                              f"last q_len of the kv_len positions)")


def prefill_kv_block(q_len: int, kv_len: int, kv_block: int | None) -> int | None:
    """The `kv_block` a prefill row keeps: a chunk over cached tokens reads them from the paged cache
    (its block table counted where the block size is given); a prompt attending within itself has
    none (its K/V are read as written, the rows' convention before chunks)."""
    return kv_block if q_len > 1 and kv_len > q_len else None


def check_kernel(cfg: LaunchConfig, *kernels: str) -> None:
    """A given config must be one of these kernels' (ValueError otherwise)."""
    if cfg.kernel not in kernels:
        raise ValueError(f"config for kernel {cfg.kernel!r} does not fit; expected {' or '.join(kernels)}")


def gemm_shape(m: int, n: int, k: int, fmt: str, bits: int, group_size: int | None,
               bias: bool) -> Row:
    """The shape columns of a GEMM row (fp16 activations and output)."""
    return {"op": "gemm", "m": m, "n": n, "k": k, "w_format": fmt, "w_bits": bits,
            "group_size": group_size, "a_dtype": "fp16", "out_dtype": "fp16", "bias": bias}


def attention_shape(batch: int, q_len: int, kv_len: int, heads: int, kv_heads: int, head_dim: int,
                    kv_bits: int, kv_format: str | None = None) -> Row:
    """The shape columns of a causal attention row over K/V of kv_bits in `kv_format` (None: the
    integer format of kv_bits, traces/schema.py KV_FORMAT_OF_BITS: mpsim's own caches)."""
    return {"op": "attention", "module": "attn", "batch": batch, "q_len": q_len, "kv_len": kv_len,
            "num_q_heads": heads, "num_kv_heads": kv_heads, "head_dim": head_dim,
            "k_bits": kv_bits, "v_bits": kv_bits, "causal": True,
            "kv_format": kv_format or KV_FORMAT_OF_BITS[kv_bits]}


def binding_window(kv_len: int, window: int) -> int:
    """The sliding window a kernel runs with: `window` keys a query sees (its own included), 0 when
    there is none or when it covers every key (kv_len <= window: FA's flash_api drops such a window,
    `window_size_left >= seqlen_k - 1` -> -1, and the tiles visited are the full causal ones)."""
    if window < 0:
        raise MpsimInputError(f"attention: a sliding window is >= 0 keys (0: none), got {window}")
    return window if 0 < window < kv_len else 0


def window_entry(kv_len: int, window: int) -> tuple[tuple[str, int], ...]:
    """A launch config's `window` entry: the window where it binds (`binding_window`), else none."""
    bound = binding_window(kv_len, window)
    return (("window", bound),) if bound else ()


def window_first_block(position: int, window: int, bn: int) -> int:
    """The first key tile a query at `position` (0-based, of kv keys) visits under a sliding window
    of `window` keys (0: none): hopper/block.h get_n_block_min_max, n_block_min = (m_idx_min +
    seqlen_k - seqlen_q - window_size_left) / kBlockN with window_size_left = W - 1 (vLLM's and
    SGLang's call; vLLM's Triton kernel's tile_start the same); 0 without a window."""
    return max(0, position - (window - 1)) // bn if window else 0


def fp8_cache(kv_bits: int) -> str | None:
    """The kv_format of a room whose only 8-bit cache is fp8 e4m3 (FA3, SGLang's FA3, TensorRT-LLM's
    attention op as its room prices it); None (by bits) otherwise."""
    return "fp8-e4m3" if kv_bits == 8 else None

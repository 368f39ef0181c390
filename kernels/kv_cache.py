"""The KV cache tensors of one layer (K or V), in docs/formats.md's contiguous or paged layout.

Contiguous: data (B, H_kv, T_max, D_bytes), scale/zero (B, H_kv, T_max). Paged: the same with the
first axis counting 64-token blocks and T_max = the block size; a block table (B, max_blocks) int32
maps token t of sequence b to block_table[b, t // 64], slot t % 64. fp16 caches have no scale/zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mpsim.kernels.launch_checks import check_choice, check_contiguous, check_positive, check_tensor
from mpsim.kernels.launch_config import PAGED_BLOCK

KV_CACHE_BITS = (16, 8, 4)


def row_bytes(head_dim: int, bits: int) -> int:
    """Last-axis length of the data tensor: D fp16 values, D uint8 codes, or D/2 packed int4 bytes."""
    return head_dim if bits in (16, 8) else head_dim // 2


@dataclass(frozen=True)
class KVCache:
    """One layer's K (or V) cache. `kv_block` is None for a contiguous cache, the block size if paged."""

    data: torch.Tensor
    scale: torch.Tensor | None
    zero: torch.Tensor | None
    bits: int
    head_dim: int
    kv_block: int | None = None

    def __post_init__(self) -> None:
        check_choice("KVCache.bits", self.bits, KV_CACHE_BITS)
        check_positive("KVCache.head_dim", self.head_dim)
        if self.bits == 4 and self.head_dim % 2:
            raise ValueError(f"KVCache.head_dim={self.head_dim}: int4 KV needs an even head_dim")
        dtype = torch.float16 if self.bits == 16 else torch.uint8
        data = check_tensor("KVCache.data", self.data, (dtype,), 4,
                            (None, None, None, row_bytes(self.head_dim, self.bits)))
        if self.kv_block is not None and data.shape[2] != self.kv_block:
            raise ValueError(f"KVCache.data: a paged cache holds kv_block={self.kv_block} tokens "
                             f"per block on axis 2, got shape {tuple(data.shape)}")
        if self.bits == 16:
            if self.scale is not None or self.zero is not None:
                raise ValueError("KVCache: an fp16 cache (bits=16) takes no scale or zero")
            return
        for name, t in (("KVCache.scale", self.scale), ("KVCache.zero", self.zero)):
            check_tensor(name, t, (torch.float16,), 3, tuple(data.shape[:3]), data.device)
            assert t is not None
            check_contiguous(name, t)

    @staticmethod
    def empty(slots: int, num_kv_heads: int, tokens: int, head_dim: int, bits: int, *,
              paged: bool = False, device: torch.device | None = None) -> KVCache:
        """A zero-filled cache: slots = batch (contiguous) or number of blocks (paged, tokens = 64)."""
        check_choice("bits", bits, KV_CACHE_BITS)
        if paged and tokens != PAGED_BLOCK:
            raise ValueError(f"tokens={tokens}: a paged cache holds {PAGED_BLOCK} tokens per block")
        dtype = torch.float16 if bits == 16 else torch.uint8
        shape = (slots, num_kv_heads, tokens)
        data = torch.zeros((*shape, row_bytes(head_dim, bits)), dtype=dtype, device=device)
        scale = None if bits == 16 else torch.zeros(shape, dtype=torch.float16, device=device)
        zero = None if bits == 16 else torch.zeros(shape, dtype=torch.float16, device=device)
        return KVCache(data, scale, zero, bits, head_dim, PAGED_BLOCK if paged else None)

    @property
    def num_kv_heads(self) -> int:
        return int(self.data.shape[1])

    @property
    def paged(self) -> bool:
        return self.kv_block is not None

    def scale_or_data(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(scale, zero) pointers for a launch; an fp16 cache passes its data (never read)."""
        if self.scale is None or self.zero is None:
            return self.data, self.data
        return self.scale, self.zero

    def scale_strides(self) -> tuple[int, int, int]:
        if self.scale is None:
            return (0, 0, 0)
        s = self.scale.stride()
        return (s[0], s[1], s[2])


def check_kv_pair(k: KVCache, v: KVCache, block_table: torch.Tensor | None) -> None:
    """K and V caches of one layer agree on layout; block_table is given exactly when paged."""
    for name, c in (("k_cache", k), ("v_cache", v)):
        if not isinstance(c, KVCache):
            raise TypeError(f"{name}: expected a mpsim.kernels.kv_cache.KVCache, "
                            f"got {type(c).__name__}")
    same = (k.data.shape[:3] == v.data.shape[:3] and k.head_dim == v.head_dim
            and k.kv_block == v.kv_block and k.data.device == v.data.device)
    if not same:
        raise ValueError(f"v_cache: expected the layout of k_cache (slots/heads/tokens "
                         f"{tuple(k.data.shape[:3])}, head_dim {k.head_dim}, kv_block {k.kv_block},"
                         f" {k.data.device}), got {tuple(v.data.shape[:3])}, head_dim {v.head_dim},"
                         f" kv_block {v.kv_block}, {v.data.device}")
    if k.paged and block_table is None:
        raise ValueError("block_table: a paged cache needs a block table (B, max_blocks) int32")
    if not k.paged and block_table is not None:
        raise ValueError("block_table: given for a contiguous cache; pass None or a paged KVCache")
    if block_table is not None:
        check_tensor("block_table", block_table, (torch.int32,), 2, None, k.data.device)


def check_seq_vector(name: str, t: torch.Tensor, batch: int, device: torch.device) -> None:
    """A per-sequence int32 vector (B,), contiguous (kv_lens, start_pos, new_lens)."""
    check_tensor(name, t, (torch.int32,), 1, (batch,), device)


def check_table_rows(block_table: torch.Tensor | None, batch: int) -> None:
    if block_table is not None and block_table.shape[0] != batch:
        raise ValueError(f"block_table: expected {batch} rows (one per sequence), "
                         f"got shape {tuple(block_table.shape)}")


def slot_args(cache: KVCache, block_table: torch.Tensor | None,
              dummy: torch.Tensor) -> tuple[torch.Tensor, int, bool, int]:
    """(table, table row stride, PAGED, KV_BLOCK) kernel arguments; contiguous passes a dummy table."""
    if block_table is None:
        return dummy, 0, False, PAGED_BLOCK
    assert cache.kv_block is not None
    return block_table, block_table.stride(0), True, cache.kv_block

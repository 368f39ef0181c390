"""The decoder: a Llama-family forward pass over backend ops, one kernel launch per op.

Launch order is mpsim.launch_plan's (the synthesizer's), so a captured trace lists the same launches
as a synthesized one. Variants the presets need: RMSNorm or LayerNorm, full or partial rotary, GQA,
SwiGLU or GELU MLP, biases, a parallel attention+MLP block, tied embeddings.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from mpsim.engine.backends import Backend, LayerCache
from mpsim.engine.fp_ops import FP8_CACHE, Fp8KV
from mpsim.engine.quantize import LinearSet, QuantizedLayer, quantize_layer
from mpsim.engine.weights import ModelParams, Norm
from mpsim.kernels.gemm import Fp16Weight
from mpsim.kernels.kv_cache import KVCache
from mpsim.policy import Policy
from mpsim.traces.recorder import active_recorder


@contextlib.contextmanager
def scope(**context: object) -> Iterator[None]:
    """Tell the active recorder (if a capture is running) where in the model the launches are."""
    rec = active_recorder()
    if rec is None:
        yield
        return
    with rec.scope(**context):
        yield


class TensorParallel(Protocol):
    """One rank's side of a tensor-parallel group (mpsim/engine/distributed.py; docs/parallelism.md):
    the vocab-parallel embedding's ids on this rank's shard, the all-reduce after it and after each
    row-parallel GEMM, and the all-gather of the lm_head's vocab-shard logits."""

    def local_ids(self, ids: torch.Tensor) -> torch.Tensor: ...
    def all_reduce(self, x: torch.Tensor) -> torch.Tensor: ...
    def gather_logits(self, logits: torch.Tensor) -> torch.Tensor: ...


@dataclass(frozen=True)
class PassInput:
    ids: torch.Tensor        # (B, T) int64 token ids (right-padded in prefill)
    positions: torch.Tensor  # (B, T) int32
    start: torch.Tensor      # (B,) int32: cache slot of each sequence's first new token
    lens: torch.Tensor       # (B,) int32: new tokens per sequence (prefill) or cache lengths (decode)
    max_kv_len: int          # host bound on the cache lengths after this pass
    phase: str
    step: int
    bits: int                # decoder-block weight width for this pass


class Decoder:
    """Weights on a backend, quantized at load per the policy, and the forward pass."""

    def __init__(self, params: ModelParams, policy: Policy, backend: Backend, *,
                 dummy_seed: int | None = None, quantized: list[QuantizedLayer] | None = None) -> None:
        """`quantized`: the decoder-block linears already quantized (a quantized checkpoint); else
        they are quantized here, one layer at a time (a lazily loaded layer is read once)."""
        self.spec, self.policy, self.backend = params.spec, policy, backend
        dev = backend.device
        self.embed = torch.from_numpy(params.embed).to(dev)
        rng = None if dummy_seed is None else np.random.default_rng(dummy_seed)
        self.layers: list[QuantizedLayer] = []
        self.attn_norms: list[tuple[torch.Tensor, torch.Tensor | None]] = []
        self.mlp_norms: list[tuple[torch.Tensor, torch.Tensor | None] | None] = []
        for i, p in enumerate(params.layers):
            self.layers.append(quantized[i] if quantized is not None
                               else quantize_layer(p, policy, dev, rng=rng))
            self.attn_norms.append(self._norm(p.attn_norm))
            self.mlp_norms.append(None if p.mlp_norm is None else self._norm(p.mlp_norm))
        self.final_norm = self._norm(params.final_norm)
        head = params.lm_head
        self.lm_head = Fp16Weight(self.embed if head.weight is params.embed
                                  else torch.from_numpy(head.weight).to(dev))
        self.lm_head_bias = None if head.bias is None else torch.from_numpy(head.bias).to(dev)
        self.graphs: Any = None  # mpsim.engine.graphs.DecodeGraphs when decode steps replay CUDA graphs
        self.tp: TensorParallel | None = None  # set on a rank of a tensor-parallel group

    def _reduce(self, x: torch.Tensor, module: str) -> torch.Tensor:
        """The all-reduce after a row-parallel GEMM or the vocab-parallel embedding (TP only)."""
        if self.tp is None:
            return x
        with scope(module=module):
            return self.tp.all_reduce(x)

    def _norm(self, n: Norm) -> tuple[torch.Tensor, torch.Tensor | None]:
        dev = self.backend.device
        bias = None if n.bias is None else torch.from_numpy(n.bias).to(dev)
        return torch.from_numpy(n.weight).to(dev), bias

    def new_cache(self, batch: int, max_len: int) -> list[LayerCache]:
        """A KV cache for `batch` sequences of up to max_len tokens (pooled under CUDA graphs)."""
        if self.graphs is not None:
            return self.graphs.cache(batch, max_len)
        return self.eager_cache(batch, max_len)

    def eager_cache(self, batch: int, max_len: int) -> list[LayerCache]:
        s, dev, bits = self.spec, self.backend.device, self.policy.kv_bits
        if self.policy.kv_format == FP8_CACHE:
            return [LayerCache(Fp8KV.empty(batch, s.num_kv_heads, max_len, s.head_dim, dev),
                               Fp8KV.empty(batch, s.num_kv_heads, max_len, s.head_dim, dev))
                    for _ in range(s.num_layers)]
        return [LayerCache(KVCache.empty(batch, s.num_kv_heads, max_len, s.head_dim, bits, device=dev),
                           KVCache.empty(batch, s.num_kv_heads, max_len, s.head_dim, bits, device=dev))
                for _ in range(s.num_layers)]

    def decode(self, inp: PassInput, cache: list[LayerCache]) -> torch.Tensor:
        """A decode pass: a CUDA-graph replay when graphs are on (mpsim/engine/graphs.py), else eager."""
        return self.graphs.run(inp, cache) if self.graphs is not None else self.forward(inp, cache)

    def forward(self, inp: PassInput, cache: list[LayerCache]) -> torch.Tensor:
        """One pass; returns the logits (B, V) of each sequence's last new token."""
        b, t = inp.ids.shape
        with scope(phase=inp.phase, step=inp.step):
            return self._forward(inp, cache, b, t)

    def _forward(self, inp: PassInput, cache: list[LayerCache], b: int, t: int) -> torch.Tensor:
        ops, s = self.backend, self.spec
        with scope(layer=-1):
            with scope(module="embed"):
                ids = inp.ids.reshape(-1)
                x = ops.embedding(ids if self.tp is None else self.tp.local_ids(ids), self.embed)
            x = self._reduce(x, "embed_allreduce")
        for i in range(s.num_layers):
            with scope(layer=i):
                x = self._layer(i, x, inp, cache[i], b, t)
        with scope(layer=-1):
            if inp.phase == "prefill":
                with scope(module="last_token_gather"):
                    last = torch.arange(b, dtype=torch.int64, device=x.device) * t + inp.lens.long() - 1
                    x = ops.embedding(last, x)
            with scope(module="final_norm"):
                x = ops.norm(x, *self.final_norm, s.norm_eps, s.norm)
            with scope(module="lm_head"):
                logits = ops.linear(x, self.lm_head, self.lm_head_bias)
            if self.tp is None:
                return logits
            with scope(module="logits_allgather"):
                return self.tp.gather_logits(logits)

    def _layer(self, i: int, x: torch.Tensor, inp: PassInput, cache: LayerCache, b: int,
               t: int) -> torch.Tensor:
        ops, s, w = self.backend, self.spec, self.layers[i].linears
        up_name, down_name = ("gate_up", "down") if s.mlp == "swiglu" else ("fc1", "fc2")
        with scope(module="attn_norm"):
            h = ops.norm(x, *self.attn_norms[i], s.norm_eps, s.norm)
        attn = self._attention(h, inp, cache, w["qkv"], b, t)
        with scope(module="o"):
            o = ops.linear(attn, w["o"].at(inp.bits), w["o"].bias)
        o = self._reduce(o, "o_allreduce")
        mlp_in = h
        if not s.parallel_attn_mlp:
            with scope(module="attn_residual"):
                x = ops.residual_add(x, o)
            with scope(module="mlp_norm"):
                norm = self.mlp_norms[i]
                assert norm is not None
                mlp_in = ops.norm(x, *norm, s.norm_eps, s.norm)
        with scope(module=up_name):
            up = ops.linear(mlp_in, w[up_name].at(inp.bits), w[up_name].bias)
        with scope(module="act"):
            act = ops.silu_mul(up) if s.mlp == "swiglu" else ops.gelu(up)
        with scope(module=down_name):
            down = ops.linear(act, w[down_name].at(inp.bits), w[down_name].bias)
        down = self._reduce(down, f"{down_name}_allreduce")
        if s.parallel_attn_mlp:
            with scope(module="attn_residual"):
                x = ops.residual_add(x, o)
        with scope(module="mlp_residual"):
            return ops.residual_add(x, down)

    def _attention(self, h: torch.Tensor, inp: PassInput, cache: LayerCache, qkv_set: LinearSet,
                   b: int, t: int) -> torch.Tensor:
        ops, s = self.backend, self.spec
        with scope(module="qkv"):
            qkv = ops.linear(h, qkv_set.at(inp.bits), qkv_set.bias).view(b, t, -1)
        q = qkv[..., : s.q_dim].view(b, t, s.num_heads, s.head_dim)
        k = qkv[..., s.q_dim: s.q_dim + s.kv_dim].view(b, t, s.num_kv_heads, s.head_dim)
        v = qkv[..., s.q_dim + s.kv_dim:].view(b, t, s.num_kv_heads, s.head_dim)
        with scope(module="rope"):
            q, k = ops.rope(q, k, inp.positions, s.rot_dim, s.rope_theta, inp.max_kv_len - 1)
        with scope(module="kv_write"):
            ops.kv_write(k, v, cache, inp.start, inp.lens if inp.phase == "prefill" else None)
        with scope(module="attn"):
            if inp.phase == "prefill":
                out = ops.attention_prefill(q, k, v, inp.lens)
            else:
                out = ops.attention_decode(q.view(b, s.num_heads, s.head_dim), cache, inp.lens,
                                           inp.max_kv_len)
        return out.reshape(b * t, s.q_dim)

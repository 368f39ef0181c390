"""A plain PyTorch Llama used to *train* the tiny model (autograd), with HF parameter names.

Inference never runs this module: the engine runs mpsim's own kernels. It follows the HF Llama
conventions the engine implements (RMSNorm, rotate-half RoPE on the first rot_dim dims, GQA, SwiGLU),
so the weights it saves load into the engine unchanged.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from mpsim.models import ModelSpec


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(seq: int, rot_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    inv = theta ** (-torch.arange(0, rot_dim, 2, dtype=torch.float32) / rot_dim)
    ang = torch.arange(seq, dtype=torch.float32)[:, None] * inv[None, :]  # (T, rot/2)
    return ang.cos(), ang.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, rot_dim: int) -> torch.Tensor:
    """x: (B, H, T, D); rotate-half on the first rot_dim dims."""
    rot, rest = x[..., :rot_dim], x[..., rot_dim:]
    x1, x2 = rot[..., : rot_dim // 2], rot[..., rot_dim // 2:]
    out = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)
    return torch.cat([out, rest], dim=-1)


class Attention(nn.Module):
    def __init__(self, s: ModelSpec) -> None:
        super().__init__()
        self.s = s
        self.q_proj = nn.Linear(s.hidden, s.q_dim, bias=s.qkv_bias)
        self.k_proj = nn.Linear(s.hidden, s.kv_dim, bias=s.qkv_bias)
        self.v_proj = nn.Linear(s.hidden, s.kv_dim, bias=s.qkv_bias)
        self.o_proj = nn.Linear(s.q_dim, s.hidden, bias=s.o_bias)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        s = self.s
        q = self.q_proj(x).view(b, t, s.num_heads, s.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, s.num_kv_heads, s.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, s.num_kv_heads, s.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin, s.rot_dim), apply_rope(k, cos, sin, s.rot_dim)
        rep = s.num_heads // s.num_kv_heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, s.q_dim))


class Mlp(nn.Module):
    def __init__(self, s: ModelSpec) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(s.hidden, s.ffn, bias=False)
        self.up_proj = nn.Linear(s.hidden, s.ffn, bias=False)
        self.down_proj = nn.Linear(s.ffn, s.hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, s: ModelSpec) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(s.hidden, s.norm_eps)
        self.self_attn = Attention(s)
        self.post_attention_layernorm = RMSNorm(s.hidden, s.norm_eps)
        self.mlp = Mlp(s)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaBody(nn.Module):
    def __init__(self, s: ModelSpec) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(s.vocab, s.hidden)
        self.layers = nn.ModuleList(Block(s) for _ in range(s.num_layers))
        self.norm = RMSNorm(s.hidden, s.norm_eps)


class TorchLlama(nn.Module):
    """`model.*` and `lm_head.*` parameters, as HF's LlamaForCausalLM names them."""

    def __init__(self, s: ModelSpec, max_seq: int) -> None:
        super().__init__()
        if s.mlp != "swiglu" or s.norm != "rms":
            raise ValueError(f"the training model implements RMSNorm + SwiGLU Llamas only, not {s.name}")
        self.spec = s
        self.model = LlamaBody(s)
        self.lm_head = nn.Linear(s.hidden, s.vocab, bias=False)
        cos, sin = rope_tables(max_seq, s.rot_dim, s.rope_theta)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, nn.Linear | nn.Embedding):
            nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        t = ids.shape[1]
        x = self.model.embed_tokens(ids)
        cos, sin = self.cos[:t], self.sin[:t]
        for layer in self.model.layers:
            x = layer(x, cos, sin)
        return self.lm_head(self.model.norm(x))

    def loss(self, ids: torch.Tensor) -> torch.Tensor:
        logits = self(ids[:, :-1])
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


def bits_per_byte(loss_nats: float) -> float:
    return loss_nats / math.log(2)

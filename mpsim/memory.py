"""What a point costs in memory and bits, from the model, policy and workload alone (no trace needed).

- weights: every decoder-block linear stored in the policy's format at the widest precision it reads
  (for progressive any-precision policies the parent model: its bit-planes, plus the per-row LUT of
  every width the policy reads), plus fp16 embeddings and fp16 lm_head (counted once when tied).
  Norm weights and biases (under 0.1% of any preset) are left out.
- KV cache: batch x (prompt + generated) tokens x layers x KV heads x 2 (K and V) x the bytes of one
  token of one head at the policy's KV bits (codes plus fp16 scale and zero when int-quantized; fp8
  e4m3 values alone, their per-tensor scale a constant).
- fp8 / fp4 weights (policy family "float"): traces/accounting.py weight_bytes of the format (values
  plus their fp32 / e4m3 / e8m0 scales).
- peak activations: an estimate, not a measurement. At prefill the largest live set is the residual
  stream (batch x prompt x hidden) plus the input and output of the widest op of a block: QKV
  (hidden -> q + 2 kv), gate/up (hidden -> 2 ffn for SwiGLU) or the activation (2 ffn -> ffn); plus the
  fp16 logits of the last position of each sequence. All fp16 (2 bytes).
- average bits: PMPD's count (decode passes 2..n) and the plain mean over decode passes 1..n, named.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from mpsim.models import ModelSpec
from mpsim.parallel import kv_heads_per_rank, rank_spec, stage_layers, vocab_shard
from mpsim.policy import Policy, mean_decode_bits, pmpd_average_bits
from mpsim.traces.accounting import (
    FP16,
    LUT_WORDS_BITS,
    anyprec_pair_bytes,
    group_param_bytes,
    kv_bytes_per_token_head,
    weight_bytes,
)
from mpsim.workload import Workload


@dataclass(frozen=True)
class PointMemory:
    weights_bytes: int
    kv_cache_bytes: int
    peak_activation_bytes: int
    weight_bits_per_param: float  # storage bits per decoder-block weight, scales and LUTs included

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_cache_bytes + self.peak_activation_bytes


@dataclass(frozen=True)
class PointBits:
    prefill_bits: int
    avg_bits_pmpd: float   # PMPD: mean over decode passes 2..n
    avg_bits_mean: float   # plain mean over decode passes 1..n
    kv_bits: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def widths_read(policy: Policy) -> list[int]:
    """Every weight width a generation under `policy` reads, widest first."""
    return sorted({policy.prefill_bits, *(b for _, b in policy.decode_schedule)}, reverse=True)


def linear_bytes(n: int, k: int, policy: Policy) -> int:
    """Stored bytes of one N x K decoder-block linear under `policy`."""
    parent = policy.parent_bits
    if policy.family == "fp16":
        return weight_bytes(n, k, "fp16", 16, None)
    if policy.family == "uniform":  # + the scale-zero words the W_hat loops read (kernels/sz_words.py)
        stored = weight_bytes(n, k, f"int{parent}-group", parent, policy.group_size)
        return stored + group_param_bytes(n, k, policy.group_size)
    if policy.family == "float":
        w = policy.weights_at("prefill", 0)  # one stored format: every pass reads it
        return weight_bytes(n, k, w.w_format, w.bits, w.group_size)
    # any-precision: the parent's planes and LUT, plus the LUT of each lower width read, the pair
    # table of each width read at <= 3 bits and the LUT words at 4 bits (built when the weight is
    # loaded, docs/formats.md)
    extra_luts = sum(n * (2**b) * FP16 for b in widths_read(policy)[1:])
    pairs = sum(anyprec_pair_bytes(n, b) for b in widths_read(policy))
    words = sum(n * (2**b) * 4 for b in widths_read(policy) if b in LUT_WORDS_BITS)
    return weight_bytes(n, k, "anyprec", parent, None) + extra_luts + pairs + words


def weights_bytes(spec: ModelSpec, policy: Policy) -> int:
    block = sum(linear_bytes(n, k, policy) for n, k, _ in spec.linear_shapes().values())
    embeddings = spec.vocab * spec.hidden * FP16
    lm_head = 0 if spec.tied_embeddings else spec.vocab * spec.hidden * FP16
    return spec.num_layers * block + embeddings + lm_head


def kv_cache_bytes(spec: ModelSpec, policy: Policy, wl: Workload) -> int:
    per_token_layer = spec.num_kv_heads * 2 * kv_bytes_per_token_head(spec.head_dim, policy.kv_bits,
                                                                      policy.kv_format)
    return wl.batch * (wl.prompt_len + wl.gen_len) * spec.num_layers * per_token_layer


def peak_activation_bytes(spec: ModelSpec, wl: Workload) -> int:
    qkv_width = spec.q_dim + 2 * spec.kv_dim
    act_out = spec.ffn if spec.mlp == "swiglu" else spec.mlp_in_width
    widest = max(spec.hidden + qkv_width, spec.hidden + spec.mlp_in_width, spec.mlp_in_width + act_out)
    tokens = wl.batch * wl.prompt_len
    return FP16 * (tokens * (spec.hidden + widest) + wl.batch * spec.vocab)


def point_memory(spec: ModelSpec, policy: Policy, wl: Workload) -> PointMemory:
    block_params = spec.num_layers * spec.block_params()
    block_bytes = spec.num_layers * sum(linear_bytes(n, k, policy) for n, k, _ in
                                        spec.linear_shapes().values())
    return PointMemory(
        weights_bytes=weights_bytes(spec, policy),
        kv_cache_bytes=kv_cache_bytes(spec, policy, wl),
        peak_activation_bytes=peak_activation_bytes(spec, wl),
        weight_bits_per_param=8 * block_bytes / block_params,
    )


def point_bits(policy: Policy, wl: Workload) -> PointBits:
    """Average decode bits of one generation, both ways (a single sample: the workload's)."""
    per_step = [[policy.decode_bits(s) for s in range(1, wl.decode_steps + 1)]]
    return PointBits(policy.prefill_bits, pmpd_average_bits(per_step), mean_decode_bits(per_step),
                     policy.kv_bits)


# --- GPUs a point needs (docs/real-models.md#multi-gpu-presets) -------------------------------------
TP_SIZES = (1, 2, 4, 8)  # tensor-parallel degrees engines run within a node: powers of two up to 8
MEMORY_UTILIZATION = 0.90  # share of each GPU's memory a plan may use: vLLM's gpu_memory_utilization default
FIT_CONTEXT = 4096  # tokens (prompt + generated) of the stated fit check in `mpsim models`
FIT_BATCH = 1


def per_gpu_bytes(spec: ModelSpec, mem: PointMemory, tp: int) -> int:
    """Bytes one GPU of a `tp`-way tensor-parallel group holds: the weights split over the group
    (embeddings and lm_head vocab-parallel too), the KV cache of its share of the KV heads (a KV head
    is replicated when there are fewer KV heads than GPUs), and the point's peak activation estimate
    in full on every GPU (conservative: the residual stream is not split)."""
    kv_heads_here = -(-spec.num_kv_heads // tp)
    kv_here = mem.kv_cache_bytes * kv_heads_here // spec.num_kv_heads
    return -(-mem.weights_bytes // tp) + kv_here + mem.peak_activation_bytes


def gpus_needed(spec: ModelSpec, mem: PointMemory, gpu_memory_bytes: float) -> int | None:
    """The smallest tensor-parallel degree of TP_SIZES whose per-GPU bytes fit MEMORY_UTILIZATION of
    one GPU's memory; None when even TP_SIZES[-1] GPUs do not hold it."""
    for tp in TP_SIZES:
        if per_gpu_bytes(spec, mem, tp) <= MEMORY_UTILIZATION * gpu_memory_bytes:
            return tp
    return None


# --- one device of a parallel plan (mpsim/parallel.py: serving with --tp/--pp) ---------------------

def device_weights_bytes(spec: ModelSpec, policy: Policy, tp: int = 1, pp: int = 1) -> int:
    """Weights on the most loaded device of a tp x pp plan: its stage's layers at one rank's shapes
    (KV heads replicated below tp), the vocab shard of the embedding on the first stage and of the
    lm_head on the last (a tied lm_head is a second copy there when pp > 1). weights_bytes at 1 x 1."""
    rank = rank_spec(spec, tp)
    block = sum(linear_bytes(n, k, policy) for n, k, _ in rank.linear_shapes().values())
    shard = vocab_shard(spec.vocab, tp) * spec.hidden * FP16
    head = 0 if spec.tied_embeddings and pp == 1 else shard
    counts = stage_layers(spec.num_layers, pp)
    return max(c * block + (shard if s == 0 else 0) + (head if s == pp - 1 else 0)
               for s, c in enumerate(counts))


def device_kv_bytes_per_token(spec: ModelSpec, kv_bits: int, tp: int = 1, pp: int = 1,
                              kv_format: str | None = None) -> int:
    """K and V of one token on the most loaded device: its stage's layers, its KV heads."""
    layers = max(stage_layers(spec.num_layers, pp))
    per_head = kv_bytes_per_token_head(spec.head_dim, kv_bits, kv_format)
    return layers * kv_heads_per_rank(spec, tp) * 2 * per_head


def device_memory_bytes(spec: ModelSpec, policy: Policy, wl: Workload, tp: int = 1, pp: int = 1) -> int:
    """point_memory's total on the most loaded device of a tp x pp plan: its weights, its share of
    the KV cache (its stage's layers, its KV heads) and one rank's activation peak (point_memory's
    total_bytes at 1 x 1)."""
    if (tp, pp) == (1, 1):
        return point_memory(spec, policy, wl).total_bytes
    tokens = wl.batch * (wl.prompt_len + wl.gen_len)
    return (device_weights_bytes(spec, policy, tp, pp)
            + tokens * device_kv_bytes_per_token(spec, policy.kv_bits, tp, pp, policy.kv_format)
            + peak_activation_bytes(rank_spec(spec, tp), wl))

"""The multi-GPU presets (llama-2-70b, llama-3-70b, qwen2.5-32b): their parameter counts against the
published sizes, and the GPUs a point needs (mpsim.memory.gpus_needed) against a hand computation."""

from __future__ import annotations

import pytest

from mpsim.memory import MEMORY_UTILIZATION, gpus_needed, per_gpu_bytes, point_memory
from mpsim.models import get_model
from mpsim.policy import parse_policy
from mpsim.workload import Workload

# Published sizes (the model pages' parameter counts, rounded as published). Tolerance 0.5%: the
# rounding of a 3-digit figure is at most 0.07%, so 0.5% still catches a wrong width or layer count
# (one layer of a 70B model is 1.2%; a wrong vocab on Llama-3-70B is 1.5%).
PUBLISHED = {
    "llama-2-70b": 69.0e9,   # huggingface.co/meta-llama/Llama-2-70b-hf: "69B params" (safetensors)
    "llama-3-70b": 70.6e9,   # huggingface.co/meta-llama/Meta-Llama-3-70B: "70.6B params"
    "qwen2.5-32b": 32.8e9,   # huggingface.co/Qwen/Qwen2.5-32B: "32.8B params" (the card: 32.5B)
    "llama-3-8b": 8.03e9,    # huggingface.co/meta-llama/Meta-Llama-3-8B: "8.03B params"
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_count_matches_the_published_size(name: str) -> None:
    assert get_model(name).param_count() == pytest.approx(PUBLISHED[name], rel=0.005)


def test_llama_3_70b_count_by_hand() -> None:
    # per layer: qkv (8192 + 2*1024) x 8192, o 8192 x 8192, gate_up 2*28672 x 8192, down 8192 x 28672,
    # two RMSNorm weights; plus embeddings and lm_head 128256 x 8192 and the final norm
    layer = 10240 * 8192 + 8192 * 8192 + 57344 * 8192 + 8192 * 28672 + 2 * 8192
    assert get_model("llama-3-70b").param_count() == 80 * layer + 2 * 128256 * 8192 + 8192 == 70_553_706_496


def test_qwen_32b_counts_its_qkv_bias() -> None:
    spec = get_model("qwen2.5-32b")
    assert spec.qkv_bias and not spec.o_bias and not spec.tied_embeddings
    layer = (7168 * 5120 + 7168) + 5120 * 5120 + 2 * 27648 * 5120 + 5120 * 27648 + 2 * 5120
    assert spec.param_count() == 64 * layer + 2 * 152064 * 5120 + 5120


def test_llama_2_70b_fp16_needs_2_h100s_and_4_l40s_by_hand() -> None:
    spec = get_model("llama-2-70b")
    wl = Workload(prompt_len=3584, gen_len=512)
    mem = point_memory(spec, parse_policy("fp16"), wl)
    weights = 2 * (80 * (10240 * 8192 + 8192 * 8192 + 57344 * 8192 + 8192 * 28672) + 2 * 32000 * 8192)
    kv = 4096 * 80 * 8 * 2 * 128 * 2  # tokens x layers x KV heads x (K, V) x head_dim x 2 bytes
    act = 2 * (3584 * (8192 + 57344 + 28672) + 32000)  # residual + widest op (act in, act out) + logits
    assert (mem.weights_bytes, mem.kv_cache_bytes, mem.peak_activation_bytes) == (weights, kv, act)
    assert per_gpu_bytes(spec, mem, 2) == weights // 2 + kv // 2 + act
    h100, l40s = 80e9, 48e9
    assert weights // 2 + kv // 2 + act <= MEMORY_UTILIZATION * h100 < weights + kv + act
    assert gpus_needed(spec, mem, h100) == 2
    assert weights // 4 + kv // 4 + act <= MEMORY_UTILIZATION * l40s < weights // 2 + kv // 2 + act
    assert gpus_needed(spec, mem, l40s) == 4
    assert gpus_needed(spec, mem, 8e9) is None  # 8 x 8 GB cannot hold 138 GB of weights


def test_kv_heads_are_replicated_past_the_kv_head_count() -> None:
    spec = get_model("qwen2.5-1.5b")  # 2 KV heads: at TP 4 and 8 every GPU still holds one whole head
    mem = point_memory(spec, parse_policy("fp16"), Workload(prompt_len=1000, gen_len=24))
    kv_share = [per_gpu_bytes(spec, mem, tp) - -(-mem.weights_bytes // tp) - mem.peak_activation_bytes
                for tp in (1, 2, 4, 8)]
    assert kv_share == [mem.kv_cache_bytes, mem.kv_cache_bytes // 2, mem.kv_cache_bytes // 2,
                        mem.kv_cache_bytes // 2]

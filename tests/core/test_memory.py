"""Memory and bit columns of a sweep point, against sums written out by hand from the model shapes."""

from __future__ import annotations

from mpsim.memory import (
    kv_cache_bytes,
    peak_activation_bytes,
    point_bits,
    point_memory,
    weights_bytes,
)
from mpsim.models import get_model
from mpsim.policy import parse_policy
from mpsim.workload import Workload

VICUNA_LINEARS = [(3 * 4096, 4096), (4096, 4096), (2 * 11008, 4096), (4096, 11008)]  # qkv, o, gate_up, down
VICUNA_EMBED = 32000 * 4096 * 2  # fp16 table; lm_head is as large


def test_fp16_weights_are_two_bytes_per_parameter() -> None:
    params = 32 * sum(n * k for n, k in VICUNA_LINEARS)
    assert weights_bytes(get_model("vicuna-7b"), parse_policy("fp16")) == params * 2 + 2 * VICUNA_EMBED


def test_uniform_weights_carry_a_scale_and_zero_per_group() -> None:
    # 4-bit codes + fp16 s, z + the scale-zero words the W_hat loops read (kernels/sz_words.py)
    per_layer = sum(n * k // 2 + n * (k // 128) * 2 * 2 + n * (k // 128) * 4 for n, k in VICUNA_LINEARS)
    assert weights_bytes(get_model("vicuna-7b"), parse_policy("w4")) == 32 * per_layer + 2 * VICUNA_EMBED


def test_progressive_anyprec_stores_the_parent_and_every_lut_it_reads() -> None:
    # ap4-4@10-3: parent 4 bit-planes, LUTs of 4 and 3 bits per output row, the 3-bit pair table
    # (8 x 8 fp16 pairs a row: 256 B) and the 4-bit LUT's words (16 x 4 B a row, kernels/
    # lut_words.py); kv8 changes no weight
    per_layer = sum(n * k * 4 // 8 + n * (16 + 8) * 2 + n * 256 + n * 64 for n, k in VICUNA_LINEARS)
    spec = get_model("vicuna-7b")
    assert weights_bytes(spec, parse_policy("ap4-4@10-3+kv8")) == 32 * per_layer + 2 * VICUNA_EMBED
    single = sum(n * k * 3 // 8 + n * 8 * 2 + n * 256 for n, k in VICUNA_LINEARS)
    assert weights_bytes(spec, parse_policy("ap3")) == 32 * single + 2 * VICUNA_EMBED


def test_tied_embeddings_are_counted_once() -> None:
    qwen = get_model("qwen2.5-1.5b")
    assert qwen.tied_embeddings
    linears = qwen.num_layers * qwen.block_params() * 2
    assert weights_bytes(qwen, parse_policy("fp16")) == linears + qwen.vocab * qwen.hidden * 2


def test_kv_cache_follows_the_formula() -> None:
    llama3, wl = get_model("llama-3-8b"), Workload(100, 28, 3)
    tokens = 3 * (100 + 28)
    assert kv_cache_bytes(llama3, parse_policy("w4"), wl) == tokens * 32 * 8 * 2 * 128 * 2
    # int8: 128 code bytes + fp16 scale and zero per token per head, for K and for V
    assert kv_cache_bytes(llama3, parse_policy("w4+kv8"), wl) == tokens * 32 * 8 * 2 * (128 + 4)


def test_peak_activations_take_the_widest_block_op_plus_logits() -> None:
    wl = Workload(512, 8, 2)
    # vicuna: widest live set is the SwiGLU activation (2*11008 in, 11008 out) beside the residual
    expected = 2 * (2 * 512 * (4096 + 3 * 11008) + 2 * 32000)
    assert peak_activation_bytes(get_model("vicuna-7b"), wl) == expected


def test_average_bits_both_ways() -> None:
    bits = point_bits(parse_policy("ap4-4@10-3"), Workload(16, 21, 1))  # 20 decode passes: 10 at 4, 10 at 3
    assert bits.prefill_bits == 4
    assert bits.avg_bits_mean == (10 * 4 + 10 * 3) / 20
    assert bits.avg_bits_pmpd == (9 * 4 + 10 * 3) / 19  # PMPD skips the first decode pass
    assert point_bits(parse_policy("w3+kv4"), Workload(16, 21, 1)).kv_bits == 4


def test_point_memory_adds_up() -> None:
    spec, policy, wl = get_model("mobilellama-1.4b"), parse_policy("w8"), Workload(64, 16, 4)
    mem = point_memory(spec, policy, wl)
    assert mem.total_bytes == (weights_bytes(spec, policy) + kv_cache_bytes(spec, policy, wl)
                               + peak_activation_bytes(spec, wl))
    # codes + fp16 scale and zero per 128 + their 32-bit scale-zero word (kernels/sz_words.py)
    assert mem.weight_bits_per_param == 8 + 2 * 16 / 128 + 32 / 128

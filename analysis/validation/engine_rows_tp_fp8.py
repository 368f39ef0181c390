"""The engine-benchmarks rows the parallelism (25) and FP8/FP4 (26) issues own whole: E2 (TensorRT-
LLM's Llama-3.1-70B on H200, BF16 on TP 2 against FP8 and INT4-AWQ on one GPU, per GPU) and E7
(vLLM's FP8 against bf16 at saturation on H100, a qualitative row). Same contract as engine_rows.py:
each reader checks the row still says what the set-up assumes; the published numbers are tests.
"""

from __future__ import annotations

from mpsim.analysis.validation.engine_bench import Cell, Row
from mpsim.analysis.validation.engine_setup import Precision, RowSetup
from mpsim.errors import MpsimInputError
from mpsim.models import ModelSpec

SAME_70B = ("llama-3-70b stands for Llama-3.1-70B: the same shapes (80 layers, hidden 8192, FFN 28672, "
            "64 query / 8 KV heads of 128, vocabulary 128256, untied embeddings); only RoPE scaling and "
            "the context length differ (the preset's 8192 holds 2048 + 128)")

_QWEN3_8B_CONFIG = "https://huggingface.co/Qwen/Qwen3-8B/blob/main/config.json"
# Qwen3-8B from its config.json (hidden_size 4096, num_hidden_layers 36, intermediate_size 12288,
# num_attention_heads 32, num_key_value_heads 8, head_dim 128, vocab_size 151936, rope_theta 1e6,
# rms_norm_eps 1e-6, tie_word_embeddings false, attention_bias false, max_position_embeddings 40960).
# Not an mpsim preset: Qwen3's per-head q/k RMSNorm is no op of mpsim's launch plan, so this spec
# leaves those two small row-wise launches per layer out (an assumption, said in the row's note).
QWEN3_8B = ModelSpec("qwen3-8b", 36, 4096, 12288, 32, 8, 128, 151936, source=_QWEN3_8B_CONFIG,
                     rope_theta=1e6, norm_eps=1e-6, max_context_len=40960,
                     context_source=f"{_QWEN3_8B_CONFIG} max_position_embeddings")

# `vllm bench throughput` as E7 ran it: every default but the lengths. vLLM (vllm/benchmarks/
# throughput.py) --num-prompts 1000; vllm/engine/arg_utils.py get_batch_defaults: the LLM class on a
# GPU of >= 70 GiB other than an A100 (the H100) takes max_num_seqs 1024, max_num_batched_tokens 16384.
VLLM_BENCH_PROMPTS = 1000
VLLM_LLM_MAX_NUM_SEQS = 1024
VLLM_LLM_MAX_BATCHED_TOKENS = 16384


def e2(row: Row, table: dict[str, Row]) -> RowSetup:
    """E2: its workload is E1's ("same") at batch 1. The published tokens/s are each run's own
    (ModelOpt's benchmark.md: "Tokens/sec" per run, "Speedup is normalized to the GPU count"): the
    BF16 run's 45.81 is two GPUs' (22.9 each), so FP8's published 1.90x per GPU is 43.46 / (45.81 / 2).
    Read as 45.81 per GPU, the TP 2 run would make 91.6 tokens/s, above the bound of streaming 141 GB
    of weights over two H200s' 4.8 TB/s each (68 tokens/s)."""
    Cell(row, "GPU").need("H200")
    Cell(row, "model").need("Llama-3.1-70B (BF16 on TP 2, the others TP 1; per GPU)")
    Cell(row, "workload").need("same, batch 1")
    Cell(row, "engine, tool").need("same")
    if "E1" not in table:
        raise MpsimInputError("engine-benchmarks.md row E2 says its workload is E1's ('same'), and there "
                              "is no row E1")
    prompt, gen = Cell(table["E1"], "workload").ints(r"input (\d+), output (\d+);", "'input N, output N;'")
    pub = Cell(row, "published result")
    pub.need("tok/s per GPU")
    bf16 = pub.series("BF16", 1)[0]
    return RowSetup("E2", "trtllm", "h200-sxm", "llama-3-70b", prompt, gen, (1,), "whole-run-per-gpu",
                    (Precision("BF16 TP2", "fp16", (bf16 / 2,), tp=2, owner="25"),
                     Precision("FP8", "fp8", pub.series("FP8", 1), owner="25, 26"),
                     Precision("INT4-AWQ", "w4g128", pub.series("INT4-AWQ", 1), owner="25",
                               method="awq")),
                    f"the published tokens/s are each run's (ModelOpt's benchmark.md, whose speedups "
                    f"are normalized to the GPU count: FP8's 1.90x is 43.46 / (45.81 / 2)), so BF16's "
                    f"45.81 is the TP 2 run's, {bf16 / 2:.2f} per GPU (45.81 per GPU would be 91.6 "
                    f"tokens/s on two GPUs, above the 68 of streaming 141 GB of weights at 2 x 4.8 "
                    f"TB/s); BF16 on 2 GPUs (TensorRT-LLM's custom all-reduce over NVLink, the "
                    f"h200-sxm node), FP8 (per-tensor W8A8 e4m3) and INT4-AWQ (w4g128, an AWQ "
                    f"checkpoint as E1's) on one, 16-bit KV (an assumption, as E1); {SAME_70B}")


def e7(row: Row, table: dict[str, Row]) -> RowSetup:
    """E7: 1000 prompts of 1024 tokens, 2048 new each, served by vLLM's continuous batching with
    its defaults (the published figure is output tokens over the run); qualitative: FP8 / bf16
    within 0.9-1.1 (issue 26's Done-when)."""
    Cell(row, "GPU").need("H100")
    Cell(row, "model").need("Qwen3-8B bf16 vs Qwen3-8B-FP8")
    Cell(row, "counts").need("output tokens over the run")
    tool = Cell(row, "engine, tool")
    tool.need("default max_num_seqs")
    prompt, gen = tool.ints(r"--input-len (\d+) --output-len (\d+)", "'--input-len N --output-len N'")
    pub = Cell(row, "published result")
    m = pub.match(r"v0\.10\.2: bf16 (\d+(?:\.\d+)?), FP8 (\d+(?:\.\d+)?)",
                  "'v0.10.2: bf16 N, FP8 N'")
    bf16, fp8 = (float(v) for v in m.groups())
    return RowSetup("E7", "vllm", "h100-sxm", QWEN3_8B.name, prompt, gen, (VLLM_BENCH_PROMPTS,), "served",
                    (Precision("bf16", "fp16", (bf16,), owner="26"),
                     Precision("FP8", "fp8b", (fp8,), owner="26")),
                    f"`vllm bench throughput` defaults: {VLLM_BENCH_PROMPTS} prompts, max_num_seqs "
                    f"{VLLM_LLM_MAX_NUM_SEQS} and max_num_batched_tokens {VLLM_LLM_MAX_BATCHED_TOKENS} "
                    f"(vLLM's LLM-class defaults on a >= 70 GiB GPU), GPU memory utilization 0.9, all "
                    f"prompts at 0 s; chunked prefill (vLLM V1's scheduler: the running decodes "
                    f"first, the rest of the 16384-token budget filled with prompt chunks, a chunk "
                    f"after cached tokens priced by FA3's prefill over the cache); "
                    f"Qwen3-8B-FP8 as fp8b (its checkpoint's 128x128 block-scaled e4m3, per-token-group "
                    f"activations), 16-bit KV; Qwen3-8B from its config.json ({_QWEN3_8B_CONFIG}) "
                    f"without its per-head q/k RMSNorm launches (no op of mpsim's plan: an assumption); "
                    f"the v0.10.2 pair (the vllm file is the V1 engine)", spec=QWEN3_8B,
                    scheduler=(VLLM_LLM_MAX_NUM_SEQS, VLLM_LLM_MAX_BATCHED_TOKENS), band=(0.9, 1.1))

"""A small fake engine-benchmarks.md (same columns and wording as ../shared's, invented numbers)."""

from __future__ import annotations

from pathlib import Path

HEAD = ("| # | engine, tool | GPU | model | workload | published result | counts | source |\n"
        "|---|---|---|---|---|---|---|---|\n")
ROWS = {
    "E1": "| E1 | trt | H200 | Llama-3.1-8B, TP 1 | input 64, output 8; batch 1 / 2 | tok/s BF16 10.5 / 20; "
          "FP8 11 / 21; INT4-AWQ 12 / 18; W4A8-AWQ 13 / 23 | output tokens over the whole run | s |",
    "E2": "| E2 | same | H200 | Llama-3.1-70B (BF16 on TP 2, the others TP 1; per GPU) | same, batch 1 | "
          "tok/s per GPU: BF16 9, FP8 8, INT4-AWQ 8.5, W4A8-AWQ 9.5 | same | s |",
    "E4": "| E4 | blog | H100 80GB | Llama-2-7B, TP 1 | input 32, output 4 | speedup over FP16: FP8 1.1x "
          "(bs 1), 1.2x (bs 2); INT8 SmoothQuant 1.3x, 1.4x | same | s |",
    "E5": "| E5 | sglang, torch.compile | H100 | Llama-3.1-8B-Instruct | random 48 in / 70 out, "
          "prompts = batch | TP1 bs1 tok/s: bf16 100, int4 g64 (GemLite) 150, fp8 dynamic 120; TP1 bs4: "
          "300 / 350 / 330; TP4 bs4: "
          "1 / 2 / 3 | steady-state decode batch rate (not the whole run) | s |",
    "E6": "| E6 | vLLM `benchmark_latency --input-len 16 --output-len 4` | H100 | Llama-3.1-8B, TP 1 | "
          "batch 1 / 2 | seconds per request: BF16 0.2 / 0.3; Marlin int8 0.15 / 0.25; Marlin int4 "
          "0.1 / 0.2 | whole request latency, prefill included | s |",
    "E7": "| E7 | `vllm bench throughput --input-len 24 --output-len 3`, default max_num_seqs | H100 | "
          "Qwen3-8B bf16 vs Qwen3-8B-FP8 | offline | output tok/s v0.10.2: bf16 500, FP8 490 (no gain at "
          "saturation); v0.8.5: 400 vs 450 | output tokens over the run | s |",
    "E8": "| E8 | QServe vs TensorRT-LLM (offline, max-throughput batch, same memory budget) | L40S 48GB | "
          "Llama-2-7B | input 1024, output 512; QServe batch 128 | tok/s: TRT-LLM FP16 400, W4A16 600, "
          "W8A8 1000; QServe W4A8KV4 2000 | output tokens over the run | s |",
}


def fake_file(tmp_path: Path, **replace: str) -> Path:
    """The fake file, with rows replaced by id (an empty string drops the row)."""
    rows = {**ROWS, **replace}
    path = tmp_path / "engine-benchmarks.md"
    path.write_text("# fake\n\n" + HEAD + "\n".join(r for r in rows.values() if r) + "\n\nprose\n",
                    encoding="utf-8")
    return path

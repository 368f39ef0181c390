"""The rows of ../shared/engine-benchmarks.md, read into runs mpsim can repeat: issue 23's (E1 BF16
and INT4-AWQ, E4, E5 TP 1, E6, E8), with the FP8 precisions of issue 26 and E5's TP 4 runs of issue
25 in the rows they share (E2 and E7: engine_rows_tp_fp8.py).

Each reader takes its row's cells (engine_bench.read_table), checks that the row still says what the
set-up assumes (GPU, model, lengths, labels) and returns a RowSetup: the engine file, GPU hardware
file, model preset, mpsim policy per published precision, the workload and how the row counts. The
published numbers are only read here, never written into the project, and no constant of mpsim is
set from them (they are tests). Set-up choices that are readings of the sources are said in `note`.
"""

from __future__ import annotations

from collections.abc import Callable

from mpsim.analysis.validation.engine_bench import Cell, Row
from mpsim.analysis.validation.engine_rows_tp_fp8 import e2, e7
from mpsim.analysis.validation.engine_setup import COUNTS, SAME_SHAPES, Count, Precision, RowSetup
from mpsim.errors import MpsimInputError

__all__ = ["COUNTS", "NOT_OWNED", "READERS", "Count", "Precision", "RowSetup", "setups"]


def e1(row: Row, table: dict[str, Row]) -> RowSetup:
    Cell(row, "GPU").need("H200")
    Cell(row, "model").need("Llama-3.1-8B, TP 1")
    Cell(row, "counts").need("output tokens over the whole run")
    prompt, gen, *batches = Cell(row, "workload").ints(
        r"input (\d+), output (\d+); batch ([\d /]+)$", "'input N, output N; batch B / B / ...'")
    pub = Cell(row, "published result")
    return RowSetup("E1", "trtllm", "h200-sxm", "llama-3-8b", prompt, gen, tuple(batches), "whole-run",
                    (Precision("BF16", "fp16", pub.series("BF16", len(batches))),
                     Precision("INT4-AWQ", "w4g128", pub.series("INT4-AWQ", len(batches)),
                               method="awq"),
                     Precision("FP8", "fp8", pub.series("FP8", len(batches)), owner="26")),
                    f"{SAME_SHAPES}; INT4-AWQ as w4g128 (ModelOpt's AWQ block size 128), an AWQ "
                    f"checkpoint (the trtllm file's pre-quant scale launch before each CUTLASS "
                    f"GEMM); FP8 as fp8 (W8A8 e4m3, per-tensor scales: ModelOpt's FP8 recipe, the "
                    f"activations quantized with its static per-tensor scale inside the kernel that "
                    f"produces them: the trtllm file's `act_quant: fused`); every run with a 16-bit KV "
                    f"cache (the benchmark names no KV format: an assumption)")


def e4(row: Row, table: dict[str, Row]) -> RowSetup:
    Cell(row, "GPU").need("H100")
    Cell(row, "model").need("Llama-2-7B, TP 1")
    pub = Cell(row, "published result")
    pub.need("speedup over FP16")
    prompt, gen = Cell(row, "workload").ints(r"input (\d+), output (\d+)", "'input N, output N'")
    batches = pub.ints(r"\(bs (\d+)\).*?\(bs (\d+)\)", "two '(bs N)'")
    fp8 = pub.match(r"FP8 (\d+(?:\.\d+)?)x \(bs \d+\), (\d+(?:\.\d+)?)x \(bs \d+\)",
                    "'FP8 R.RRx (bs N), R.RRx (bs N)'").groups()
    return RowSetup("E4", "trtllm", "h100-sxm", "llama-2-7b", prompt, gen, batches, "whole-run",
                    (Precision("FP16", "fp16", None),
                     Precision("FP8", "fp8", None, owner="26", ratios=tuple(float(r) for r in fp8))),
                    "the row publishes only speedups of FP8 and INT8 SmoothQuant over FP16: the FP16 run "
                    "is their baseline (no absolute is published, so no value is checked) and FP8's "
                    "ratio to it is (fp8: W8A8 e4m3, per-tensor scales, 16-bit KV: the blog names none)")


LOG_INTERVAL = 40   # sgl-project/sglang python/sglang/srt/server_args.py: decode_log_interval = 40
WARMUP_PASSES = 15  # python/sglang/bench_offline_throughput.py: warm-up output_len 16 (15 decode passes)


def e5(row: Row, table: dict[str, Row]) -> RowSetup:
    Cell(row, "GPU").need("H100")
    Cell(row, "model").need("Llama-3.1-8B")
    Cell(row, "counts").need("steady-state decode")
    Cell(row, "engine, tool").need("torch.compile")
    prompt, gen = Cell(row, "workload").ints(r"(\d+) in / (\d+) out", "'N in / N out'")
    pub = Cell(row, "published result")
    b1, first = pub.match(r"TP1 bs(\d+) tok/s: ([^;]+);", "'TP1 bsN tok/s: label value, ...;'").groups()
    b2, second = pub.match(r"TP1 bs(\d+): ([\d /]+);", "'TP1 bsN: value / value / ...;'").groups()
    labels = [part.rsplit(" ", 1) for part in first.split(", ")]
    at_b2 = [float(v) for v in second.split(" / ")]
    if len(at_b2) != len(labels) or any(len(p) != 2 for p in labels):
        raise pub.error(f"as many TP1 bs{b2} values as TP1 bs{b1} labels ({len(labels)})")
    values = {label: (float(v), at_b2[i]) for i, (label, v) in enumerate(labels)}

    b4, tp4 = pub.match(r"TP4 bs(\d+): ([\d /]+)", "'TP4 bsN: value / value / ...'").groups()
    at_tp4 = [float(v) for v in tp4.split(" / ")]
    if len(at_tp4) != len(labels):
        raise pub.error(f"as many TP4 bs{b4} values as TP1 bs{b1} labels ({len(labels)})")
    by_label = {label: i for i, (label, _) in enumerate(labels)}

    def published(label: str) -> tuple[float, ...]:
        if label not in values:
            raise pub.error(f"a TP1 value labelled {label!r} (labels: {list(values)})")
        return values[label]

    runs = (("bf16", "fp16", "23"), ("int4 g64 (GemLite)", "w4g64", "23"),
            ("fp8 dynamic", "fp8grow", "26"))
    method = {"int4 g64 (GemLite)": "gemlite"}  # SGLang's --torchao-config gemlite-4-64
    tp1 = tuple(Precision(lb, pol, published(lb), owner=own, method=method.get(lb))
                for lb, pol, own in runs)
    tp4_runs = tuple(Precision(f"{lb} TP4", pol, (at_tp4[by_label[lb]],), tp=4,
                               owner="25" if own == "23" else "25, 26", base=lb, batches=(int(b4),),
                               method=method.get(lb))
                     for lb, pol, own in runs)
    return RowSetup("E5", "sglang-torchnative", "h100-sxm", "llama-3-8b", prompt, gen,
                    (int(b1), int(b2)), "decode-log", tp1 + tp4_runs,
                    f"the post's SGLang (commit feb2b76, torch.compile, TorchNativeLlamaForCausalLM: "
                    f"`mpsim engines sglang-torchnative`); int4 g64 as torchao's GemLite layout runs it "
                    f"(GemLite 0.4.1's Triton kernels by M, each at the candidate of its autotuner "
                    f"the model prices fastest: GemLite autotunes by default); torchao's "
                    f"fp8dq-per_row (float8 weights and activations, per-row scales, the post's "
                    f"words) as fp8grow on the file's fp8 GEMM (SGLang's sgl-kernel CUTLASS fp8, "
                    f"standing in for what torchao calls: torch._scaled_mm with row-wise scales, "
                    f"PyTorch's own CUTLASS kernel, aten/src/ATen/native/cuda/RowwiseScaledMM.cu "
                    f"f8f8bf16_rowwise, not modelled); a TP4 run is tensor-parallel over 4 "
                    f"GPUs (DTensor's NCCL all-reduce, the h100-sxm node's NVLink), its figure the "
                    f"batch's rate over all four, its ratio the scaling over the same precision at "
                    f"TP1; the figure is the last 'gen throughput' log line (the post: 'We reported "
                    f"the last throughput'): SGLang logs every decode_log_interval = {LOG_INTERVAL} "
                    f"decode passes (python/sglang/srt/server_args.py), counting the warm-up's "
                    f"{WARMUP_PASSES} (python/sglang/bench_offline_throughput.py: 16 prompts of 256 in "
                    f"/ 16 out before the run); "
                    f"{SAME_SHAPES}", log=(LOG_INTERVAL, WARMUP_PASSES))


def e6(row: Row, table: dict[str, Row]) -> RowSetup:
    Cell(row, "GPU").need("H100")
    Cell(row, "model").need("Llama-3.1-8B, TP 1")
    Cell(row, "counts").need("whole request latency")
    prompt, gen = Cell(row, "engine, tool").ints(r"--input-len (\d+) --output-len (\d+)",
                                                 "'--input-len N --output-len N'")
    batches = Cell(row, "workload").ints(r"batch ([\d /]+)$", "'batch B / B / ...'")
    pub = Cell(row, "published result")
    pub.need("seconds per request")
    labels = (("BF16", "fp16"), ("Marlin int8", "w8g128"), ("Marlin int4", "w4g128"))
    return RowSetup("E6", "vllm", "h100-sxm", "llama-3-8b", prompt, gen, batches, "latency",
                    tuple(Precision(lb, pol, pub.series(lb, len(batches)),
                                    method=None if pol == "fp16" else "rtn") for lb, pol in labels),
                    "vLLM's RTN quantization (PR 23197), group size 128 (its RTN_GROUP_SIZE default): "
                    "vllm/model_executor/layers/quantization/rtn.py: RTNLinearMethod.apply calls "
                    "apply_rtn_marlin_linear, so the vllm file's "
                    f"`rtn` method runs Marlin on Hopper too (Machete serves GPTQ there); {SAME_SHAPES}")


def e8(row: Row, table: dict[str, Row]) -> RowSetup:
    Cell(row, "GPU").need("L40S")
    Cell(row, "model").need("Llama-2-7B")
    Cell(row, "engine, tool").need("max-throughput batch, same memory budget")
    prompt, gen = Cell(row, "workload").ints(r"input (\d+), output (\d+)", "'input N, output N'")
    pub = Cell(row, "published result")
    pub.need("TRT-LLM FP16")
    return RowSetup("E8", "trtllm", "l40s", "llama-2-7b", prompt, gen, None, "whole-run",
                    (Precision("FP16", "fp16", pub.series("FP16", 1)),
                     Precision("W4A16", "w4g128", pub.series("W4A16", 1))),
                    "TensorRT-LLM's batch: the largest that fits mpsim's memory rule (weights, KV cache "
                    "and peak activations within 90% of the GPU, mpsim/memory.py); W4A16 as AWQ "
                    "w4g128 (QServe's TRT-LLM baseline)")


READERS: dict[str, Callable[[Row, dict[str, Row]], RowSetup]] = {
    "E1": e1, "E2": e2, "E4": e4, "E5": e5, "E6": e6, "E7": e7, "E8": e8}

NOT_OWNED: tuple[tuple[str, str], ...] = (
    ("E1 W4A8-AWQ", "W4A8: out of scope"),
    ("E2 W4A8-AWQ", "W4A8: out of scope"),
    ("E3", "no input/output lengths stated: out of scope"),
    ("E4 INT8 SmoothQuant", "SmoothQuant W8A8: out of scope"),
    ("E7 v0.8.5", "the older vLLM's pair (V0 engine); the table compares v0.10.2's, whose engine the "
                  "vllm file describes (V1)"),
    ("E8 W8A8", "SmoothQuant W8A8: out of scope"),
    ("E8 QServe W4A8KV4", "QServe (W4A8, 4-bit KV): out of scope"),
    ("E9", "a decode-attention kernel microbenchmark, not an end-to-end run (point 3 validates kernels)"),
)


def setups(rows: dict[str, Row]) -> list[RowSetup]:
    """Every repeated row's set-up; a missing row is an error naming it."""
    missing = [r for r in READERS if r not in rows]
    if missing:
        raise MpsimInputError(f"engine-benchmarks.md has no row {', '.join(missing)} "
                              f"(rows: {', '.join(rows)})")
    return [read(rows[r], rows) for r, read in READERS.items()]

"""The rows of ../shared/engine-benchmarks.md that issue 23 owns, read into runs mpsim can repeat.

Each reader takes its row's cells (engine_bench.read_table), checks that the row still says what the
set-up assumes (GPU, model, lengths, labels) and returns a RowSetup: the engine file, GPU hardware
file, model preset, mpsim policy per published precision, the workload and how the row counts. The
published numbers are only read here, never written into the project, and no constant of mpsim is
set from them (they are tests). Set-up choices that are readings of the sources are said in `note`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from mpsim.analysis.validation.engine_bench import Cell, Row
from mpsim.errors import MpsimInputError

Count = Literal["whole-run", "decode-rate", "latency"]
COUNTS: dict[Count, str] = {
    "whole-run": "output tokens / s over the whole run, prefill included",
    "decode-rate": "steady-state decode tokens / s (prefill left out)",
    "latency": "seconds per request (the whole batch's run, prefill included)",
}
SAME_SHAPES = ("llama-3-8b stands for Llama-3.1-8B: the same shapes (32 layers, hidden 4096, FFN 14336, "
               "32 query / 8 KV heads of 128, vocabulary 128256); only RoPE scaling differs")


@dataclass(frozen=True)
class Precision:
    label: str                              # as the row writes it
    policy: str                             # the mpsim policy that runs it
    published: tuple[float, ...] | None     # one per batch; None: the row publishes no absolute


@dataclass(frozen=True)
class RowSetup:
    row: str
    engine: str                  # mpsim/data/engines/<engine>.yaml
    hw: str                      # hw_models/<hw>.yaml
    model: str                   # mpsim preset
    prompt_len: int
    gen_len: int
    batches: tuple[int, ...] | None  # None: the largest batch that fits the memory budget
    count: Count
    precisions: tuple[Precision, ...]  # the first is the engine's own bf16/fp16 row (the baseline)
    note: str

    @property
    def baseline(self) -> Precision:
        return self.precisions[0]


def e1(row: Row) -> RowSetup:
    Cell(row, "GPU").need("H200")
    Cell(row, "model").need("Llama-3.1-8B, TP 1")
    Cell(row, "counts").need("output tokens over the whole run")
    prompt, gen, *batches = Cell(row, "workload").ints(
        r"input (\d+), output (\d+); batch ([\d /]+)$", "'input N, output N; batch B / B / ...'")
    pub = Cell(row, "published result")
    return RowSetup("E1", "trtllm", "h200-sxm", "llama-3-8b", prompt, gen, tuple(batches), "whole-run",
                    (Precision("BF16", "fp16", pub.series("BF16", len(batches))),
                     Precision("INT4-AWQ", "w4g128", pub.series("INT4-AWQ", len(batches)))),
                    f"{SAME_SHAPES}; INT4-AWQ as w4g128 (ModelOpt's AWQ block size 128)")


def e4(row: Row) -> RowSetup:
    Cell(row, "GPU").need("H100")
    Cell(row, "model").need("Llama-2-7B, TP 1")
    pub = Cell(row, "published result")
    pub.need("speedup over FP16")
    prompt, gen = Cell(row, "workload").ints(r"input (\d+), output (\d+)", "'input N, output N'")
    batches = pub.ints(r"\(bs (\d+)\).*?\(bs (\d+)\)", "two '(bs N)'")
    return RowSetup("E4", "trtllm", "h100-sxm", "llama-2-7b", prompt, gen, batches, "whole-run",
                    (Precision("FP16", "fp16", None),),
                    "the row publishes only speedups of FP8 and INT8 SmoothQuant over FP16: the FP16 run "
                    "is their baseline; nothing of it is checked here (no absolute is published), the "
                    "FP8/FP4 issue checks FP8's ratio against it")


def e5(row: Row) -> RowSetup:
    Cell(row, "GPU").need("H100")
    Cell(row, "model").need("Llama-3.1-8B")
    Cell(row, "counts").need("steady-state decode")
    prompt, gen = Cell(row, "workload").ints(r"(\d+) in / (\d+) out", "'N in / N out'")
    pub = Cell(row, "published result")
    b1, first = pub.match(r"TP1 bs(\d+) tok/s: ([^;]+);", "'TP1 bsN tok/s: label value, ...;'").groups()
    b2, second = pub.match(r"TP1 bs(\d+): ([\d /]+);", "'TP1 bsN: value / value / ...;'").groups()
    labels = [part.rsplit(" ", 1) for part in first.split(", ")]
    at_b2 = [float(v) for v in second.split(" / ")]
    if len(at_b2) != len(labels) or any(len(p) != 2 for p in labels):
        raise pub.error(f"as many TP1 bs{b2} values as TP1 bs{b1} labels ({len(labels)})")
    values = {label: (float(v), at_b2[i]) for i, (label, v) in enumerate(labels)}

    def published(label: str) -> tuple[float, ...]:
        if label not in values:
            raise pub.error(f"a TP1 value labelled {label!r} (labels: {list(values)})")
        return values[label]

    return RowSetup("E5", "sglang", "h100-sxm", "llama-3-8b", prompt, gen, (int(b1), int(b2)),
                    "decode-rate",
                    (Precision("bf16", "fp16", published("bf16")),
                     Precision("int4 g64 (GemLite)", "w4g64", published("int4 g64 (GemLite)"))),
                    f"GemLite's Triton W4A16 is not a modelled library: the sglang file's int4 kernel "
                    f"(its Marlin path) stands in for it (`mpsim engines sglang`); {SAME_SHAPES}")


def e6(row: Row) -> RowSetup:
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
                    tuple(Precision(lb, pol, pub.series(lb, len(batches))) for lb, pol in labels),
                    "vLLM's RTN quantization (PR 23197), group size 128 (its RTN_GROUP_SIZE default), "
                    "runs on Marlin; the vllm file picks its Hopper w8/w4 kernel (`mpsim engines vllm`: "
                    f"Machete, vLLM's GPTQ/AWQ choice on Hopper), which prices these rows; {SAME_SHAPES}")


def e8(row: Row) -> RowSetup:
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


READERS: dict[str, Callable[[Row], RowSetup]] = {"E1": e1, "E4": e4, "E5": e5, "E6": e6, "E8": e8}

NOT_OWNED: tuple[tuple[str, str], ...] = (
    ("E1 FP8", "FP8 weights and activations: the FP8/FP4 issue"),
    ("E1 W4A8-AWQ", "W4A8: out of scope of issue 23"),
    ("E2", "Llama-3.1-70B, its BF16 baseline on TP 2: the parallelism issue (FP8: the FP8/FP4 issue)"),
    ("E3", "no input/output lengths stated: out of scope"),
    ("E4 FP8", "the FP8/FP4 issue"),
    ("E4 INT8 SmoothQuant", "SmoothQuant W8A8: out of scope"),
    ("E5 fp8 dynamic", "the FP8/FP4 issue"),
    ("E5 TP4", "tensor parallel: the parallelism issue"),
    ("E7", "bf16 vs FP8 at saturation (Qwen3-8B): the FP8/FP4 issue"),
    ("E8 W8A8", "SmoothQuant W8A8: out of scope"),
    ("E8 QServe W4A8KV4", "QServe (W4A8, 4-bit KV): out of scope"),
    ("E9", "a decode-attention kernel microbenchmark, not an end-to-end run (point 3 validates kernels)"),
)


def setups(rows: dict[str, Row]) -> list[RowSetup]:
    """Every owned row's set-up; a missing row is an error naming it."""
    missing = [r for r in READERS if r not in rows]
    if missing:
        raise MpsimInputError(f"engine-benchmarks.md has no row {', '.join(missing)} "
                              f"(rows: {', '.join(rows)})")
    return [read(rows[r]) for r, read in READERS.items()]

"""The trace row: one kernel launch, the contract between engine, synthesizer, simulator and analysis.

COLUMNS is the one list of the trace's columns (name -> pandas dtype; None/<NA> = not applicable).
Change it here only, and bump SCHEMA_VERSION when columns or their meaning change.

STORAGE is how each column is held in memory and stored in Parquet: the narrowest type that holds
every value the column can take (a 2.4M-launch trace is held once, in ~200 bytes a launch). Integer
columns narrower than Int64 hold sizes, steps and bit widths; text columns are categorical (a few
dozen distinct kernels, modules, grids and configs over millions of launches). Reading accepts
either width (a file written with COLUMNS' types reads the same); a value that does not fit its
storage type is an error naming the row and column.
"""

from __future__ import annotations

# Versions: 1 the first; 2 adds the `kv_tokens` column (decode attention over a batch of different
# KV lengths); 3 adds the metadata field `protocol`. Every version is read: version-1 files get
# kv_tokens filled on read, and files before 3 take their protocol from a capture's
# environment["protocol"] when it names one (traces/io.py); what is read is upgraded to this version.
# 4 adds the metadata field `engine` (issue 23: the stack whose kernels the rows are, one of the
# shipped engine files, mpsim/data/engines); files before 4 read as "mpsim", whose kernels every
# earlier trace ran. Version 4 is that field only: later changes of issue 23's siblings (parallelism,
# FP8/FP4) take version 5 and up.
# Version 5 (issue 25, parallel plans) adds the columns `tp` (the tensor-parallel group that runs the
# row: every rank runs the same shapes, so one row per kernel, not one per rank), `stage` (the
# pipeline stage), `msg_bytes` and `comm_library` (collective rows: the message in bytes as
# nccl-tests counts it, and the library that runs it, COMM_LIBRARIES), and the collective ops
# (COLLECTIVE_OPS); files before 5 read with tp 1, stage 0 and no collectives (traces/io.py).
# Version 5 also adds the `kv_format` column (issue 26: the KV cache's element format, since k_bits = 8 cannot
# tell int8 from fp8 e4m3); files before 5 read it from k_bits (16 fp16, 8 int8, 4 int4) on
# attention and KV-write rows, <NA> elsewhere (traces/io.py).
# Version 6 (issue 25, pipeline micro-batches) adds the column `micro_batch`: which of a pipelined
# batch's micro-batches the row belongs to (`mpsim synth --pp N --micro-batches M`: the batch split
# into M micro-batches of batch/M sequences, each with its own launches and send/recvs between stages;
# the simulator schedules the stages concurrently, mpsim/sim/pipeline.py); files before 6 read with
# micro_batch 0 (one batch, traces/io.py).
SCHEMA_VERSION = 6
READABLE_VERSIONS = (1, 2, 3, 4, 5, 6)
DEFAULT_ENGINE = "mpsim"  # mpsim's own kernels: what capture runs, what files before version 4 ran

# How a trace's measured_us were timed (docs/validation.md#measurement-protocols): `kernel` (the
# GPU duration of each kernel, CUPTI/Kineto: no launch gap), `graph` (mean per call inside a CUDA
# graph), `eager` (host wall clock around one framework call), `trt-profiler` (TensorRT's per-layer
# IProfiler). The fixed cost of each lives in mpsim/sim/protocols.yaml.
PROTOCOLS = ("kernel", "graph", "eager", "trt-profiler")

# Collectives of a parallel plan: all-reduce after a row-parallel GEMM, all-gather of the logits of a
# vocab-parallel lm_head, reduce-scatter, and the point-to-point send/recv between pipeline stages.
COLLECTIVE_OPS = ("allreduce", "allgather", "reducescatter", "sendrecv")
OPS = ("gemm", "attention", "kv_quant", "norm", "rope", "act", "embed", "sample", "other", *COLLECTIVE_OPS)
# Who runs a collective: NCCL (torch.distributed), vLLM's or TensorRT-LLM's custom all-reduce kernels
# (the engine files' `allreduce` op, mpsim/data/engines); mpsim/sim/collectives.py prices each.
COMM_LIBRARIES = ("nccl", "vllm_custom", "trtllm_custom")
PHASES = ("prefill", "decode")
W_FORMATS = ("fp16", "int8-group", "int4-group", "int3-group", "int2-group", "anyprec", "fp8", "fp8-block",
             "nvfp4", "mxfp4")
# The w_bits each w_format stores (any-precision: the widths a 2..8-bit parent serves).
FORMAT_BITS: dict[str, tuple[int, ...]] = {
    "fp16": (16,), "int8-group": (8,), "int4-group": (4,), "int3-group": (3,), "int2-group": (2,),
    "anyprec": tuple(range(2, 9)), "fp8": (8,), "fp8-block": (8,), "nvfp4": (4,), "mxfp4": (4,),
}
KV_BITS = (16, 8, 4)
# The KV cache's element format (column `kv_format`, version 5) and the bits each stores; files
# before version 5 read as the integer format of their k_bits (KV_FORMAT_OF_BITS).
KV_FORMATS: dict[str, int] = {"fp16": 16, "int8": 8, "int4": 4, "fp8-e4m3": 8}
KV_FORMAT_OF_BITS: dict[int, str] = {16: "fp16", 8: "int8", 4: "int4"}

# Column name -> pandas dtype (nullable extension types, so "not applicable" is <NA>, not NaN or -1).
COLUMNS: dict[str, str] = {
    # identity
    "launch_id": "Int64", "stream": "Int64", "kernel": "string", "op": "string",
    "phase": "string", "step": "Int64", "layer": "Int64", "module": "string",
    # gemm (m, n also give rows x width for the small row-wise ops)
    "m": "Int64", "n": "Int64", "k": "Int64", "w_format": "string", "w_bits": "Int64",
    "group_size": "Int64", "a_dtype": "string", "out_dtype": "string", "bias": "boolean",
    # attention and KV writes
    "batch": "Int64", "q_len": "Int64", "kv_len": "Int64", "num_q_heads": "Int64",
    "num_kv_heads": "Int64", "head_dim": "Int64", "k_bits": "Int64", "v_bits": "Int64",
    "causal": "boolean", "kv_block": "Int64", "kv_format": "string",
    # decode attention: KV tokens read over the whole batch (the sum of the sequences' lengths;
    # kv_len is the longest, which sets the grid); batch x kv_len for a uniform batch, <NA> elsewhere
    "kv_tokens": "Int64",
    # launch config, JSON text
    "grid": "string", "config": "string",
    # analytic accounting (traces.accounting.launch_cost)
    "flops": "Int64", "bytes_read": "Int64", "bytes_written": "Int64",
    # measurement
    "measured_us": "Float64", "device": "string",
    # parallel plan (version 5): tensor-parallel group size, pipeline stage, collective message
    "tp": "Int64", "stage": "Int64", "msg_bytes": "Int64", "comm_library": "string",
    # pipeline micro-batch (version 6): 0 for a batch that is not split
    "micro_batch": "Int64",
}

_NARROW = {
    **dict.fromkeys(("stream", "step", "layer", "m", "n", "k", "group_size", "batch", "q_len", "kv_len",
                     "num_q_heads", "num_kv_heads", "head_dim", "kv_block"), "Int32"),
    **dict.fromkeys(("w_bits", "k_bits", "v_bits"), "Int8"),
    **dict.fromkeys(("tp", "stage", "micro_batch"), "Int16"),
}  # launch_id, FLOPs and bytes stay Int64; measured_us Float64; bias, causal boolean
STORAGE: dict[str, str] = {c: "category" if t == "string" else _NARROW.get(c, t) for c, t in COLUMNS.items()}

REQUIRED = ("launch_id", "stream", "kernel", "op", "phase", "step", "layer", "module",
            "grid", "config", "flops", "bytes_read", "bytes_written", "tp", "stage",
            "micro_batch")
REQUIRED_BY_OP: dict[str, tuple[str, ...]] = {
    "gemm": ("m", "n", "k", "w_format", "w_bits"),
    "attention": ("batch", "q_len", "kv_len", "num_q_heads", "num_kv_heads", "head_dim",
                  "k_bits", "v_bits", "causal", "kv_format"),
    "kv_quant": ("batch", "q_len", "num_kv_heads", "head_dim", "k_bits", "v_bits", "kv_format"),
    "norm": ("m", "n"), "rope": ("m", "n", "k"), "act": ("m", "n", "k"),
    "embed": ("m", "n"), "sample": ("m", "n"), "other": ("m", "n"),
    **dict.fromkeys(COLLECTIVE_OPS, ("m", "n", "msg_bytes", "comm_library")),
}
NON_NEGATIVE = ("step", "m", "n", "k", "w_bits", "group_size", "batch", "q_len", "kv_len",
                "num_q_heads", "num_kv_heads", "head_dim", "k_bits", "v_bits", "kv_block",
                "kv_tokens", "flops", "bytes_read", "bytes_written", "measured_us", "launch_id", "stream",
                "stage", "msg_bytes", "micro_batch")
POSITIVE = ("tp",)  # a group has at least one rank

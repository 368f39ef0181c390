"""CUDA-graph decoding, checked on the CPU: the mode is chosen only with a CUDA device (else a clear
fallback message); with capture/replay emulated (the pass runs eagerly when "captured" and again at
each "replay"), the graph path generates what the eager path does and records the launches `mpsim
synth --cuda-graphs` lists; kernel records are matched to rows in order. The real torch.cuda capture
is compiled (imported, type-checked) here and runs only on a GPU."""

from __future__ import annotations

import json
from typing import Any
from unittest import mock

import pandas as pd
import pytest
import torch
from engine_cases import SMALL

from mpsim.engine.backends import TritonBackend
from mpsim.engine.capture import capture_protocol
from mpsim.engine.generate import generate
from mpsim.engine.graphs import (
    DecodeGraphs,
    choose_decode_mode,
    kernel_records,
    match_kernel_times,
    use_decode_mode,
)
from mpsim.engine.model import Decoder
from mpsim.engine.scheduler import FixedScheduler
from mpsim.engine.weights import dummy_weights
from mpsim.kernels import runtime
from mpsim.kernels.launch_config import attention_decode_config, graph_kv_capacity
from mpsim.policy import parse_policy
from mpsim.synth import synthesize
from mpsim.traces.recorder import Recorder
from mpsim.traces.schema import PROTOCOLS
from mpsim.traces.trace import Trace, TraceMeta
from mpsim.workload import Workload

COMPARED = ["kernel", "op", "phase", "step", "layer", "module", "m", "n", "k", "w_format", "w_bits",
            "batch", "q_len", "kv_len", "num_q_heads", "num_kv_heads", "head_dim", "k_bits", "v_bits",
            "grid", "config", "flops", "bytes_read", "bytes_written"]


def test_graphs_only_with_a_cuda_device() -> None:
    assert choose_decode_mode("auto", gpu=True) == ("graphs", None)
    assert choose_decode_mode("graphs", gpu=True) == ("graphs", None)
    assert choose_decode_mode("eager", gpu=True) == ("eager", None)
    mode, message = choose_decode_mode("graphs", gpu=False)
    assert mode == "eager" and message is not None and "CUDA graphs need a CUDA device" in message
    assert choose_decode_mode("eager", gpu=False) == ("eager", None)
    with pytest.raises(ValueError, match="decode mode 'fast'"):
        choose_decode_mode("fast")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the fallback is what a machine without CUDA does")
def test_without_cuda_the_engine_falls_back_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    dec = Decoder(dummy_weights(SMALL, 0), parse_policy("fp16"), TritonBackend())
    assert use_decode_mode(dec, "graphs") == "eager" and dec.graphs is None
    assert "CUDA graphs need a CUDA device" in capsys.readouterr().err
    assert capture_protocol(False, "eager") == "eager" and capture_protocol(True, "graphs") == "kernel"
    assert {"kernel", "graph", "eager", "trt-profiler"} == set(PROTOCOLS)


def _no_sync(self: torch.Tensor) -> Any:
    raise RuntimeError("CUDA error: operation not permitted when stream is capturing (a host sync)")


class EmulatedGraphs:
    """Capture runs the pass once (its launches recorded) as CUDA captures it: the stream reports
    capturing and a host sync (`.item()`) fails; replay runs it again unrecorded and copies the
    result into the captured output buffer, as a real replay rewrites it in place."""

    def capture(self, fn: Any) -> tuple[Any, torch.Tensor]:
        with mock.patch.object(runtime, "capturing", lambda: True), \
                mock.patch.object(torch.Tensor, "item", _no_sync):
            out = fn()
        return (fn, out), out

    def replay(self, graph: Any) -> tuple[int, int]:
        fn, out = graph
        with Recorder():
            out.copy_(fn())
        return 0, 0

    def elapsed_us(self, events: Any) -> float:
        return 0.0


def test_emulated_graph_decoding_matches_eager_and_synthesis() -> None:
    policy = parse_policy("ap4-4@1-3+kv8")
    params = dummy_weights(SMALL, 1)
    prompts = [[5, 6, 7, 8, 9], [1, 2, 3]]
    eager = generate(Decoder(params, policy, TritonBackend()), prompts, 3, FixedScheduler(policy),
                     keep_logits=True)
    dec = Decoder(params, policy, TritonBackend())
    dec.graphs = DecodeGraphs(dec, device=EmulatedGraphs())
    with Recorder() as rec:
        graphed = generate(dec, [[5, 6, 7, 8, 9], [1, 2, 3, 0, 0]][:1] * 2, 3, FixedScheduler(policy))
    assert len(dec.graphs.graphs) == 2  # (batch 2, 4 bits) and (batch 2, 3 bits), capacity 256
    assert {k[2] for k in dec.graphs.graphs} == {graph_kv_capacity(5 + 3)} == {256}
    again = generate(dec, prompts, 3, FixedScheduler(policy), keep_logits=True)
    assert again.tokens == eager.tokens  # replays on the pooled cache, other prompts
    for a, b in zip(again.logits, eager.logits, strict=True):
        assert torch.allclose(a.float(), b.float(), atol=2e-2)
    assert len(graphed.tokens[0]) == 3 and len(dec.graphs.replay_times()) == 4

    rows = Trace.from_rows(rec.finish(), TraceMeta("capture", {}, policy.spelling, {}, {})).rows
    syn = synthesize(SMALL, policy, Workload(5, 3, 2), on_gpu=False, cuda_graphs=True).rows
    pd.testing.assert_frame_equal(rows[COMPARED].reset_index(drop=True), syn[COMPARED], check_dtype=False)
    attn = syn[(syn["op"] == "attention") & (syn["phase"] == "decode")]
    want = attention_decode_config(2, 4, 2, 32, 256, 8, None, on_gpu=False)
    assert set(attn["grid"]) == {json.dumps(list(want.grid))} and list(attn["kv_len"]) == [6, 7]


def test_kernel_records_match_rows_in_order() -> None:
    doc = {"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "gemv_fp16_kernel_0d1d2", "ts": 10, "dur": 4.0},
        {"ph": "X", "cat": "kernel", "name": "void at::native::copy_kernel", "ts": 5, "dur": 1.0},
        {"ph": "X", "cat": "cpu_op", "name": "gemv_fp16_kernel", "ts": 11, "dur": 9.0},
        {"ph": "X", "cat": "kernel", "name": "rms_norm_kernel", "ts": 20, "dur": 2.0},
        {"ph": "X", "cat": "kernel", "name": "gemv_fp16_kernel", "ts": 30, "dur": 5.0},
    ]}
    records = kernel_records(doc)
    assert records[0][0] == "void at::native::copy_kernel"
    assert match_kernel_times(["gemv_fp16_kernel", "rms_norm_kernel", "gemv_fp16_kernel", "argmax_kernel"],
                              records) == [4.0, 2.0, 5.0, None]

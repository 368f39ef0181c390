"""The collective cost model (mpsim/sim/collectives.py) against hand computations, the libraries'
choices, and (when ../shared/groundtruth is there) the measured rows."""

from __future__ import annotations

from pathlib import Path

import pytest
from groundtruth_cases import GROUNDTRUTH, needs_groundtruth

from mpsim.analysis.validation import collectives as val
from mpsim.sim.collectives import NodeFit, custom_allreduce_time, nccl_time, plain_bound

FIT = NodeFit(link_gbps=100.0, topology="nvswitch", arch="hopper", nvls=False, nccl_efficiency=1.0,
              nccl_allreduce_efficiency=1.0, custom_latency_us=3.0, custom_efficiency=0.5,
              eager_floor_us=20.0)


def test_large_all_reduce_is_ring_simple_by_hand() -> None:
    # ring Simple: 8.4 + 2(n-1) x 3.4 µs, algBw = busBw x n / (2(n-1)); LL128 (x0.92, 14 + 6 x 1.9) and
    # tree Simple (x0.92 x 0.5, 8.4 + 6 x 4.0) are slower at 1 GB
    cost = nccl_time("all_reduce", 1e9, 4, FIT)
    assert (cost.algorithm, cost.protocol, cost.steps) == ("ring", "Simple", 6)
    assert cost.time_us == pytest.approx(8.4 + 6 * 3.4 + 1e9 / (100 * 4 / 6 * 1e3), rel=1e-12)
    assert cost.bytes_per_step == 1e9 / 4
    assert cost.bus_gbps == pytest.approx(2 * 3 / 4 * 1e9 / (cost.time_us * 1e3), rel=1e-12)


def test_small_message_takes_ll() -> None:
    cost = nccl_time("all_gather", 1024, 2, FIT)
    assert (cost.algorithm, cost.protocol, cost.steps) == ("ring", "LL", 1)
    assert cost.time_us == pytest.approx(6.6 + 0.6 + 1024 / (100 * 0.5 * 2 * 1e3), rel=1e-12)


def test_nvls_wins_large_all_reduce_where_the_switch_reduces() -> None:
    nvls = NodeFit(**{**FIT.__dict__, "nvls": True})
    assert nccl_time("all_reduce", 1e9, 8, nvls).algorithm == "nvls"
    assert nccl_time("all_reduce", 1e9, 2, nvls).algorithm == "ring"  # NVLS needs more than 2 GPUs
    assert nccl_time("all_reduce", 4096, 8, nvls).protocol == "LL"  # 25 µs NVLS latency loses when small


def test_vllm_chooses_as_custom_all_reduce_cuh_does() -> None:
    nvls = NodeFit(**{**FIT.__dict__, "nvls": True})
    assert custom_allreduce_time(10 << 20, 2, nvls, "vllm").algorithm == "oneshot"  # 2 GPUs: always
    assert custom_allreduce_time(500 << 10, 4, nvls, "vllm").algorithm == "oneshot"  # < 512 KiB
    assert custom_allreduce_time(512 << 10, 4, nvls, "vllm").algorithm == "twoshot"
    assert custom_allreduce_time(200 << 10, 8, nvls, "vllm").algorithm == "oneshot"  # < 256 KiB
    assert custom_allreduce_time(300 << 10, 8, nvls, "vllm").algorithm == "symm_mem"  # past sm90's 256 KiB
    assert custom_allreduce_time(100 << 20, 2, nvls, "vllm").algorithm == "ring"  # past 64 MiB: NCCL
    pcie = NodeFit(**{**FIT.__dict__, "topology": "pcie"})
    assert custom_allreduce_time(1 << 10, 4, pcie, "vllm").protocol == "LL"  # > 2 PCIe GPUs: NCCL


def test_custom_kernels_by_hand_and_the_eager_floor() -> None:
    one = custom_allreduce_time(64 << 10, 2, FIT, "vllm")
    assert one.time_us == pytest.approx(3.0 + (64 << 10) / (50 * 1e3), rel=1e-12)  # (n-1) S at 50 GB/s
    # TRT-LLM: where its strategy table names a custom kernel (its measured winner of the two) the
    # faster of one-shot and two-shot; NCCL where the table or the workspace says so
    twoshot = NodeFit(**{**FIT.__dict__, "trtllm_twoshot_efficiency": 0.25, "trtllm_twoshot_us": 0.5})
    small = custom_allreduce_time(16 << 10, 8, twoshot, "trtllm")  # 2 tokens, TP 8: one-shot is faster
    assert small.algorithm == "oneshot"
    cheap = NodeFit(**{**FIT.__dict__, "trtllm_twoshot_efficiency": 5.0})  # two-shot would win ...
    assert custom_allreduce_time(32 << 10, 4, cheap, "trtllm").algorithm == "twoshot"  # 4 tokens, TP 4
    assert custom_allreduce_time(32 << 10, 8, cheap, "trtllm").algorithm == "oneshot"  # ... not 4 of 8
    assert small.time_us == pytest.approx(3.0 + 7 * (16 << 10) / (50 * 1e3), rel=1e-12)
    two = custom_allreduce_time(512 << 10, 8, twoshot, "trtllm")  # two-shot moves 1.75 S, one-shot 7 S
    assert two.algorithm == "twoshot"
    assert two.time_us == pytest.approx(3.0 + 7 * 0.5 + 2 * 7 / 8 * (512 << 10) / (25 * 1e3), rel=1e-12)
    assert custom_allreduce_time(8 << 20, 2, FIT, "trtllm").protocol == "custom"  # 1024 tokens, 2 GPUs
    # above the workspace (16 MB on 2 GPUs, 8 MB on more) NCCL
    assert custom_allreduce_time(16 << 20, 2, FIT, "trtllm").protocol != "custom"
    assert custom_allreduce_time(8 << 20, 8, FIT, "trtllm").protocol != "custom"
    # hidden 512, 8192 tokens on 2 GPUs: NCCL in the sm90 table, a custom kernel in sm100's
    assert custom_allreduce_time(8 << 20, 2, FIT, "trtllm", hidden=512).protocol != "custom"
    blackwell = NodeFit(**{**FIT.__dict__, "arch": "blackwell"})
    assert custom_allreduce_time(8 << 20, 2, blackwell, "trtllm", hidden=512).protocol == "custom"
    pcie = NodeFit(**{**FIT.__dict__, "topology": "pcie"})
    assert custom_allreduce_time(64 << 10, 2, pcie, "trtllm").protocol != "custom"  # no NVLink: NCCL
    # vLLM's own two-shot: two barriers plus its cost per peer (B200's rows need one)
    peer = NodeFit(**{**FIT.__dict__, "vllm_twoshot_us": 1.0})
    vtwo = custom_allreduce_time(512 << 10, 4, peer, "vllm")
    assert vtwo.algorithm == "twoshot"
    assert vtwo.time_us == pytest.approx(2 * 3.0 + 3 * 1.0 + 2 * 3 / 4 * (512 << 10) / (50 * 1e3), rel=1e-12)
    assert custom_allreduce_time(1024, 2, FIT, "vllm", graph=False).time_us == 20.0


def test_plain_bound_by_hand() -> None:
    assert plain_bound("reduce_scatter", 8e6, 8, 100.0, 0.5) == pytest.approx(7 * 0.5 + 7 / 8 * 8e6 / 1e5)
    with pytest.raises(ValueError, match="need n >= 2"):
        nccl_time("all_reduce", 1024, 1, FIT)


def test_validation_skips_with_a_reason_without_data(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert val.main([str(tmp_path)]) == 0
    assert "skipped: no measured collectives" in capsys.readouterr().out


@needs_groundtruth
def test_measured_rows_are_read_in_bytes_and_the_fit_beats_the_plain_bound() -> None:
    rows = val.load_rows(GROUNDTRUTH)
    h200 = rows[(rows["gpu"] == "h200_sxm") & (rows["source"] == "nccl") & (rows["op"] == "all_reduce")]
    big = h200[(h200["n"] == 2) & (h200["bytes"] == 512 << 20)]  # 268435456 half or 536870912 int8 elements
    assert len(big) == 2 and min(abs(big["measured_us"] - 1703.9)) < 0.1  # the half row: 1.7039 ms
    fit = val.fit_node("h200_sxm", rows)
    ev = val.evaluate(rows[rows["gpu"] == "h200_sxm"], {"h200_sxm": fit})
    held = ev[ev["held_out"] & (ev["source"] == "nccl")]
    assert held["model_err"].mean() < 0.15 < held["plain_err"].mean()


def test_group_penalty_and_fitted_nvls_by_hand() -> None:
    fit = NodeFit(**{**FIT.__dict__, "nvls": True, "group_penalty": 0.8, "nvls_fraction": 0.8})
    ring = nccl_time("all_gather", 1e9, 4, fit)  # bus 100 x (1 - 0.8/4) = 80 GB/s, algBw x 4/3
    assert (ring.algorithm, ring.protocol) == ("ring", "Simple")
    assert ring.time_us == pytest.approx(8.4 + 3 * 3.4 + 1e9 / (80 * 4 / 3 * 1e3), rel=1e-12)
    nvls = nccl_time("all_reduce", 1e9, 8, fit)  # algBw 0.8 x 100 = 80 GB/s beats ring: 90 x 8/14
    assert nvls.algorithm == "nvls"
    assert nvls.time_us == pytest.approx(25.0 + 1e9 / (80 * 1e3), rel=1e-12)

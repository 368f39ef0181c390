"""Issue 11's model corrections, each pinned by a test that fails on the model before them.

(DRAM latency weighted by the miss share; no clamp to the roofline, the bound residency-aware and a
launch below it an error; CUDA-core pipes issued concurrently; dequantization from the shipped
kernels' SASS; weight-only never faster than fp16 where the GEMM is compute bound; fewer bits never
slower where memory bound; memo namespaces and sweep keys that follow the code.)
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from mpsim.hw_models.loader import load_hardware
from mpsim.hw_models.schema import GpuSpec
from mpsim.launch_plan import attention_row, gemm_row
from mpsim.models import PRESETS
from mpsim.policy import parse_policy
from mpsim.sim import simulate
from mpsim.sim.best_config import best_gemm_row
from mpsim.sim.gpu.cta import GpuLaunchSim
from mpsim.sim.gpu.model import simulate_gpu_launch
from mpsim.sim.gpu.occupancy import CtaResources
from mpsim.sim.gpu.rates import gpu_rates
from mpsim.sim.gpu.sass import per_weight_mix
from mpsim.sim.gpu.work import Epilogue, KernelWork, Trip, bundles, cuda_cycles
from mpsim.sim.params import DEFAULT_PARAMS
from mpsim.sim.replay import BelowBoundError, finish, simulate_launch
from mpsim.sim.roofline import roofline
from mpsim.synth import synthesize
from mpsim.traces.trace import rows_to_frame
from mpsim.workload import Workload

H200: GpuSpec = load_hardware("h200-sxm")  # type: ignore[assignment]
H100: GpuSpec = load_hardware("h100-sxm")  # type: ignore[assignment]
REL = 1e-9


def _latency_bound_kernel(miss_bytes: float) -> KernelWork:
    """One CTA, 40 trips of one tiny tile each, one stage: every trip waits for its load."""
    trip = Trip(load_bytes=1024.0, mma_flops=0.0)
    res = CtaResources(4, 1024.0, 0.0, 1, 32)
    return KernelWork(trip, Epilogue(0.0), (40,), "single", 1, 1, res, miss_bytes)


def test_dram_latency_is_weighted_by_the_miss_share() -> None:
    """Old model: every trip paid l2 + the full DRAM latency whenever any byte of the launch missed,
    so a launch that misses 1% of its bytes waited as long as one that misses them all."""
    r = gpu_rates(H200, DEFAULT_PARAMS)
    times = {}
    for share in (0.01, 1.0):
        work = _latency_bound_kernel(share * 40 * 1024)
        sim = GpuLaunchSim(r, work, 1, 1)
        times[share] = sim.run(bundles(work, r.sms, r.sms, DEFAULT_PARAMS))
    extra = r.dram_latency - r.l2_latency
    # 39 steady trips differ by 0.99 of the extra DRAM latency each (the first pays it in full both times)
    assert times[1.0] - times[0.01] == pytest.approx(39 * 0.99 * extra, rel=0.02)
    assert times[0.01] < 40 * (r.l2_latency + 0.05 * extra) + r.dram_latency + 2000


def test_cuda_core_pipes_issue_concurrently() -> None:
    """Old model: integer and fp32 work shared one serial pipe (time = int/64 + fp32/128)."""
    r = gpu_rates(H200, DEFAULT_PARAMS)
    trip = Trip(0.0, 0.0, pipes={"fp32": 12800.0, "alu": 6400.0})
    assert cuda_cycles(trip, r) == pytest.approx(max(12800 / 128, 6400 / 64, (12800 + 6400) / 128))
    mixed = Trip(0.0, 0.0, pipes={"fp32": 12800.0, "alu": 3200.0, "cvt": 800.0, "lsu": 1600.0})
    # the issue limit: 18400 lanes at 128 per clock (each pipe alone would be done in 100 cycles)
    assert cuda_cycles(mixed, r) == pytest.approx(18400 / 128)
    # per-pipe busy time is kept apart: a trip of only integer work leaves the fp32 pipe idle
    work = KernelWork(Trip(0.0, 0.0, pipes={"alu": 6400.0}), Epilogue(0.0), (10,), "single", 132, 132,
                      CtaResources(4, 0.0, 0.0, 1, 32), 0.0)
    sim = GpuLaunchSim(r, work, 1, 1)
    sim.run(bundles(work, r.sms, r.sms, DEFAULT_PARAMS))
    assert sim.pipe_busy["fp32"] == 0 and sim.pipe_busy["alu"] == pytest.approx(132 * 10 * 100)


def test_a_launch_below_its_residency_aware_bound_is_an_error_naming_it() -> None:
    """Old model: finish() clamped such a launch to the bound and set `floored`; now nothing is
    clamped and no `floored` column exists."""
    tr = synthesize(PRESETS["mobilellama-1.4b"], parse_policy("fp16"), Workload(8, 2, 1))
    rows = tr.rows
    res = simulate(tr, H200, cache_dir=None)
    assert "floored" not in res.launches.columns
    per = res.launches.drop(columns=["launch_id", "start_s", "end_s", "time_s", "t_math_s",
                                     "t_mem_s", "t_lower_s"]).copy()
    per.loc[per.index[5], "kernel_s"] = 0.0
    per.loc[per.index[5], "overhead_s"] = 0.0
    with pytest.raises(BelowBoundError, match=f"launch {rows['launch_id'].iloc[5]} "):
        finish(rows, per, H200)


def test_the_bound_counts_only_the_dram_bytes_left_after_the_predecessors_output() -> None:
    tr = synthesize(PRESETS["vicuna-7b"], parse_policy("fp16"), Workload(512, 1, 1))
    rows = tr.rows.iloc[:8].reset_index(drop=True)
    plain, resident = roofline(rows, H200), roofline(rows, H200, resident=True)
    qkv = rows.index[rows["module"] == "qkv"][0]  # reads the norm's 4 MiB output
    saved = (plain.t_mem_s - resident.t_mem_s)[qkv] * H200.dram_bandwidth_Bps()
    assert saved == pytest.approx(512 * 4096 * 2)
    assert resident.t_mem_s[0] == plain.t_mem_s[0]  # the first launch has no predecessor


def test_dequantization_costs_the_shipped_kernels_sass_mix() -> None:
    """Old model: 1.5 integer ops per weight for every group width (a magic-number dequant the
    kernels do not do); now each kernel's K trip issues its own SASS mix by pipe."""
    row = gemm_row(1, 4096, 4096, "group", 4)
    cfg = json.loads(row["config"])
    mix = per_weight_mix(row["kernel"], 4, cfg["block_m"], cfg["block_n"], cfg["block_k"],
                         cfg["num_warps"], loop_stages=cfg["loop_stages"])
    # the pipelined loop's own row (its cp.async staging adds LSU and barrier slots)
    plain = per_weight_mix(row["kernel"], 4, cfg["block_m"], cfg["block_n"], cfg["block_k"],
                           cfg["num_warps"])
    assert mix != plain and mix["lsu"] > plain["lsu"]
    assert mix["issue"] > 2.0 and mix["alu"] > 1.0
    from mpsim.sim.gpu.model import launch_work
    part = launch_work(row, gpu_rates(H200, DEFAULT_PARAMS), DEFAULT_PARAMS, 0.0)[0]
    weights = cfg["block_n"] * cfg["block_k"]
    assert part.work.trip.pipes["alu"] == pytest.approx(mix["alu"] * weights)


FILL = 0.005  # the pipeline-fill advantage a compute-bound quantized GEMM may show (below)


@pytest.mark.parametrize("hw", [H200, H100], ids=["h200", "h100"])
@pytest.mark.parametrize(("family", "bits"), [("group", 8), ("group", 4), ("group", 3), ("group", 2),
                                              ("anyprec", 4), ("anyprec", 3)])
def test_a_weight_only_gemm_is_never_faster_than_fp16_where_compute_bound(
        hw: GpuSpec, family: str, bits: int) -> None:
    """Old model: large quantized GEMMs came out 1-6% faster than fp16 (less L2 traffic per tile,
    dequantization assumed hidden). Compared at one clock: under the power limit (issue 24,
    mpsim/sim/gpu/power.py) a quantized GEMM that moves fewer L2 bytes spends less energy per cycle
    and may clock higher than fp16, a power effect, not hidden dequantization."""
    m, n, k = 4096, 4096, 4096
    fp16 = simulate_launch(gemm_row(m, n, k), hw)
    at = fp16.clock_hz
    quant = simulate_gpu_launch(gemm_row(m, n, k, family, bits), hw, DEFAULT_PARAMS, clock_hz=at)
    assert quant.time_s >= fp16.time_s * (1 - REL)
    best16 = best_gemm_row(m, n, k, hw=hw)
    bestq = best_gemm_row(m, n, k, family, bits, hw=hw)
    b16 = simulate_gpu_launch(best16.row, hw, DEFAULT_PARAMS, clock_hz=at).time_s
    bq = simulate_gpu_launch(bestq.row, hw, DEFAULT_PARAMS, clock_hz=at).time_s
    # and fp16 at the quantized winner's own tile: the candidate sets differ (a quantized K tile is
    # fitted to the group, 32), and a tile fp16 runs too is no advantage of the format. Since the
    # dot-operand tiles (dot_tile._dot_w) the group GEMMs' best tiles are tensor-bound like
    # fp16's, and at one tile the quantized one comes out 0.1-0.3% faster (h200, 4-bit, 128 x 256 x
    # 32: 202.29 against 202.82 us): its pipeline fills a W tile of a quarter of fp16's bytes, so
    # the first trips of each wave wait less. FILL bounds that (the old bug was 1-6%).
    same = dataclasses.replace(bestq.config, kernel="gemm_fp16_kernel", extra=())
    b16 = min(b16, simulate_gpu_launch(gemm_row(m, n, k, config=same, sms=hw.compute_units), hw,
                                       DEFAULT_PARAMS, clock_hz=at).time_s)
    assert bq >= b16 * (1 - FILL)


GROUP_WIDTHS = (8, 4, 3, 2)
ANYPREC_WIDTHS = (8, 7, 6, 5, 4, 3, 2)
GPUS = ["h200-sxm", "h100-sxm", "a100-sxm-80gb", "l40s", "rtx-4090", "b200-sxm"]
SHAPES = [(4096, 4096), (11008, 4096), (4096, 11008)]


def _violations(hw_name: str, m: int, n: int, k: int, tuned: bool) -> set[tuple[str, int, int]]:
    """Pairs (family, wider, narrower) where the narrower width is slower: at the configs the GPU
    launchers autotune to (tuned: the model-guided best of the same candidate set, kernels/autotune.py)
    or at the fixed heuristic configs (the interpreter's, and synthesis without --hw)."""
    hw = load_hardware(hw_name)
    bad = set()
    for family, widths in (("group", GROUP_WIDTHS), ("anyprec", ANYPREC_WIDTHS)):
        if tuned:
            times = [best_gemm_row(m, n, k, family, b, hw=hw).predicted_s for b in widths]
        else:
            times = [simulate_launch(gemm_row(m, n, k, family, b), hw).time_s for b in widths]
        for i, wide in enumerate(times):
            for j in range(i + 1, len(times)):
                if times[j] > wide * (1 + REL):
                    bad.add((family, widths[i], widths[j]))
    return bad


def _tuned_violations(hw_name: str) -> dict[tuple[int, int, int], set[tuple[str, int, int]]]:
    return {(m, n, k): v for m in (1, 2, 16) for n, k in SHAPES
            if (v := _violations(hw_name, m, n, k, tuned=True))}


@pytest.mark.parametrize("hw_name", [h for h in GPUS if h != "b200-sxm"])
def test_fewer_bits_are_never_slower_as_the_kernels_are_tuned(hw_name: str) -> None:
    """Every pair of one family at M <= 16 (1, 2 and 16 rows; the decode shapes of a 7B model),
    bound or not, at the configs the launchers autotune to on a GPU. Old code: with one activation
    row the GEMVs reduced every K tile across lanes (4-5 load/store lanes per weight) and the 3-bit
    unpack cost more than the 4-bit one, so 3- and 2-bit came out slower than 4-bit (h200-sxm,
    m=1: 4->3 and 3->2 bit); per-lane partial sums, 8192-weight tiles and 2-bit units fixed that.
    Issue 22's pair extraction (one shift and one mask per two codes at every width) made 3- and
    2-bit 1-6% slower than 4-bit again (4->3 and 4->2 on every GPU), until the 3- and 2-bit GEMVs
    took most pairs at their own bits of the fp16 mantissa, without a shift (group_dequant._at).
    a100-sxm-80gb (fp32 pipe 64 lanes per clock) kept 4 -> 3 bits out of order at one row (the
    3-bit loop's fp16 offsets) until the one-row GEMV's fp16 partial sums took the scale and zero
    out of the per-weight loop (kernels/gemv_group.py: fp32 pipe 1.5-1.7 lanes per weight at 4, 3
    and 2 bits, against 3.1-3.3). a100-sxm-80gb, priced from sm_80 code, had one pair out of order
    until the sm_80 pair order (KNOWN_SLOWER_TUNED, now empty). Since the dot-operand tiles of the
    2..16-row GEMVs 4 -> 3 bits is out of order at 2 and 16 rows (KNOWN_SLOWER_MULTI_ROW)."""
    bad = _tuned_violations(hw_name)
    assert all(m > 1 and v <= KNOWN_SLOWER_MULTI_ROW for (m, _, _), v in bad.items()), bad
    assert not KNOWN_SLOWER_TUNED.get(hw_name)


# a100-sxm-80gb (and the Ada GPUs) are priced from their own sm_80 SASS since the SASS table was
# keyed by architecture (mpsim/sim/gpu/arch.py SASS_ARCH). That left one row at 4096x11008 with
# 4 -> 3 bits 1.5% out of order on a100 (tuned: 20.97 against 20.66 us; sm_80's loops issued about
# one more ALU op per weight than sm_90a's). Fixed by the sm_80 pair order (kernels/gemv_group.py
# pair_swap, group_dequant._late) and the partial sums' unmasked code words (group_dequant.py,
# _group_w_tile with k_group): both widths tune to the 64 x 64 partial sums (T = 2, 4 splits),
# 19.17 against 18.54 us (ALU 2.77 against 2.67 lanes per weight; docs/kernels.md). No pin is left.
KNOWN_SLOWER_TUNED: dict[str, dict[tuple[int, int, int], set[tuple[str, int, int]]]] = {}
# With 2..16 rows the group GEMVs build W_hat in the tensor-core dot operand's layout
# (dot_tile._dot_w: no shared-memory round trip), and the 3-bit loop then issues more than the
# 4-bit one: sm_90a, 16 rows, 64 x 128, 5.53 against 4.42 slots per weight (sm_80 4.80 against
# 3.88; 5.92 on sm_90a before unit 3 was gathered high, docs/kernels.md#unit-3-gathered-high). A
# 3-bit pair costs about 3 integer ops to 4-bit's 2 (its fourth unit is gathered from the three
# words' top nibbles, which load as 4-byte LDS where 4-bit's words load as LDS.128), and both loops are
# issue-bound at 16 rows, so the 3-bit GEMV is 4-19% slower than the 4-bit one on h200-sxm,
# h100-sxm, a100-sxm-80gb and b200-sxm (h200-sxm, 11008 x 4096, 16 rows, stop 62: 12.49 against 10.52 us,
# tuned and heuristic alike); l40s and rtx-4090 (less bandwidth per issue slot) keep the order.
# Before, the 4-bit tile went through shared memory too (6.42 slots) and the two tied.
KNOWN_SLOWER_MULTI_ROW = {("group", 4, 3)}


# b200-sxm is priced with Hopper's sm_90a instruction mix (an assumption until its own kernels are
# counted: mpsim/sim/gpu/arch.py). With 2-16 activation rows the 4-bit group GEMV (and at the
# heuristic tiles the 3- and 2-bit ones) was integer-pipe bound, and on B200's clocks and bandwidth
# came out 1-2% slower than the 8-bit one, 8 -> 2 and any-precision's 4 -> 3 too at the heuristic
# tiles, and 8 -> 4 at one row (4096 x 11008, 15 K splits). Since the dot-operand tiles of the
# 2..16-row GEMVs (issue 22's tensor-core path) only 4 -> 3 (KNOWN_SLOWER_MULTI_ROW) and, at 2 and
# 16 rows, 8 -> 3 by 0.5-1.5% (4096 x 11008, 16 rows: 12.52 against 12.42 us at the heuristic tiles).
KNOWN_SLOWER_B200 = {("group", 8, 3), ("group", 4, 3)}
KNOWN_SLOWER_B200_ONE_ROW: set[tuple[str, int, int]] = set()
# Tuned, since a quantized W's trips are unpipelined and lock-step (the H200 capture): 16 rows at
# 11008 x 4096 (43 x 16 programs of 256 x 32) take 22.84 us at 3 bits and 23.16 at 2, each trip's
# round trip the same and the 2-bit loop's instructions a little more per trip.
# Since the dot-operand tiles: 8 -> 4 and 3 -> 2 are in order, 4 -> 3 is not (KNOWN_SLOWER_MULTI_ROW)
# and, at 2 and 16 rows, neither is 8 -> 3 (4096 x 11008, 16 rows: 11.10 against 10.94 us tuned).
KNOWN_SLOWER_B200_TUNED = {("group", 4, 3), ("group", 8, 3)}


def test_fewer_bits_on_b200_only_the_known_pairs() -> None:
    one_row = KNOWN_SLOWER_ONE_ROW["b200-sxm"]
    bad = _tuned_violations("b200-sxm")
    assert all(v <= KNOWN_SLOWER_B200_TUNED | (one_row if m == 1 else set())
               for (m, _, _), v in bad.items()), bad
    heuristic = {(m, n, k): v for m in (1, 2, 16) for n, k in SHAPES
                 if (v := _violations("b200-sxm", m, n, k, tuned=False))}
    assert all(v <= (KNOWN_SLOWER_B200 if m > 1 else KNOWN_SLOWER_B200_ONE_ROW | one_row)
               for (m, _, _), v in heuristic.items()), heuristic


@pytest.mark.xfail(strict=True, reason="b200-sxm, 2-16 rows: the 3-bit GEMV issues more than the 4- "
                   "and 8-bit ones (KNOWN_SLOWER_B200_TUNED)")
def test_fewer_bits_are_never_slower_as_the_kernels_are_tuned_on_b200() -> None:
    assert not _tuned_violations("b200-sxm")


# At the fixed heuristic configs two pairs still come out of order by 1-3%: the 7- and 6-bit
# any-precision GEMVs at 16 rows take two waves on l40s where the 8-bit tile fits one (the
# heuristic's split rule is the simplest that stays closest to the tuned configs over a 7B-70B
# shape sample, mean 1.053x the tuned time). 4 -> 2 bits, out of order at every GPU's heuristic
# configs until the 3- and 2-bit GEMVs took their pairs at their own bits, and a100-sxm-80gb's
# one-row 4 -> 3 bits, until the one-row fp16 partial sums, no longer are.
KNOWN_SLOWER = {("anyprec", 8, 7), ("anyprec", 8, 6)}
# With the one-row loops pipelined (loop_stages, stop 58) the 3-bit group GEMV is issue-bound on
# h200-sxm and b200-sxm at one row, its loop 3.83 issue slots per weight against the 4-bit one's
# 3.78 (sm_90a SASS from Triton 3.9, which this machine runs: the 3-bit loop, at 255 registers,
# rematerializes its mask constants, 98 MOVs a trip), so 4 -> 3 bits ties within 0.2-1.1%. Triton
# 3.6, the GPU machine's compiler, orders them (3.96 against 4.20); the inline-asm pair too (3.02
# against 2.91 slots, the 3-bit one under its bytes' budget).
KNOWN_SLOWER_ONE_ROW = {"h200-sxm": {("group", 4, 3)}, "b200-sxm": {("group", 4, 3)}}


@pytest.mark.parametrize("hw_name", [h for h in GPUS if h != "b200-sxm"])  # b200: above
@pytest.mark.parametrize("m", [1, 2, 16])
@pytest.mark.parametrize(("n", "k"), SHAPES)
def test_fewer_bits_at_the_heuristic_configs_only_the_known_pairs(
        hw_name: str, m: int, n: int, k: int) -> None:
    known = KNOWN_SLOWER | (KNOWN_SLOWER_ONE_ROW.get(hw_name, set()) if m == 1
                            else KNOWN_SLOWER_MULTI_ROW)
    assert _violations(hw_name, m, n, k, tuned=False) <= known


def test_fewer_bits_are_never_slower_at_the_heuristic_configs() -> None:
    """h200-sxm and a100-sxm-80gb at 1 and 16 rows (a strict xfail until the one-row fp16 partial
    sums put a100's 4 -> 3 bits in order), but for h200's pipelined one-row 4 -> 3 bits
    (KNOWN_SLOWER_ONE_ROW) and 4 -> 3 bits at 16 rows (KNOWN_SLOWER_MULTI_ROW)."""
    bad = {(h, m, n, k): v for h in ("h200-sxm", "a100-sxm-80gb") for m in (1, 16)
           for n, k in SHAPES[:2] if (v := _violations(h, m, n, k, tuned=False))}
    assert all(v <= (KNOWN_SLOWER_ONE_ROW.get(h, set()) if m == 1 else KNOWN_SLOWER_MULTI_ROW)
               for (h, m, _, _), v in bad.items()), bad


@pytest.mark.parametrize("hw_name", ["h200-sxm", "a100-sxm-80gb", "rtx-4090"])
@pytest.mark.parametrize(("batch", "kv", "heads"), [(1, 4096, (32, 32)), (16, 2048, (32, 8)),
                                                    (1, 32768, (32, 8)), (64, 1024, (32, 32))])
def test_fewer_kv_bits_are_never_slower_for_decode_attention(hw_name: str, batch: int, kv: int,
                                                             heads: tuple[int, int]) -> None:
    hw = load_hardware(hw_name)
    times = [simulate_launch(attention_row(batch, 1, kv, *heads, 128, bits), hw).time_s
             for bits in (16, 8, 4)]
    assert times[0] >= times[1] * (1 - REL) and times[1] >= times[2] * (1 - REL), times


def test_the_memo_namespace_and_sweep_keys_follow_the_source(monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Path) -> None:
    """Old model: the namespace hashed the hardware, SimParams and a hand-bumped version only, so
    after an edit to the simulator a disk memo (and a resumed sweep) returned the old times."""
    import mpsim.analysis.sweep.spec as spec_mod
    import mpsim.sim.memo as memo_mod
    from mpsim.workload import Workload as Wl

    files = {p.name for p in memo_mod.source_files()}
    for name in ("cta.py", "mpsim_gemm.py", "roofline.py", "replay.py", "accounting.py",
                 "launch_plan.py", "synth.py", "launch_config.py", "sass_table.py", "params.py",
                 "launch_config_fp.py", "sass_table_fp.py"):
        assert name in files, name
    # every library room, on both floors (configs and row builders; work models)
    paths = {p.as_posix() for p in memo_mod.source_files()}
    for room in ("mpsim", "cublas", "fa3", "trtllm", "vllm", "torch"):
        for floor in ("mpsim/library", "mpsim/sim/gpu/library"):
            assert any(q.endswith(f"{floor}/{room}.py") for q in paths), f"{floor}/{room}.py"
    spec = PRESETS["mobilellama-1.4b"]
    tr = synthesize(spec, parse_policy("fp16"), Workload(8, 2, 1))
    before = simulate(tr, H200, cache_dir=tmp_path)
    ns_before = memo_mod.namespace(H200, DEFAULT_PARAMS, "sim")
    key_before = spec_mod.point_key(spec, "fp16", Wl(8, 2, 1), H200, "sim")
    # an edit to any deciding source changes the fingerprint
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("x = 1\n")
    b.write_text("x = 1\n")
    fp1 = memo_mod.fingerprint_files([a, b])
    b.write_text("x = 2\n")
    assert memo_mod.fingerprint_files([a, b]) != fp1
    monkeypatch.setattr(memo_mod, "source_fingerprint", lambda: "edited-simulator")
    monkeypatch.setattr(spec_mod, "source_fingerprint", lambda: "edited-simulator")
    assert memo_mod.namespace(H200, DEFAULT_PARAMS, "sim") != ns_before
    assert spec_mod.point_key(spec, "fp16", Wl(8, 2, 1), H200, "sim") != key_before
    after = simulate(tr, H200, cache_dir=tmp_path)
    assert after.stats["memo_hits"] == 0 and after.stats["simulated"] == before.stats["simulated"]


def _rows(*rows: dict[str, Any]) -> pd.DataFrame:
    return rows_to_frame(list(rows))


def test_every_launch_stays_at_or_above_the_residency_aware_bound() -> None:
    tr = synthesize(PRESETS["vicuna-7b"], parse_policy("ap4-4@2-3+kv8"), Workload(128, 3, 2))
    # GPUs (the NPU's step model overlaps launches: its bound holds per step, tests/sim/test_sim_npu.py)
    for hw_name in ("h200-sxm", "l40s", "rtx-4090"):
        out = simulate(tr, load_hardware(hw_name), cache_dir=None).launches
        assert np.all(out["time_s"] >= out["t_lower_s"] * (1 - REL))

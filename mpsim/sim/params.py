"""The simulator's own constants: device-independent properties of kernels, chips and measurement.

Hardware files (hw_models/) hold per-device numbers from datasheets only; everything here is one
number for every device. Where a constant was set from the published H200/H100 measurements in
../shared/groundtruth (docs/simulator.md#constants-and-where-they-come-from), its comment names the
rows: "GEMM rows" = aiconfigurator vLLM 0.24.0 `gemm_perf.parquet`, `gemm_dtype == bfloat16`, n and
k on the grid 2048..16384, m <= 8192 (10,368 rows per GPU); "decode rows" = the vLLM 0.24.0
generation file, head_dim 128, window 0, 32/8 heads, step >= 255 (68 rows per GPU and KV dtype);
"prefill rows" = the vLLM 0.24.0 context file, head_dim 128, window 0, bf16/bf16, isl >= 128;
"wo rows" = TRT-LLM 1.2.0rc5 H200 int4_wo/int8_wo, m <= 4 (1,320 each); "Vidur rows" = Vidur's H100
Llama-2-7b/70b `mlp.csv`, TP 1, the `mean` statistics. Each was set on H200 rows (Vidur: H100, the only
device it has) and checked on the other GPU (`mpsim validate --against`; `mpsim calibrate --against
--fit-params NAMES` refits named ones). Constants marked
"assumption" are nobody's measurement (the reason is given). They are part of every memo key: change
one and cached results are recomputed. Each kernel library's constants sit in its room
(mpsim/sim/gpu/library/<name>.py, a frozen dataclass) and SimParams holds one per library: a constant
is named `<library>.<field>` (`cublas.tile_ns`, `fa3.softmax_ops`) where one name is needed
(`--fit-params`, calibration files).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from mpsim.sim.gpu.library.call_quant import ActQuantParams
from mpsim.sim.gpu.library.cublas import CublasParams
from mpsim.sim.gpu.library.cutlass_fp8 import CutlassFp8Params
from mpsim.sim.gpu.library.deepgemm import DeepgemmParams
from mpsim.sim.gpu.library.fa2 import Fa2Params
from mpsim.sim.gpu.library.fa3 import Fa3Params
from mpsim.sim.gpu.library.flashinfer_attention import FlashinferParams
from mpsim.sim.gpu.library.flashinfer_gemm import FlashinferGemmParams
from mpsim.sim.gpu.library.machete import MacheteParams
from mpsim.sim.gpu.library.marlin import MarlinParams
from mpsim.sim.gpu.library.mpsim import MpsimParams
from mpsim.sim.gpu.library.sglang import SglangParams
from mpsim.sim.gpu.library.sglang_triton import SglangTritonParams
from mpsim.sim.gpu.library.torch import TorchParams
from mpsim.sim.gpu.library.triton_fp8 import TritonFp8Params
from mpsim.sim.gpu.library.trtllm import TrtllmParams
from mpsim.sim.gpu.library.trtllm_fp8 import TrtllmFp8Params
from mpsim.sim.gpu.library.turbomind import TurbomindParams
from mpsim.sim.gpu.library.vllm import VllmParams
from mpsim.sim.gpu.library.vllm_triton import VllmTritonParams

LIBRARY_FIELDS = ("mpsim", "cublas", "fa3", "trtllm", "vllm", "torch", "marlin", "machete",
                  "turbomind", "sglang", "cutlass_fp8", "deepgemm", "flashinfer_gemm", "trtllm_fp8",
                  "triton_fp8", "fp8_act", "fa2", "flashinfer", "sglang_triton",
                  "vllm_triton")


@dataclass(frozen=True)
class SimParams:
    """Device-independent constants and approximation limits. Defaults are the shipped model."""

    # ---- memory path (GH100 rows; the same SM, L2 and HBM controller design on every listed GPU) --
    # Achievable share of the datasheet DRAM bandwidth for a streaming read (H200 GEMM rows, m <= 16:
    # large weights stream at 0.79-0.90 of 4.8 TB/s; 0.82 on average). Device-independent on the
    # published bf16 GEMM rows of four GPUs and three memory types (m <= 8, weights >= 1 GB, vLLM
    # 0.24.0, median share of the datasheet peak): B200 HBM3e 0.83 (TRT-LLM 1.3.0rc20: 0.81), H200
    # HBM3e 0.85, H100 HBM3 0.89, L40S GDDR6 0.83 (docs/validation.md#gpu-physics-per-architecture).
    # A Little's-law bound (bytes in flight / loaded latency) is per kernel, in the CTA pipeline model
    # (stages x tile bytes in flight); this is the DRAM side's share. A hardware file may override it
    # per device (dram.achievable_bandwidth_fraction, a calibration).
    bw_frac: float = 0.8198
    # A DRAM write stream's share of the read stream's achievable bandwidth (units.Memory
    # write_cost = 1 / this: kernels' outputs, posted as their loops go). Set from the published
    # bf16 GEMM rows of four GPUs whose time is their output (k <= 64, output >= 1 GB, every stack
    # of ../shared/groundtruth; median share of the datasheet peak): B200 0.73-0.74, H100 0.80, H200
    # 0.64-0.66, L40S 0.55-0.58, against the reads' 0.83 / 0.89 / 0.85 / 0.83 (bw_frac above):
    # ratios 0.88 / 0.90 / 0.76 / 0.68, mean 0.80. Device-independent within +-15% (no datasheet
    # gives a write efficiency; docs/validation.md#gemm-outputs-stop-47).
    dram_write_share: float = 0.80
    # One SM's L2 load port, bytes per clock at the datasheet tensor clock (H200 GEMM rows: thin-tile
    # and few-CTA configs; A100's whitepaper L2 of 5120 B/clk over 108 SMs is 47 B/clk/SM). The chip's
    # L2 bandwidth is SMs x this (no GEMM row needs less).
    port_bytes_per_clk: float = 49.76
    # The same port on Blackwell (sm_100, b200-sxm; rates.port_bytes_per_clk picks it by generation)
    # for TMA bulk copies (Trip.bulk: cuBLAS, CUTLASS, DeepGEMM, trtllm-gen, FA3); no datasheet or
    # whitepaper prints an L2-to-SM rate. Set from the B200 bf16 cuBLAS rows of TensorRT-LLM
    # 1.3.0rc20 (400-row `stacks` sample; all-band MAPE 13.26 / 12.99 / 12.72 / 12.54 / 12.77% at
    # 70 / 80 / 90 / 100 / 120, 14.9% at H200's 49.76, where every 257-8192 GEMM from a few us up was
    # port-bound): 99.5, twice H200's, as Blackwell's tensor rate per SM is twice Hopper's. Checked
    # on rows not used: vLLM 0.24.0's bf16 rows (M 257-8192 14.6 -> 10.0%) and both stacks' nvfp4
    # rows (TensorRT-LLM's untuned 128 x 256 tile, one SM's MMA and no multicast, runs a 54 KB K step
    # every ~0.5 us at M <= 256: a port of at least ~70). Loads threads issue (LDG, cp.async) keep
    # H200's port, and the chip's L2 stays SMs x port_bytes_per_clk (13.7 TB/s on B200; rates.py):
    # TensorRT-LLM's MMHA decode rows (LDG; > 32 query heads re-reading one KV head from L2) take
    # the same time on B200 as on H200 (median ratio 1.00-1.02 over the 3,144 shapes both publish);
    # at 148 x 80 B/clk for every load they were priced 38% fast (27% before). One Blackwell device:
    # an assumption for others.
    port_bytes_per_clk_blackwell: float = 99.5
    # The same port on Hopper (sm_90: h100-sxm, h200-sxm) for TMA bulk copies; the chip's L2 stays
    # SMs x port_bytes_per_clk, so an SM running alone pulls more than its share of a busy chip. Set
    # from the H200 bf16 cuBLAS rows of vLLM 0.24.0 and TensorRT-LLM 1.3.0rc20 (400-row `stacks`
    # samples; all-band MAPE 7.8 / 7.2 / 7.0 / 7.1 / 7.1 / 7.3% and 7.6 / 7.6 / 7.4 / 7.3 / 7.4 / 7.5%
    # at 49.76 (the chip's share, before) / 56 / 60 / 64 / 68 / 72): 64. Checked on rows not used:
    # H100 vLLM bf16 7.4 -> 7.1%, H200 vLLM / SGLang fp8 12.6 / 13.0 -> 11.3 / 12.1%, and TensorRT-
    # LLM's few-CTA fp8_block rows (one to a dozen CTAs streaming 128-row weight slabs: a lone
    # CTA's 18 KB K steps land every ~137 ns, ~70 B/clk, on H200 n = 128, k = 51200).
    port_bytes_per_clk_hopper: float = 64.0
    # A TMA box's rows beyond the tensor's edge on Hopper (a scaled GEMM's last token tile past M,
    # zero-filled): the chip's L2 load per byte of them (GpuRates.tma_edge_cost; scaled_gemm.py
    # `edge_bytes`). DeepGEMM's maintainers: a TMA load is slower for a box crossing M's edge,
    # "due to boundary check" (deepseek-ai/DeepGEMM issue 35). The H200 TensorRT-LLM 1.3.0rc20
    # fp8_block rows fall as M fills a token tile (n 3072, k 12288: 62.0 / 51.4 / 39.5 / 32.3 us at M
    # 129 / 192 / 224 / 256), the excess growing with K and with the CTAs holding such a tile (a few
    # pay nothing visible: n 128, k 16384, M 129 takes 23.9 us), so a load on the chip, not on the
    # SM's port. Scanned on that file's fp8_block rows (2,000-row `--select fp8` / 400-row `stacks`
    # samples, all-band MAPE): 0 / 2 / 3 / 4 / 5 / 6 gave 12.0 / 9.2 / 8.0 / 7.7 / 8.3 / 9.8% and
    # 13.8 / 12.8 / 12.2 / 11.7 / 11.8 / 12.5%. ASSUMPTION on the cause: a row past the edge asks
    # the L2 as four 32-byte sectors where a row inside moves as one 128-byte line. Checked on rows
    # not used (`--select fp8`): H100 TensorRT-LLM 12.2 -> 8.3%, H200 TensorRT-LLM 1.2.0rc5 10.1 ->
    # 6.4%, DeepGEMM's current kernel (SGLang 13.9 -> 12.9%, vLLM 7.0 -> 6.9%), CUTLASS fp8 (vLLM
    # 9.3 -> 9.2%, SGLang 10.3 -> 10.2%). Not on Blackwell: B200's rows moved the wrong way at 4
    # (vLLM fp8 16.8 -> 22.7%, nvfp4 9.0 -> 16.2%, TensorRT-LLM fp8_block 8.1 -> 12.4%), so 0 there.
    # Nor cuBLAS's kernels (bf16; cuBLASLt's fp8, TrtllmFp8Params.tma_edge): their rows rise
    # through each token tile
    tma_edge_cost: float = 4.0
    # The chip's L2 reads per SM and clock (at the datasheet tensor clock) where the L2 is one
    # partition (l2.partitions 1, Ada's AD102); a partitioned L2 (A100, GH100, B200) is held to SMs x
    # the port above. No datasheet or whitepaper prints it; from the L40S rows where L2 traffic binds:
    # TensorRT-LLM 1.3.0rc20's fp8_block GEMM on sm_89 (its blockwise kernel's 32 x 128 tiles re-read
    # the weights once per 32 tokens), even half of an 800-row `--select fp8` sample: 4.0 / 4.5 / 4.8
    # / 5.0 / 5.5 TB/s gave M 257-8192 17.7 / 7.2 / 5.7 / 6.5 / 11.3% (no cap: 35%, -35% bias); the
    # odd half 5.5%. 13.6 B x 142 SMs x 2.49 GHz = 4.8 TB/s. Checked on L40S rows it was not set from
    # (docs/validation.md#an-l2-rate-for-ada): cuBLASLt's fp8, vLLM's c2x fp8 and Triton fp8_block,
    # bf16 cuBLAS (vLLM 0.24.0, TensorRT-LLM 1.3.0rc20), and the decode attention of vLLM (FA2) and
    # TensorRT-LLM (XQA, MMHA) once their L2 traffic counts the keys the kernels load (Trip.l2_bytes).
    # One device: an assumption for other one-partition L2s (the RTX 4090's AD102).
    l2_one_partition_bytes_per_clk: float = 13.6
    # Stores that stay in a one-partition L2 (Ada; a replayed output kept there: work.py
    # `l2_kept_stores`) take the chip's L2 at this share of its read rate (each stored byte costs
    # 1 / this; stores bound for DRAM are priced by dram_write_share). Set from
    # the L40S vLLM 0.24.0 bf16 GEMM rows whose output of 30-130 MiB stays in L2 (k <= 256; 80
    # rows; with replay_out_* below): MAPE 12.7 / 12.5 / 13.4% at 0.65 / 0.75 / 0.9 (edges to 1.2),
    # 11.4 / 11.7 / 13.2% (to 1.4); 18.2% with stores not charged to the chip's L2. Checked on the
    # same rows of TensorRT-LLM 1.3.0rc20 and 1.0.0 (29.6 / 27.9 -> 13.8 / 13.8%). One device: an
    # assumption for other one-partition L2s.
    l2_write_share: float = 0.70
    # Shared memory per SM per clock (CUDA C++ Programming Guide: 32 banks x 4 bytes).
    smem_bytes_per_clk: float = 128.0
    # A CTA's first tile from HBM: round trip plus pipeline fill (H200 GEMM rows, 425 ns). Later
    # trips pay l2 + miss share x (dram - l2) latency, hidden by the pipeline when stages allow.
    dram_latency_ns: float = 425.1
    l2_latency_ns: float = 140.0  # assumption: ~270 SM clocks, public Hopper microbenchmarks' order
    # A register load's (LDG) round trip under a full wave: what each trip of an unpipelined loop
    # waits (mpsim's one-row GEMV: Triton pipelines only loads that feed tl.dot; library/mpsim_gemm.py
    # lockstep_trip_ns). Fitted on mpsim's own H200 capture (the 135 decode one-row fp16 GEMV
    # launches of traces/data/h200/vicuna-7b-fp16-b1-l2-g16.parquet, ~1.8 us a trip whatever its
    # bytes): 910 ns minimizes
    # the time-weighted error (4.4% MAPE; 425 ns, the first-tile latency above, leaves them 28.5% too
    # fast). Held out: the capture's int4-group one-row rows -18.9%, any-precision -51.3% (their
    # dependent LUT load is not modelled). Measured on one GPU so far: one constant for every device
    # (a per-device value would make an H100 decode faster than an H200's) until a capture on another
    # GPU checks it (docs/validation.md#mpsims-own-kernels-on-an-h200). A file may override it
    # (dram.load_latency_ns).
    load_latency_ns: float = 910.0
    # Share of L2 that holds reused data across launches and waves (the rest: streaming lines, set
    # conflicts, two partitions). Decode rows: KV caches of 33.5 MB stay resident in a 60 MiB L2 and
    # 67 MB do not, so any value in 0.53-1.0 fits; 0.75 kept from the earlier model. A launch timed
    # once from idle (`one_run`) also ends with this share of the L2 of its output still dirty
    # there, never written to DRAM while timed (model.py; the L40S TRT-LLM 1.0.0 int4_wo rows at
    # M > 256, outputs of 8-168 MB, were 15.9 -> 17.6% with every output byte written at
    # dram_write_share, 13.0% with this).
    l2_usable_fraction: float = 0.75
    # Weights a measurement replays (memory.py replay_hits: copies cycled through, each call
    # re-reading a copy after the others) in an L2 of one partition (l2.partitions 1, Ada): found
    # entirely while the bytes cycled stay within `replay_l2_from` of the L2, none from
    # `replay_l2_to`, linear between (a partitioned L2: from l2_usable_fraction to 1.0, the H200
    # rows: the same 0.95 / 1.06 there moved TRT-LLM 1.3.0rc20 M 1-16 6.2 -> 7.1%, rows cycling
    # exactly its 60 MiB priced 20-49% fast). Set from the L40S bf16
    # rows at M 2-16 (weights 8-100 MiB: DRAM 0.64-0.72 TB/s, L2 1.4-2.0): TRT-LLM 1.0.0 (5
    # copies) finds them at 85-90 MiB cycled (1.51 TB/s median), partly at 95-100 (0.90), not at
    # 100-120; TRT-LLM 1.3.0rc20 (copies = ceil(L2 / weights), so a power-of-two weight cycles
    # just the L2's 96 MiB) at 92-96 MiB (1.87), partly at 97-104 (0.92-1.14), not from 104.
    # 800-row samples per stack (docs/validation.md#l2-replay-edge): 0.95 / 1.06 against the usable
    # share's 0.75 / 1.0, TRT-LLM 1.3.0rc20 M 1-16 24.2 -> 15.4% MAPE, 1.0.0 16.7 -> 15.6, vLLM
    # 0.24.0 (6 copies, each with its own output; partly found from 84 MiB) 10.2 -> 10.3. One
    # device so far: an assumption for other one-partition L2s (RTX 4090's AD102).
    replay_l2_from: float = 0.95
    replay_l2_to: float = 1.06
    # The replayed call's output (written lines) in an L2 of one partition: kept entirely while
    # output + weights + input stay within `replay_out_from` of the L2, none from `replay_out_to`,
    # linear between (memory.replay_hits; a partitioned L2 keeps none: the H100, H200 and B200 rows'
    # output write rate shows no L2 edge, flat from 8 MB to 2 GB). The L40S bf16 rows at k <= 32
    # (vLLM 0.24.0 and TRT-LLM 1.3.0rc20) store 1.6-1.9 TB/s up to 64-72 MiB of output, 0.81 TB/s
    # at 72-80, 0.70 from 96 MiB (above the DRAM write stream of larger outputs: partly kept past
    # the L2's size); the ends set with l2_write_share above (to 1.2 / 1.4 / 1.6: 12.5 / 11.7 /
    # 12.3% at 0.75). One device: an assumption for other one-partition L2s.
    replay_out_from: float = 0.70
    replay_out_to: float = 1.40

    # ---- clocks (both H100 and H200 SXM are 700 W GH100 boards) ---------------------------------
    # Tensor issue efficiency at the running clock (GEMM rows: bounded at 1).
    eta_mma: float = 1.0
    # Share of the dense fp4 rate (hardware file tensor_core fp4) that the block-scaled fp4 MMAs of
    # an nvfp4 / mxfp4 GEMM reach (tcgen05 kind::mxf4nvf4; scaled_gemm.gemm_part, on top of a room's
    # own mma_eta). The published B200 nvfp4 rows top out at 4.6 / 5.3 PFLOP/s (TensorRT-LLM /
    # vLLM) of the brief's 9 dense, where fp8 reaches 3.2-3.5 of 4.5 and bf16 1.7-2.1 of 2.25. Set on
    # the even half of the B200 TensorRT-LLM 1.3.0rc20 nvfp4 rows of a 2,000-row `--select fp8`
    # sample (333 rows; its untuned 128 x 256 tile, with port_bytes_per_clk_blackwell): 0.583, the
    # odd half 3.5 / 3.2 / 7.7% by M band; checked on vLLM 0.24.0's rows (FlashInfer's CuTe DSL
    # kernel, not used): 7.4 / 8.5 / 9.7%. It binds where few SMs run (M <= 256); a full chip of
    # these tiles is bound by the chip's L2 first. One device (the only one with fp4 tensor cores).
    fp4_mma_eta: float = 0.583
    # Energy of a tensor-pipe cycle running fp8 MMAs relative to a 16-bit one (power.py
    # tensor_energy_share; 1.0: twice the FLOPs at half the energy each). Set at stop 54, with the
    # calls' quantizers priced from their sources (stops 49-54), to the argmin over 1.15 / 1.0 / 0.85 /
    # 0.7 of the summed M 257-8192 MAPE of the ten Hopper fp8 / fp8_block cells, fitted on the rows of
    # 2,000-row `--select fp8` samples (vLLM, SGLang, TRT-LLM on H200; vLLM, TRT-LLM on H100): 87.1 /
    # 82.8 at 1.15 / 1.0 (H200 56.6 -> 50.8, H100 30.5 -> 32.0; every H100 cell within 10% at both);
    # 0.85 is worse on the four H200 vLLM / SGLang cells it reached (36.2 -> 36.8), 0.7 prices TRT-LLM's
    # H200 fp8 13.0% (7.8 at 1.0). The launch's one clock falls as N grows (the quantizer's share draws
    # less), so at 1.15 the long GEMMs ran slow: H200 vLLM 8192 x N x 8192 +16.5% at N 4096, +28.7% at
    # 16384. Before (stop 34): 1.15, set while the quantizers were priced too cheap
    # (docs/validation.md#fp8-tensor-power).
    fp8_tensor_energy: float = 1.0
    # Power-limited clock and power (mpsim/sim/gpu/power.py): P(f) = static_W + DRAM power + overhead
    # x (V(f)/V(f_base))^2 x f x (the launch's per-cycle work at the hardware file's energies), the
    # sustained clock being the highest f <= boost with P(f) <= tdp_W (hardware file: energy.tdp_W,
    # energy.static_W, compute.base_clock_MHz, compute.boost_clock_MHz, energy.*_pJ_*).
    # power_overhead: what a busy SM spends beyond the arithmetic and L2 energies of the file
    # (register files, operand networks, clock tree, schedulers), a multiplier on the SM side's
    # energies. Set on the H200 GEMM rows through the earlier H200 fit of the clock (long cuBLAS
    # GEMMs sustain 0.75-0.81 of the dense peak; 8192^3 keeps its time, 1386 -> 1388 us, at ~1500 MHz,
    # below the 1590 MHz base, so the voltage term is 1 there); H100 is the same 700 W board (same
    # clock); L40S and B200 rows see it with the voltage term
    # (docs/validation.md#power-limited-clock-from-tdp-issue-24).
    power_overhead: float = 2.27
    # voltage_slope: dV/V per df/f above the base clock (hardware file: compute.base_clock_MHz;
    # V(f)/V(f_base) = 1 + slope (f - f_base) / f_base), set on the L40S GEMM rows (1110 MHz base,
    # 2520 boost; at the earlier 0.75-of-boost clock their 257-8192 and >8192 bands were biased
    # -17.4 / -16.5%) and checked on the B200 GEMM rows (1665 MHz base: its GEMMs run at ~1900 MHz);
    # H200/H100 GEMMs run below their 1590 MHz base and do not see it.
    voltage_slope: float = 0.70
    # The clock search runs the launch again at the clock its work allows, until the clock settles to
    # 1e-4 or this many times (a numerical limit, not physics).
    power_iterations: int = 6
    # A launch measured once from idle (config `one_run`: TensorRT's per-layer profiler) starts at
    # the boost clock and the limiter pulls it to the sustained clock f_s with this time constant:
    # f(t) = f_s + (boost - f_s) exp(-t / tau) (model.py one_run_clock). Back-to-back replays (CUDA
    # graphs, every other protocol) run at f_s. Both devices' TensorRT-profiled weight-only rows run
    # faster than their graph-timed bf16 rows of the same shape (H200 TRT-LLM 1.2.0rc5 fpA_intB
    # 830-935 TFLOP/s against bf16 660-785; L40S TRT-LLM 1.0.0 230-272 against 195-250), which the
    # sustained clock alone prices 12-36% slow on L40S. Set on 60-row-per-band samples of both
    # devices' int4_wo/int8_wo rows (wo_bands, seed 1): L40S all-M MAPE at tau 0 / 30 / 100 / 300 /
    # 1000 us: 30.4 / 27.9 / 27.0 / 27.2 / 28.3 (int4), 24.2 / 22.0 / 21.6 / 21.9 / 22.2 (int8);
    # H200 11.6 / 11.6 / 11.5 / 11.6 / 11.9 and 10.4 / 10.5 / 10.6 / 10.6 / 10.4 (its fpA_intB
    # constants were fitted at tau 0, at stop 40). An assumption as to the mechanism (the board's
    # limiter, not measured here).
    power_tau_us: float = 100.0

    # ---- per-kernel fixed costs ------------------------------------------------------------------
    # Shortest kernel duration as CUPTI sees it (launch to end on the GPU; Vidur rows, 0.73 us).
    kernel_floor_us: float = 0.7343
    # What a measurement adds around the kernels (the graph gap, 1.1765 us per kernel on the H200
    # GEMM rows beyond this floor) is the measurement protocol's: mpsim/sim/protocols.py, applied
    # by mpsim.sim.simulate(..., protocol=), not a constant here.

    # ---- the kernel libraries: each room's own constants (mpsim/sim/gpu/library/<name>.py) ---------
    # (mpsim: its Triton kernels' attention costs without SASS; cublas: GEMM rows; fa3: decode and
    # prefill rows; trtllm: wo rows and TRT-LLM attention rows; vllm and torch: Vidur rows; sglang:
    # SGLang attention rows)
    mpsim: MpsimParams = field(default_factory=MpsimParams)
    cublas: CublasParams = field(default_factory=CublasParams)
    fa3: Fa3Params = field(default_factory=Fa3Params)
    trtllm: TrtllmParams = field(default_factory=TrtllmParams)
    vllm: VllmParams = field(default_factory=VllmParams)
    torch: TorchParams = field(default_factory=TorchParams)
    # weight-only GEMM libraries without published kernel rows: assumptions (docs/kernels-weight-only.md)
    marlin: MarlinParams = field(default_factory=MarlinParams)
    machete: MacheteParams = field(default_factory=MacheteParams)
    turbomind: TurbomindParams = field(default_factory=TurbomindParams)
    sglang: SglangParams = field(default_factory=SglangParams)
    # fp8 / fp4 scaled GEMMs (issue 26; each room's docstring names the rows its constants came from)
    cutlass_fp8: CutlassFp8Params = field(default_factory=CutlassFp8Params)
    deepgemm: DeepgemmParams = field(default_factory=DeepgemmParams)
    flashinfer_gemm: FlashinferGemmParams = field(default_factory=FlashinferGemmParams)
    trtllm_fp8: TrtllmFp8Params = field(default_factory=TrtllmFp8Params)
    triton_fp8: TritonFp8Params = field(default_factory=TritonFp8Params)
    fp8_act: ActQuantParams = field(default_factory=ActQuantParams)  # the calls' activation quant
    fa2: Fa2Params = field(default_factory=Fa2Params)     # vLLM's FA2 rows (L40S)
    flashinfer: FlashinferParams = field(default_factory=FlashinferParams)  # vLLM's FlashInfer rows
    # SGLang's Triton attention backend (its H200 rows, kernel_source triton)
    sglang_triton: SglangTritonParams = field(default_factory=SglangTritonParams)
    # vLLM's Triton attention backend (its L40S and B200 rows, kernel_source vllm_triton_attn)
    vllm_triton: VllmTritonParams = field(default_factory=VllmTritonParams)

    # ---- approximation limits (docs/simulator.md#speed) -----------------------------------------
    dram_stripe_bytes: int = 256         # a request of B bytes spreads over min(channels, B / 256)
    max_iters: int = 48                  # NPU: tiles simulated per core
    gpu_max_iters: int = 12              # GPU: trips simulated per bundle (first and last exact)
    max_waves: int = 6
    max_classes: int = 8
    max_resident_split: int = 1          # co-resident CTAs of a wave run as this many processes
    # NPU: vector ops per GEMM output element (bias, cast); the DMA/compute granularity inside a
    # double-buffered SRAM half (a sub-buffer lands, then the decoder and MAC array consume it).
    npu_epilogue_ops: float = 2.0
    npu_tile_bytes: int = 128 * 1024
    # NPU step model: the DMA run-ahead window (the weight SRAM of all cores) is filled in chunks of
    # at most 1/npu_window_chunks of it (simulation granularity; the last chunk of an operator is
    # one DMA tile per core, so the compute exposed after a stream is one tile's); an operator's
    # stream is at least npu_min_chunks chunks (or whole tiles), so its compute overlaps it, and at
    # most npu_max_chunks (longer streams coarsen: a chunk then holds one window share of SRAM).
    npu_window_chunks: int = 4
    npu_min_chunks: int = 8
    npu_max_chunks: int = 64

    def fingerprint(self) -> str:
        """A stable hash of every field (part of the memo key)."""
        return hashlib.sha256(repr(self).encode()).hexdigest()[:16]


DEFAULT_PARAMS = SimParams()


# The flat names these constants had before the library rooms (calibration files written then store
# them): old name -> dotted name.
LEGACY_NAMES: dict[str, str] = {
    **{n: f"mpsim.{n}" for n in ("softmax_ops_per_score", "kv_dequant_ops", "iter_overhead_cycles")},
    **{f"cublas_{n}": f"cublas.{n}" for n in ("tile_ns", "sk_fixup_us", "token_granule")},
    **{f"fa3_{n}": f"fa3.{n}" for n in ("softmax_ops", "fp8_v_ops", "cta_ns", "decode_scope_us",
                                       "fp8_extra_us", "combine_us", "prefill_eta", "prefill_scope_us",
                                       "prefill_tile_ns")},
    "kv_append_round_ns": "fa3.kv_append_round_ns",
    **{n: f"trtllm.{n}" for n in ("wo_lat_ns", "wo_ops_dq4", "wo_ops_dq8", "wo_ops_fma", "wo_cta_ns",
                                  "wo_scope_us")},
    **{n: f"vllm.{n}" for n in ("row_iter_ns", "row_iter_rope_ns", "row_iter_rms_ns", "row_ctas_eff")},
    "add_iter_ns": "torch.add_iter_ns",
}


def float_param_names(p: SimParams = DEFAULT_PARAMS) -> tuple[str, ...]:
    """Every float constant by name: SimParams' own fields, then `<library>.<field>` per room."""
    out = [f.name for f in dataclasses.fields(p) if f.type in (float, "float")]
    for lib in LIBRARY_FIELDS:
        out += [f"{lib}.{f.name}" for f in dataclasses.fields(getattr(p, lib)) if f.type in (float, "float")]
    return tuple(out)


def get_param(p: SimParams, name: str) -> float:
    """The constant called `name` (a SimParams field or `<library>.<field>`)."""
    lib, _, field = name.rpartition(".")
    return float(getattr(getattr(p, lib) if lib else p, field))


def with_params(p: SimParams, values: Mapping[str, float]) -> SimParams:
    """`p` with the named constants (SimParams fields or `<library>.<field>`) set."""
    own = {k: v for k, v in values.items() if "." not in k}
    rooms: dict[str, dict[str, float]] = {}
    for k, v in values.items():
        if "." in k:
            lib, _, field = k.partition(".")
            rooms.setdefault(lib, {})[field] = v
    changed = {lib: dataclasses.replace(getattr(p, lib), **fields) for lib, fields in rooms.items()}
    return dataclasses.replace(p, **own, **changed)  # type: ignore[arg-type]

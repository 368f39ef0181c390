"""`mpsim serve`: serving under load (continuous batching, paged KV, SLOs); docs/serving.md.

    mpsim serve --model M --policy P --hw H --rate R --requests N [--arrivals poisson|gamma:CV|FILE.csv]
                [--prompt-len L] [--gen-len L] [--seed S] [--slo-ttft-ms X] [--slo-tpot-ms Y] --out DIR

writes DIR/requests.parquet, DIR/iterations.parquet, DIR/summary.json (and DIR/timeline.json with
--timeline). Only the light config module loads when the parser is built; the simulation loads in run.
"""

from __future__ import annotations

import argparse
from typing import Any

from mpsim.commands.common import add_engine_arg, add_method_arg, add_parallel_args, warn
from mpsim.serve.config import SchedulerConfig

D = SchedulerConfig()


def register(sub: Any) -> None:
    p = sub.add_parser("serve", help="simulate serving under load: continuous batching, paged KV, SLOs",
                       description="Request-level simulation of an LLM server (docs/serving.md).")
    p.add_argument("--model", required=True, help="preset name or a HF config.json")
    p.add_argument("--policy", required=True, help="precision policy, e.g. fp16, w4+kv8, ap4-4@64-3+kv8")
    p.add_argument("--hw", required=True, help="a shipped hardware name or a YAML file")
    p.add_argument("--out", required=True, help="output folder")
    add_engine_arg(p)
    add_method_arg(p)
    add_parallel_args(p)
    _workload_args(p)
    _scheduler_args(p)
    p.add_argument("--slo-ttft-ms", type=float, default=None, help="TTFT SLO per request (ms)")
    p.add_argument("--slo-tpot-ms", type=float, default=None, help="TPOT SLO per request (ms)")
    p.add_argument("--perf-model", default="sim", help="performance model pricing iterations (default sim)")
    p.add_argument("--host-overhead-us", type=float, default=0.0,
                   help="host time per iteration, not overlapped with the device (default 0)")
    p.add_argument("--decode-protocol", default="graph", help="protocol of decode iterations (default graph)")
    p.add_argument("--prefill-protocol", default="eager",
                   help="protocol of iterations with a prefill (default eager)")
    p.add_argument("--warmup-frac", type=float, default=0.0,
                   help="share of requests (first arrivals) left out of steady-state figures (default 0)")
    p.add_argument("--cooldown-frac", type=float, default=0.0,
                   help="share of requests (last arrivals) left out of steady-state figures (default 0)")
    p.add_argument("--exact-pricing", action="store_true",
                   help="price every iteration shape exactly (no buckets; slower)")
    p.add_argument("--pricing", default="auto", choices=("auto", "components", "iterations"),
                   help="components: an iteration as the sum of separately priced parts; iterations: "
                        "each (rounded) iteration as one launch list; auto (default): iterations on "
                        "an NPU simulated step by step, components elsewhere")
    p.add_argument("--audit", type=int, default=0, metavar="K",
                   help="also price every K-th iteration as one exact launch list and report the error")
    p.add_argument("--timeline", action="store_true", help="write DIR/timeline.json (Perfetto)")
    p.set_defaults(func=run)


def _workload_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rate", type=float, default=None, help="arrival rate (requests/s); not with a CSV")
    p.add_argument("--requests", type=int, default=None, help="number of requests (or --duration)")
    p.add_argument("--duration", type=float, default=None, help="arrivals for this many seconds")
    p.add_argument("--arrivals", default="poisson",
                   help="poisson (default), gamma:CV (burstiness), or FILE.csv with columns arrival_s, "
                        "prompt_len, gen_len[, switch_step]")
    p.add_argument("--prompt-len", default="512",
                   help="prompt tokens: N, uniform:LO:HI or lognormal:MEDIAN:SIGMA[:MAX] (default 512)")
    p.add_argument("--gen-len", default="256", help="new tokens, same forms (default 256)")
    p.add_argument("--seed", type=int, default=0, help="seed of every draw (default 0)")
    p.add_argument("--switch-dist", default=None,
                   help="per-request switch points of a progressive policy: S:COUNT,... or "
                        "FILE.csv:SCHEDULER (an `mpsim evaluate` switch_points.csv)")
    p.add_argument("--allow-beyond-context", action="store_true",
                   help="accept requests longer than the model's context")


def _scheduler_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-num-seqs", type=int, default=D.max_num_seqs,
                   help=f"sequences per iteration (default {D.max_num_seqs}, vLLM's)")
    p.add_argument("--max-num-batched-tokens", type=int, default=None,
                   help="tokens per iteration (default: the model's context length)")
    p.add_argument("--block-size", type=int, default=D.block_size,
                   help=f"KV tokens per paged block (default {D.block_size}, vLLM's)")
    p.add_argument("--chunked-prefill", action=argparse.BooleanOptionalAction, default=D.chunked_prefill,
                   help="chunked prefill (default on); --no-chunked-prefill: prefill-first")
    p.add_argument("--gpu-memory-utilization", type=float, default=D.gpu_memory_utilization,
                   help=f"share of device memory for weights, workspace and KV "
                        f"(default {D.gpu_memory_utilization}, vLLM's)")
    p.add_argument("--watermark", type=float, default=D.watermark,
                   help=f"share of KV blocks kept free when admitting (default {D.watermark}, vLLM's)")
    p.add_argument("--num-kv-blocks", type=int, default=None, help="override the KV capacity (blocks)")
    p.add_argument("--mixed-precision", default=D.mixed_precision, choices=("per-group", "highest"),
                   help="GEMMs of a batch mixing precisions: one launch per precision group "
                        "(default) or all tokens at the highest precision present")


def config_from_args(args: argparse.Namespace) -> Any:
    from mpsim.serve.config import Buckets, IterationProtocols, ServeConfig, Slo

    sched = SchedulerConfig(args.max_num_seqs, args.max_num_batched_tokens, args.block_size,
                            args.chunked_prefill, args.gpu_memory_utilization, args.watermark,
                            args.num_kv_blocks, args.mixed_precision)
    ms = 1e-3
    slo = Slo(None if args.slo_ttft_ms is None else args.slo_ttft_ms * ms,
              None if args.slo_tpot_ms is None else args.slo_tpot_ms * ms)
    protocol = IterationProtocols(args.decode_protocol, args.prefill_protocol,
                                  host_overhead_s=args.host_overhead_us * 1e-6)
    return ServeConfig(sched, slo, args.perf_model, protocol, Buckets(enabled=not args.exact_pricing),
                       args.warmup_frac, args.cooldown_frac, args.allow_beyond_context, args.pricing,
                       args.engine, args.tp, args.pp, args.quant_method)


def _check_counts(args: argparse.Namespace) -> None:
    """The integer options no later step checks before it runs (a negative seed failed in numpy)."""
    from mpsim.errors import MpsimInputError

    for option, value in (("--seed", args.seed), ("--audit", args.audit)):
        if value < 0:
            raise MpsimInputError(f"{option}: expected an integer >= 0, got {value}")


def run(args: argparse.Namespace) -> int:
    from mpsim.hw_models.loader import load_hardware
    from mpsim.models import get_model
    from mpsim.policy import parse_policy
    from mpsim.serve.arrivals import build_requests
    from mpsim.serve.engine import run_serve
    from mpsim.serve.outputs import OUTPUT_FILES, format_summary, write_outputs
    from mpsim.sim import check_model
    from mpsim.traces.atomic_folder import check_folder

    _check_counts(args)
    check_folder(args.out, OUTPUT_FILES)
    check_model(args.perf_model)
    spec, policy, hw = get_model(args.model), parse_policy(args.policy), load_hardware(args.hw)
    cfg = config_from_args(args)
    reqs = build_requests(spec, arrivals=args.arrivals, rate=args.rate, requests=args.requests,
                          duration_s=args.duration, prompt_len=args.prompt_len, gen_len=args.gen_len,
                          seed=args.seed, switch_dist=args.switch_dist,
                          allow_beyond=args.allow_beyond_context)
    if reqs.beyond:
        warn(f"{reqs.beyond} of {len(reqs)} requests exceed {spec.name}'s context of "
             f"{spec.max_context_len:,} tokens; running them anyway (--allow-beyond-context)")
    result = run_serve(spec, policy, hw, reqs, cfg, audit_every=args.audit, progress=None)
    paths = write_outputs(args.out, result.requests, result.iterations, result.summary, args.timeline)
    print(format_summary(result.summary))
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0

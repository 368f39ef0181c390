"""`mpsim hw list`, `mpsim hw show NAME`, `mpsim models`: what mpsim knows about."""

from __future__ import annotations

import argparse
from typing import Any

from mpsim.hw_models.loader import list_hardware, load_hardware
from mpsim.hw_models.schema import GpuSpec
from mpsim.memory import FIT_BATCH, FIT_CONTEXT, MEMORY_UTILIZATION, TP_SIZES, gpus_needed, point_memory
from mpsim.models import PRESETS
from mpsim.policy import parse_policy
from mpsim.workload import Workload

FIT_POLICIES = ("fp16", "fp8+kv8f", "w8", "nvfp4", "w4", "w4+kv8")  # fp8/fp4: memory only (docs/design.md)
FIT_GEN = 512  # of the FIT_CONTEXT tokens, generated; the rest is the prompt


def register(sub: Any) -> None:
    hw = sub.add_parser("hw", help="list or show hardware models")
    hw_sub = hw.add_subparsers(dest="hw_command", required=True, metavar="{list,show}")
    hw_sub.add_parser("list", help="shipped hardware files").set_defaults(func=_hw_list)
    show = hw_sub.add_parser("show", help="one hardware model's numbers and sources")
    show.add_argument("name", help="a shipped name or a YAML path")
    show.set_defaults(func=_hw_show)
    sub.add_parser("models", help="model presets").set_defaults(func=_models)
    eng = sub.add_parser("engines", help="inference engines: which library kernel serves each op, "
                                         "and the policies each runs")
    eng.add_argument("name", nargs="*", help="engines to show (default: all)")
    eng.set_defaults(func=_engines)


def _engines(args: argparse.Namespace) -> int:
    from mpsim.engines.describe import describe_engines

    print(describe_engines(args.name))
    return 0


def _hw_list(args: argparse.Namespace) -> int:
    for name in list_hardware():
        spec = load_hardware(name)
        print(f"{name:<16} {spec.kind}  {spec.description}")
    return 0


def _hw_show(args: argparse.Namespace) -> int:
    spec = load_hardware(args.name)
    print(spec.describe())
    for s in spec.sources:
        print(f"  [{s.id}] ({s.kind}) {s.citation}" + (f" <{s.url}>" if s.url else ""))
    return 0


def _models(args: argparse.Namespace) -> int:
    print(f"{'name':<20}{'layers':>7}{'hidden':>8}{'ffn':>7}{'heads':>7}{'kv':>4}{'hdim':>6}"
          f"{'vocab':>8}{'context':>9}{'params':>8}  architecture")
    for m in PRESETS.values():
        arch = [m.norm + "norm", m.mlp]
        arch += ["GQA"] if m.num_kv_heads < m.num_heads else []
        arch += [f"rotary {m.rotary_fraction:.0%}"] if m.rotary_fraction < 1 else []
        arch += ["parallel attn+mlp"] if m.parallel_attn_mlp else []
        arch += ["biases"] if m.qkv_bias or m.o_bias or m.mlp_bias else []
        arch += ["tied embeddings"] if m.tied_embeddings else []
        print(f"{m.name:<20}{m.num_layers:>7}{m.hidden:>8}{m.ffn:>7}{m.num_heads:>7}"
              f"{m.num_kv_heads:>4}{m.head_dim:>6}{m.vocab:>8}{m.max_context_len or '?':>9}"
              f"{m.param_count() / 1e9:>7.2f}B  "
              f"{', '.join(arch)}")
    print()
    _gpus_table()
    return 0


def _gpus_table() -> None:
    """GPUs each preset needs per policy on every shipped GPU (docs/real-models.md#multi-gpu-presets)."""
    gpus = [(n, s) for n in list_hardware() if isinstance(s := load_hardware(n), GpuSpec)]
    wl = Workload(prompt_len=FIT_CONTEXT - FIT_GEN, gen_len=FIT_GEN, batch=FIT_BATCH)
    print(f"GPUs needed (tensor-parallel size, the smallest of {'/'.join(map(str, TP_SIZES))} that fits): "
          f"weights and KV split over the GPUs (KV heads replicated when fewer than GPUs) plus peak "
          f"activations, for batch {FIT_BATCH} x {FIT_CONTEXT} tokens, within "
          f"{MEMORY_UTILIZATION:.0%} of each GPU's memory; '-': more than {TP_SIZES[-1]}")
    print(f"{'model':<20}{'policy':<9}" + "".join(f"{n:>15}" for n, _ in gpus))
    for m in PRESETS.values():
        for spelling in FIT_POLICIES:
            mem = point_memory(m, parse_policy(spelling), wl)
            counts = [gpus_needed(m, mem, s.dram.size_GB * 1e9) for _, s in gpus]
            print(f"{m.name:<20}{spelling:<9}" + "".join(f"{c or '-':>15}" for c in counts))

"""docs/kernels.md's fp8 / fp4 decode table: time per output token (TTFT in brackets) of fp16,
fp8+kv8f and nvfp4 on mpsim's own kernels, per model, GPU and batch (the simulator with the shipped
defaults; prompt 512, 128 new tokens), between the `<!-- validation:fp-decode -->` markers.

    python -m mpsim.analysis.bench.fp_decode [--doc docs/kernels.md] [--print]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mpsim.analysis.validation.report_md import emit
from mpsim.hw_models.loader import load_hardware
from mpsim.models import PRESETS
from mpsim.policy import parse_policy
from mpsim.sim import simulate
from mpsim.synth import synthesize
from mpsim.workload import Workload

ROOT = Path(__file__).resolve().parents[2]
MODELS = ("vicuna-7b", "llama-3-8b")
HARDWARE = ("h200-sxm", "b200-sxm")
BATCHES = (1, 16)
POLICIES = ("fp16", "fp8+kv8f", "nvfp4")


def cell(model: str, hw: str, batch: int, policy: str) -> str:
    tr = synthesize(PRESETS[model], parse_policy(policy), Workload(512, 128, batch))
    s = simulate(tr, load_hardware(hw)).summary
    return f"{s.tpot_mean_s * 1e3:.3f} ({s.ttft_s * 1e3:.1f})"


def block() -> str:
    lines = ["| model | hw | batch | " + " | ".join(POLICIES) + " |",
             "|---|---|---|" + "---|" * len(POLICIES)]
    for model in MODELS:
        for hw in HARDWARE:
            for batch in BATCHES:
                cells = " | ".join(cell(model, hw, batch, p) for p in POLICIES)
                lines.append(f"| {model} | {hw} | {batch} | {cells} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--doc", type=Path, default=ROOT / "docs" / "kernels.md")
    p.add_argument("--print", action="store_true", help="print the table; leave the doc alone")
    args = p.parse_args(argv)
    emit(args.doc, {"fp-decode": block()}, args.print, "the fp8 / fp4 decode table")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

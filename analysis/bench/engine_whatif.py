"""What a weight policy buys on each engine: llama-3-8b's decode rate per policy and engine, and its
ratio to the same engine's fp16, per GPU and batch (the simulator with the shipped defaults),
between the `<!-- validation:engine-whatif -->` markers of docs/engines.md.

    python -m mpsim.analysis.bench.engine_whatif [--doc docs/engines.md] [--print]
        [--hw h200-sxm,h100-sxm] [--batches 1,16] [--prompt-len 1024] [--gen-len 128]

Each cell is `mpsim synth --engine E [--quant-method Q] --hw H` + `mpsim simulate` of one static
batch (prompt, then the decode steps): decode tokens / s over the decode steps. An engine variant
is an engine file and, where it picks its weight-only kernel by the checkpoint's method, the
method (SGLang: `gemlite` runs GemLite, its GEMMs at the candidates the model prices fastest, as
GemLite's autotuner picks; none runs Marlin). A policy the engine cannot run is `-`. Every number
is the model's: none of these runs is published (docs/validation.md's engine rows are).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from mpsim.analysis.validation.report_md import emit
from mpsim.engines import EngineChoice
from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import load_hardware
from mpsim.models import PRESETS
from mpsim.policy import parse_policy
from mpsim.sim import simulate
from mpsim.sim.best_config import with_autotuned_configs
from mpsim.synth import synthesize
from mpsim.workload import Workload

ROOT = Path(__file__).resolve().parents[2]
MODEL = "llama-3-8b"
POLICIES = ("fp16", "w4g128", "fp8")


@dataclass(frozen=True)
class Variant:
    label: str
    engine: str
    method: str | None = None


VARIANTS = (Variant("mpsim (own Triton kernels)", "mpsim"),
            Variant("trtllm", "trtllm"),
            Variant("vllm", "vllm"),
            Variant("sglang (Marlin)", "sglang"),
            Variant("sglang, gemlite (GemLite)", "sglang", "gemlite"))


def decode_rate(v: Variant, policy: str, hw_name: str, batch: int, prompt: int,
                gen: int) -> float | None:
    """Decode tokens / s of one cell; None where the engine cannot run the policy."""
    hw = load_hardware(hw_name)
    choice = EngineChoice.on(v.engine, hw, v.method) if v.engine != "mpsim" else EngineChoice()
    try:
        trace = synthesize(PRESETS[MODEL], parse_policy(policy), Workload(prompt, gen, batch),
                           engine=choice)
    except MpsimInputError as exc:  # the engine does not run this policy: its one error, said here
        print(f"{v.label}, {policy} on {hw_name}: {exc}", file=sys.stderr)
        return None
    trace, _ = with_autotuned_configs(trace, hw)
    return float(simulate(trace, hw, cache_dir=None).summary.decode_tokens_per_s)


def table(hws: list[str], batches: list[int], prompt: int, gen: int) -> pd.DataFrame:
    out = []
    for hw in hws:
        for batch in batches:
            for v in VARIANTS:
                rates = {p: decode_rate(v, p, hw, batch, prompt, gen) for p in POLICIES}
                base = rates["fp16"]
                for p, rate in rates.items():
                    out.append({"hw": hw, "batch": batch, "engine": v.label, "policy": p,
                                "tok_s": rate, "x_fp16": None if rate is None or not base
                                else rate / base})
    return pd.DataFrame(out)


def block(t: pd.DataFrame) -> str:
    head = ["| GPU | batch | engine | " + " | ".join(POLICIES) + " |",
            "|---|---|---|" + "---|" * len(POLICIES)]
    lines = []
    for (hw, batch, engine), g in t.groupby(["hw", "batch", "engine"], sort=False):
        cells = []
        for _, r in g.iterrows():
            if r["tok_s"] is None or pd.isna(r["tok_s"]):
                cells.append("-")
            elif r["policy"] == "fp16":
                cells.append(f"{r['tok_s']:,.0f}")
            else:
                cells.append(f"{r['tok_s']:,.0f} ({r['x_fp16']:.2f}x)")
        lines.append(f"| {hw} | {batch} | {engine} | " + " | ".join(cells) + " |")
    return "\n".join(head + lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--doc", type=Path, default=ROOT / "docs" / "engines.md")
    ap.add_argument("--print", action="store_true", help="print the block instead of writing it")
    ap.add_argument("--hw", default="h200-sxm,h100-sxm")
    ap.add_argument("--batches", default="1,16")
    ap.add_argument("--prompt-len", type=int, default=1024)
    ap.add_argument("--gen-len", type=int, default=128)
    args = ap.parse_args(argv)
    t = table(args.hw.split(","), [int(b) for b in args.batches.split(",")], args.prompt_len,
              args.gen_len)
    emit(args.doc, {"engine-whatif": block(t)}, args.print, "the engine what-if table")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

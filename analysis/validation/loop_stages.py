"""The GPU kit's one-row GEMVs with and without their pipelined K loop, against the model.

    python -m mpsim.analysis.validation.loop_stages OUT/bench_kernels.csv [--hw h200-sxm]
        [--doc docs/kernels.md | --print] [--out TABLE.csv]

Reads analysis/bench/kernels.py's CSV (the kit's bench_kernels.csv): for every projection at M = 1
and every format, its `triton` row (the launcher's config: on a GPU with `loop_stages`, the K loop
pipelined) and its `triton-plain-loop` twin (the same config without it, the loop the 2026-12-04
H200 captures ran). Both configs are priced by the GPU model (mpsim/sim/launch.py price_launch) and
set beside the measured medians: the measured and the predicted gain (plain / pipelined) and the
model's error on each. A CSV from the interpreter (the kit's dry run) gives the same table marked
as such; only a GPU's measurements go into the doc's block (docs/kernels.md#pipelined-k-loops).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from mpsim.analysis.validation.report_md import emit
from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import load_hardware
from mpsim.kernels.launch_config import LOOP_STAGES_KEY, LUT_WORDS_KEY, SZ_WORDS_KEY, LaunchConfig, cdiv
from mpsim.launch_plan import gemm_row
from mpsim.sim.launch import price_launch
from mpsim.traces.atomic import write_csv_atomic

ROOT = Path(__file__).resolve().parents[2]
PIPED, PLAIN = "triton", "triton-plain-loop"
NEEDED = ("device", "model", "module", "m", "n", "k", "impl", "format", "w_format", "w_bits",
          "group_size", "kernel", "config", "median_us")
INTERPRETER = "cpu (interpreter)"


def read_bench(path: Path) -> pd.DataFrame:
    """The bench CSV's one-row GEMV pairs: one row per (model, module, format) with both impls."""
    table = pd.read_csv(path)
    missing = [c for c in NEEDED if c not in table.columns]
    if missing:
        raise MpsimInputError(f"{path}: not an analysis/bench/kernels.py table (missing columns "
                              f"{missing})")
    one = table[(table["m"] == 1) & table["impl"].isin([PIPED, PLAIN])]
    keys = ["device", "model", "module", "n", "k", "format"]
    wide = one.pivot_table(index=keys, columns="impl", values="median_us", aggfunc="first")
    if PLAIN not in wide.columns or PIPED not in wide.columns:
        raise MpsimInputError(f"{path}: no M = 1 rows with both impls {PIPED!r} and {PLAIN!r} "
                              "(a bench CSV written before stop 58 has no plain-loop twin)")
    wide = wide.dropna(subset=[PIPED, PLAIN]).reset_index()
    configs = one[one["impl"].isin([PIPED, PLAIN])].set_index([*keys, "impl"])
    return wide.merge(_configs(configs, keys), on=keys)


def _configs(rows: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Each pair's shape columns and both configs (JSON), one row per pair."""
    out = []
    for key, grp in rows.groupby(level=list(range(len(keys)))):
        by = dict(zip(grp.index.get_level_values("impl"), grp.itertuples(), strict=True))
        if PIPED in by and PLAIN in by:
            first = by[PIPED]
            out.append(dict(zip(keys, key, strict=True), kernel=first.kernel, w_format=first.w_format,
                            w_bits=int(first.w_bits), group_size=_group(first.group_size),
                            config_piped=by[PIPED].config, config_plain=by[PLAIN].config))
    return pd.DataFrame(out)


def _group(value: object) -> int | None:
    return None if pd.isna(value) else int(value)  # type: ignore[call-overload]


def launch_config(kernel: str, n: int, config: str) -> LaunchConfig:
    """The bench row's GEMV config as a LaunchConfig (grid: BLOCK_N tiles x splits)."""
    c = json.loads(config)
    extra = tuple((key, int(c[key])) for key in (LOOP_STAGES_KEY, SZ_WORDS_KEY, LUT_WORDS_KEY)
                  if key in c)
    return LaunchConfig(kernel, (cdiv(n, c["block_n"]), c["split_k"]), c["block_m"], c["block_n"],
                        c["block_k"], c["num_warps"], c["num_stages"], c["split_k"], extra=extra)


def predicted_us(pair: pd.Series, config: str, hw: object) -> float:
    cfg = launch_config(str(pair["kernel"]), int(pair["n"]), config)
    row = gemm_row(1, int(pair["n"]), int(pair["k"]), str(pair["w_format"]), int(pair["w_bits"]),
                   pair["group_size"], False, config=cfg)
    return float(price_launch(row, hw)["time_s"]) * 1e6  # type: ignore[arg-type]


def compare(pairs: pd.DataFrame, hw_name: str) -> pd.DataFrame:
    """Measured and predicted times of both loops, the gains, the model's errors."""
    hw = load_hardware(hw_name)
    out = pairs.copy()
    out["pred_piped_us"] = [predicted_us(p, p["config_piped"], hw) for _, p in out.iterrows()]
    out["pred_plain_us"] = [predicted_us(p, p["config_plain"], hw) for _, p in out.iterrows()]
    out["gain"] = out[PLAIN] / out[PIPED]
    out["pred_gain"] = out["pred_plain_us"] / out["pred_piped_us"]
    out["err_piped_pct"] = 100 * (out["pred_piped_us"] / out[PIPED] - 1)
    out["err_plain_pct"] = 100 * (out["pred_plain_us"] / out[PLAIN] - 1)
    return out


def markdown(table: pd.DataFrame, hw_name: str) -> str:
    lines = [f"Priced on `{hw_name}`; measured on {', '.join(sorted(set(table['device'])))}.", "",
             "| model | module | N x K | format | pipelined us (model) | plain us (model) | gain "
             "(model) | model error pipelined / plain |", "|---|---|---|---|---|---|---|---|"]
    for _, r in table.iterrows():
        lines.append(f"| {r['model']} | {r['module']} | {r['n']} x {r['k']} | {r['format']} | "
                     f"{r[PIPED]:.1f} ({r['pred_piped_us']:.1f}) | {r[PLAIN]:.1f} "
                     f"({r['pred_plain_us']:.1f}) | {r['gain']:.2f}x ({r['pred_gain']:.2f}x) | "
                     f"{r['err_piped_pct']:+.1f}% / {r['err_plain_pct']:+.1f}% |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bench", type=Path, help="the kit's bench_kernels.csv")
    ap.add_argument("--hw", default="h200-sxm", help="the hardware file to price with")
    ap.add_argument("--doc", type=Path, default=ROOT / "docs" / "kernels.md")
    ap.add_argument("--print", action="store_true", help="print the table; write no doc")
    ap.add_argument("--out", type=Path, help="also write the table as CSV")
    args = ap.parse_args(argv)
    try:
        table = compare(read_bench(args.bench), args.hw)
    except MpsimInputError as exc:
        print(f"loop_stages: {exc}", file=sys.stderr)
        return 2
    if args.out:
        write_csv_atomic(table, args.out)
    interpreted = (table["device"] == INTERPRETER).any()
    if interpreted and not args.print:
        print(markdown(table, args.hw))
        print("loop_stages: interpreter timings (a dry run): the doc's block takes a GPU's only")
        return 0
    emit(args.doc, {"loop-stages": markdown(table, args.hw)}, args.print, "the one-row loop table")
    return 0


if __name__ == "__main__":
    sys.exit(main())

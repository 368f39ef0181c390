"""`mpsim validate TRACE --hw H` (simulated vs measured) and `mpsim calibrate TRACE --hw H --out F`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mpsim.commands.common import add_hw_arg, hardware
from mpsim.commands.simulate import add_cache_args, cache_dir
from mpsim.hw_models.loader import load_hardware

if TYPE_CHECKING:
    from mpsim.sim.calibrate import CalibrationResult, Knobs


def register(sub: Any) -> None:
    v = sub.add_parser("validate", help="compare simulated with measured launch times")
    v.add_argument("trace", help="a trace with measured_us (captured on a GPU)")
    add_hw_arg(v)
    v.add_argument("--plot", help="scatter plot PNG (default <trace stem>-validation.png)")
    v.add_argument("--out", help="write the error table as CSV")
    add_cache_args(v)
    v.set_defaults(func=_validate)
    c = sub.add_parser("calibrate", help="fit a hardware file's efficiency knobs to measured times")
    c.add_argument("trace", help="a trace with measured_us")
    add_hw_arg(c)
    c.add_argument("--out", required=True, help="calibrated hardware YAML to write")
    c.add_argument("--holdout", type=float, default=0.25,
                   help="share of distinct launches held out to report the error on (default 0.25)")
    c.set_defaults(func=_calibrate)


def _validate(args: argparse.Namespace) -> int:
    # pandas, the simulator and matplotlib (the scatter plot) load here, not when the CLI builds its
    # parser
    from mpsim.analysis.validation import format_table, scatter_plot, validate_trace
    from mpsim.traces.io import read_trace

    trace = read_trace(args.trace)
    hw = hardware(args.hw)
    v = validate_trace(trace, hw, cache_dir(args))
    print(f"validation of {Path(args.trace).name} on {hw.name}: {len(v.measured_s)} measured launches")
    devices = set(trace.rows["device"].dropna().astype(str))
    if any("interpreter" in d or d.startswith("cpu") for d in devices):
        print(f"note: the measured times come from {sorted(devices)}, not from {hw.name}: "
              "the errors below compare a CPU interpreter's host time with a GPU model")
    print(format_table(v.table))
    plot = args.plot or f"{Path(args.trace).stem}-validation.png"
    scatter_plot(v, plot, f"{Path(args.trace).name} on {hw.name}")
    print(f"wrote {plot}")
    if args.out:
        v.table.to_csv(args.out, index=False)
        print(f"wrote {args.out}")
    return 0


def _calibrate(args: argparse.Namespace) -> int:
    # pandas and the simulator load here, not when the CLI builds its parser
    from mpsim.sim.calibrate import calibrate
    from mpsim.sim.calibrated_file import write_calibrated
    from mpsim.traces.io import read_trace

    trace = read_trace(args.trace)
    result = calibrate(trace.rows, load_hardware(args.hw), args.holdout)
    print(format_calibration(result))
    path = write_calibrated(args.hw, result, Path(args.trace).name, args.out)
    print(f"wrote {path}")
    return 0


def _knobs(k: Knobs) -> str:
    return (f"bandwidth fraction {k.bandwidth_fraction:.3f}, overhead {k.overhead_us:.2f} us, "
            f"dequant scale {k.dequant_scale:.3f}")


def format_calibration(r: CalibrationResult) -> str:
    return "\n".join([
        f"  before: {_knobs(r.before)}",
        f"  after:  {_knobs(r.after)}",
        f"  train MAPE {r.train_mape_before:.2f}% -> {r.train_mape_after:.2f}% ({r.train_launches} launches)",
        f"  held-out MAPE {r.test_mape_before:.2f}% -> {r.test_mape_after:.2f}% "
        f"({r.test_launches} launches; roofline {r.test_mape_roofline:.2f}%)",
    ])

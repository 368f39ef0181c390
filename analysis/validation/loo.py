"""Leave one GPU out, and one architecture out: how far to trust mpsim on a GPU nobody measured.

    nice -n 10 python -m mpsim.analysis.validation.loo [--groundtruth ../shared/groundtruth]
        [--sample 400] [--classes gemm,decode] [--work DIR] [--doc docs/validation.md]

For each class (bf16 GEMM, cuBLAS; decode attention, every kernel the tables name) and each GPU of
the ground truth with a hardware file (H200, H100, L40S, B200; A100 is held out of everything and
has no table there), a stratified sample of at most `--sample` rows per class and GPU (split evenly
over the GPU's tables, sampling.py, fixed seed) is priced by the GPU's own hardware file. Then
the device-independent constants (loo_fit.py) are fitted jointly:
- on all four GPUs (in-sample);
- on every GPU but one, predicting the one left out, for each in turn (leave-one-GPU-out);
- on every architecture but one (Hopper = H100 + H200, Ada = L40S, Blackwell = B200), predicting
  the one left out (Ada and Blackwell have one GPU each, so theirs is the leave-one-GPU-out fit).
Every fit's constants are kept in `--work` (JSON, written atomically, named by a hash of the
sample, the fitted GPUs, the class and the sources of this code and the simulator), so an
interrupted run continues where it stopped. The table (per class, M band and GPU: shipped
defaults, in-sample, leave-one-GPU-out with its p90, leave-one-architecture-out, roofline, and the
three-constant efficiency roofline fitted on the other GPUs' rows of the class) is printed and
written between the `<!-- validation:loo -->` markers of the doc (loo_md.py), with the wall time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from mpsim.analysis.validation.calibration import Evaluator
from mpsim.analysis.validation.doc_block import publish, run
from mpsim.analysis.validation.gemm_devices import bf16_only
from mpsim.analysis.validation.loo_fit import CANDIDATES, Fit, Pool, fit_shared
from mpsim.analysis.validation.loo_md import markdown, write_doc
from mpsim.analysis.validation.measured import activation_rows, band_of
from mpsim.analysis.validation.metrics import eff_roofline, fit_eff_roofline
from mpsim.analysis.validation.predict import predict_rows
from mpsim.analysis.validation.sampling import SEED, stratified_sample
from mpsim.analysis.validation.selections import apply_selection
from mpsim.analysis.validation.sources import read_measurements
from mpsim.analysis.validation.stacks import find_tables, hardware_of
from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import load_hardware
from mpsim.sim.memo import default_cache_dir, fingerprint_files, source_fingerprint
from mpsim.traces.atomic import write_text_atomic

GPUS = ("h200_sxm", "h100_sxm", "l40s", "b200_sxm")
ARCH = {"h200_sxm": "Hopper", "h100_sxm": "Hopper", "l40s": "Ada", "b200_sxm": "Blackwell"}
HELD_OUT = "a100"  # never fitted on (HELPERS.md): refused if a table of it appears
MAX_SAMPLE = 400
FILES = {"gemm": "gemm_perf.parquet", "decode": "generation_attention_perf.parquet"}


def class_rows(gt: Path, cls: str, gpu: str, sample: int) -> pd.DataFrame:
    """The sampled, predictable rows of one class on one GPU (every stack's table)."""
    if HELD_OUT in gpu:
        raise MpsimInputError(f"{gpu}: A100 is the held-out device; nothing is fitted on it")
    tables = [t for t in find_tables(gt)[0] if t.gpu == gpu and t.path.name == FILES[cls]]
    if not tables:
        raise MpsimInputError(f"{gt}: no {FILES[cls]} for {gpu}")
    per = max(1, sample // len(tables))
    parts = []
    for t in tables:
        m = apply_selection(read_measurements(t.path), "stacks")
        m = bf16_only(m) if cls == "gemm" else m
        rows = stratified_sample(m, per).rows
        keep = rows["status"] == "ok"
        if cls == "decode":
            keep &= rows["cls"].astype(str).str.startswith("attention decode")
        parts.append(rows[keep].assign(stack=t.stack))
    return pd.concat(parts, ignore_index=True)


def _fingerprint() -> str:
    here = Path(__file__).resolve().parent
    return fingerprint_files([here / f for f in ("loo.py", "loo_fit.py", "calibration.py", "predict.py",
                                                 "adapter.py", "measured.py", "sampling.py",
                                                 "constants.py", "fit_params.py", "search.py", "lsq.py")])


def fit_key(cls: str, fitted: Sequence[str], sample: int) -> str:
    text = f"{cls}|{','.join(sorted(fitted))}|{sample}|{SEED}|{_fingerprint()}|{source_fingerprint()}"
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def fit_or_load(pools: dict[str, Pool], cls: str, fitted: Sequence[str], sample: int,
                work: Path) -> Fit:
    path = work / f"{cls}-{'+'.join(sorted(fitted))}-{fit_key(cls, fitted, sample)}.json"
    if path.is_file():
        d = json.loads(path.read_text())
        return Fit(d["params"], d["protocol_us"], tuple(d["screened_out"]), d["cost_before"],
                   d["cost_after"], d["simulations"])
    t0 = time.perf_counter()
    fit = fit_shared([pools[g] for g in fitted], CANDIDATES[cls])
    d = {"class": cls, "fitted_on": sorted(fitted), "sample": sample, "params": fit.params,
         "protocol_us": fit.protocol_us, "screened_out": list(fit.screened_out),
         "cost_before": fit.cost_before, "cost_after": fit.cost_after,
         "simulations": fit.simulations, "wall_s": round(time.perf_counter() - t0, 1)}
    write_text_atomic(json.dumps(d, indent=1), path)
    _say(f"  fitted {cls} on {'+'.join(fitted)}: {fit.simulations} simulations, "
         f"{d['wall_s']} s: {fit.params} {fit.protocol_us}")
    return fit


def folds(gpus: Sequence[str]) -> dict[str, list[str]]:
    """Fold name -> the GPUs fitted: all, each GPU out, each architecture with > 1 GPU out."""
    out = {"in-sample": list(gpus)}
    for g in gpus:
        out[f"-{g}"] = [o for o in gpus if o != g]
    for arch in sorted({ARCH[g] for g in gpus}):
        members = [g for g in gpus if ARCH[g] == arch]
        if len(members) > 1 and len(members) < len(gpus):
            out[f"-{arch}"] = [o for o in gpus if ARCH[o] != arch]
    return out


def run_class(gt: Path, cls: str, gpus: Sequence[str], sample: int, work: Path
              ) -> tuple[pd.DataFrame, dict[str, Fit]]:
    pools: dict[str, Pool] = {}
    extra: dict[str, pd.DataFrame] = {}
    for g in gpus:
        rows = class_rows(gt, cls, g, sample)
        ev = Evaluator(rows, load_hardware(str(hardware_of(g))))
        pool = Pool(g, ev)
        shipped = pool.predict({}, {})
        p = predict_rows(ev.rows, ev.hw, cache_dir=None, params=ev.params, protocols=ev.table,
                         configs=ev.configs, progress=False)
        extra[g] = pd.DataFrame({"t_math_us": p.t_math_us, "t_mem_us": p.t_mem_us,
                                 "shipped": shipped, "roofline": ev.roofline(pool.base)})
        pools[g] = pool
        _say(f"  {cls} {g}: {len(rows)} rows priced")
    fits = {name: fit_or_load(pools, cls, fitted, sample, work) for name, fitted in folds(gpus).items()}
    frames = []
    for g in gpus:
        pool, ev = pools[g], pools[g].ev
        f = extra[g].assign(gpu=g, cls=ev.rows["cls"].astype(str).to_numpy(),
                            band=band_of(activation_rows(ev.rows)), measured=ev.measured)
        f["in-sample"] = pool.predict(fits["in-sample"].params, fits["in-sample"].protocol_us)
        loo = fits[f"-{g}"]
        f["leave-one-GPU-out"] = pool.predict(loo.params, loo.protocol_us)
        arch = fits.get(f"-{ARCH[g]}", loo)
        f["leave-one-arch-out"] = pool.predict(arch.params, arch.protocol_us)
        frames.append(f)
    out = pd.concat(frames, ignore_index=True)
    out["eff. roofline (other GPUs)"] = np.nan
    for g in gpus:
        o = out[(out["gpu"] != g) & np.isfinite(out["shipped"])]
        consts = fit_eff_roofline(o["t_math_us"], o["t_mem_us"], o["measured"])
        at = out["gpu"] == g
        out.loc[at, "eff. roofline (other GPUs)"] = eff_roofline(
            out.loc[at, "t_math_us"].to_numpy(), out.loc[at, "t_mem_us"].to_numpy(), *consts)
    return out, fits


MODELS = ("shipped", "in-sample", "leave-one-GPU-out", "leave-one-arch-out", "roofline",
          "eff. roofline (other GPUs)")


def table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per class, M band (GEMM) and GPU: rows, MAPE of each model, p90 of leave-one-GPU-out."""
    out = []
    for (cls, gpu), g in rows.groupby(["cls", "gpu"], sort=True):
        ok = g[np.isfinite(g["shipped"])]
        bands = ([b for b in ("1-16", "17-256", "257-8192", ">8192") if (ok["band"] == b).any()]
                 if str(cls).startswith("gemm") else [])
        for band in [*bands, "all"]:
            s = ok if band == "all" else ok[ok["band"] == band]
            y = s["measured"].to_numpy()
            rec: dict[str, object] = {"class": cls, "M band": band, "GPU": gpu, "rows": len(s)}
            for m in MODELS:
                rec[m] = float(np.mean(np.abs(s[m].to_numpy() - y) / y) * 100)
            e = np.abs(s["leave-one-GPU-out"].to_numpy() - y) / y * 100
            rec["leave-one-GPU-out p90"] = float(np.percentile(e, 90))
            out.append(rec)
    return pd.DataFrame(out)


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    root = Path(__file__).resolve().parents[2]
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--groundtruth", type=Path, default=root.parent / "shared" / "groundtruth")
    p.add_argument("--sample", type=int, default=MAX_SAMPLE, help="rows per class and GPU (<= 400)")
    p.add_argument("--classes", default="gemm,decode")
    p.add_argument("--gpus", default=",".join(GPUS))
    p.add_argument("--work", type=Path, default=None, help="where fitted constants are kept")
    p.add_argument("--doc", type=Path, default=None, help="write the table into this doc")
    a = p.parse_args(argv)
    if not 1 <= a.sample <= MAX_SAMPLE:
        raise MpsimInputError(f"--sample {a.sample}: expected 1..{MAX_SAMPLE} rows per class and GPU")
    classes = [c for c in a.classes.split(",") if c]
    gpus = [g for g in a.gpus.split(",") if g]
    bad = [c for c in classes if c not in FILES] + [g for g in gpus if g not in ARCH]
    if bad:
        raise MpsimInputError(f"--classes/--gpus {bad}: expected classes {list(FILES)}, GPUs {list(ARCH)}")
    if not (a.groundtruth / "aiconfigurator").is_dir():
        print(f"no aiconfigurator tables under {a.groundtruth}", file=sys.stderr)
        return 2
    work = a.work or default_cache_dir() / "loo"
    work.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    parts, fits = [], {}
    for cls in classes:
        rows, fits[cls] = run_class(a.groundtruth, cls, gpus, a.sample, work)
        parts.append(rows)
    t = table(pd.concat(parts, ignore_index=True))
    wall = time.perf_counter() - start
    return publish(markdown(t, fits, a.sample, wall), a.doc,
                   lambda doc: write_doc(doc, t, fits, a.sample, wall))


if __name__ == "__main__":
    sys.exit(run(main))

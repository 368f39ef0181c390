"""`mpsim quantize`: quantize a model folder once; every engine command then loads the result directly."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from mpsim.errors import MpsimInputError


def register(sub: Any) -> None:
    q = sub.add_parser("quantize", help="quantize an HF model folder once (group or any-precision)")
    q.add_argument("--model", required=True, help="HF folder: config.json, *.safetensors, tokenizer files")
    q.add_argument("--policy", required=True,
                   help="the format to store: w{8,4,3,2}[g{G}|grow] (group) or ap{b} (any-precision parent; "
                        "ap4 also serves ap3, ap4-3, ap4-4@S-3, ...)")
    q.add_argument("--out", required=True, help="output folder (self-contained: config, tokenizer, weights)")
    q.add_argument("--sensitivity", default=None,
                   help="safetensors of per-weight sensitivities under the HF weight names (any-precision "
                        "clustering weights each value by them; default: all equal)")
    q.set_defaults(func=_quantize)


def _quantize(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from mpsim.engine.quantize_checkpoint import OUTPUT_FILES, quantize_folder, total_rows, weight_format
    from mpsim.engine.quantized import is_quantized
    from mpsim.models import from_hf_config
    from mpsim.policy import parse_policy

    src, out = Path(args.model), Path(args.out)
    if not (src / "config.json").exists():
        raise MpsimInputError(f"--model {src}: no config.json (expected a Hugging Face model folder)")
    if is_quantized(src):
        raise MpsimInputError(f"--model {src}: already quantized; quantize the original checkpoint")
    if out.resolve() != src.resolve():  # (the same folder: quantize_folder says so)
        from mpsim.traces.atomic_folder import check_folder

        check_folder(out, OUTPUT_FILES)
    spec = from_hf_config(src / "config.json")
    policy = parse_policy(args.policy)
    fmt = weight_format(policy)
    start = time.perf_counter()
    with tqdm(total=total_rows(spec), unit="row", desc=f"quantize {spec.name} -> {fmt['family']} "
              f"{fmt['bits']}-bit", unit_scale=True) as bar:
        paths = quantize_folder(src, out, spec, policy,
                                sensitivity=Path(args.sensitivity) if args.sensitivity else None,
                                progress=bar.update)
    size = sum(p.stat().st_size for p in paths) / 2**20
    print(f"wrote {out} ({size:.1f} MiB, {len(paths)} files) in {time.perf_counter() - start:.1f} s; "
          f"engine commands given --model {out} default to --policy {policy.spelling}")
    return 0

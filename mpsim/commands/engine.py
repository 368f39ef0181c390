"""Engine commands: `mpsim capture`, `mpsim generate`, `mpsim quality`, `mpsim train-tiny`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mpsim.commands.common import add_generation_args
from mpsim.errors import MpsimInputError
from mpsim.policy import parse_policy
from mpsim.workload import Workload


def register(sub: Any) -> None:
    cap = sub.add_parser("capture", help="run the engine on mpsim's kernels and record every launch")
    add_generation_args(cap)
    src = cap.add_mutually_exclusive_group()
    src.add_argument("--weights", help="HF-style folder: config.json + *.safetensors "
                     "(default for --model tiny: the shipped weights)")
    src.add_argument("--dummy", action="store_true", help="random weights at the real shapes (timing)")
    cap.add_argument("--out", required=True, help="trace file to write (Parquet)")
    cap.add_argument("--profile", help="also write a torch.profiler (Kineto) JSON with mpsim ranges")
    cap.set_defaults(func=_capture)

    gen = sub.add_parser("generate", help="greedy continuation of a text prompt (byte-level tiny model)")
    gen.add_argument("--model", default="tiny")
    gen.add_argument("--policy", default="fp16")
    gen.add_argument("--prompt", required=True)
    gen.add_argument("--gen-len", type=int, default=64)
    gen.add_argument("--backend", choices=("reference", "triton"), default="reference")
    gen.set_defaults(func=_generate)

    q = sub.add_parser("quality", help="quality of a policy against fp16 on held-out text")
    q.add_argument("--model", default="tiny")
    q.add_argument("--policy", required=True, help="one policy or a comma-separated list")
    q.add_argument("--samples", type=int, default=16)
    q.add_argument("--prompt-len", type=int, default=64)
    q.add_argument("--gen-len", type=int, default=32)
    q.add_argument("--backend", choices=("reference", "triton"), default="reference")
    q.set_defaults(func=_quality)

    t = sub.add_parser("train-tiny", help="train the tiny byte-level Llama on the stdlib sources")
    t.add_argument("--out", default=None, help="output folder (default: the shipped mpsim/data/tiny)")
    t.add_argument("--steps", type=int, default=None, help="override the number of training steps")
    t.set_defaults(func=_train_tiny)


def _capture(args: argparse.Namespace) -> int:
    # the engine (torch, the Triton kernels) loads here, not when the CLI builds its parser
    from mpsim.engine.capture import capture
    from mpsim.tiny.shipped import resolve_model
    from mpsim.traces.io import write_trace

    spec, weights = (resolve_model(args.model, None)[0], None) if args.dummy \
        else resolve_model(args.model, args.weights)
    if weights is None and not args.dummy:
        raise MpsimInputError(f"capture --model {args.model}: give --weights DIR or --dummy")
    trace = capture(spec, parse_policy(args.policy), Workload(args.prompt_len, args.gen_len, args.batch),
                    weights=weights, profile=args.profile)
    path = write_trace(trace, args.out)
    total_ms = trace.rows["measured_us"].sum() / 1e3
    print(f"wrote {path}: {len(trace.rows)} launches, {total_ms:.1f} ms measured "
          f"({trace.meta.environment['timer']}, {trace.meta.environment['device']})")
    return 0


def _tiny_only(model: str) -> None:
    if model != "tiny":
        raise MpsimInputError(f"--model {model!r}: text generation and quality need the byte-level "
                              "model 'tiny' (its tokenizer is the identity on bytes)")


def _generate(args: argparse.Namespace) -> int:
    # torch and the kernels load here, not when the CLI builds its parser
    from mpsim.engine.backends import make_backend
    from mpsim.engine.generate import generate
    from mpsim.engine.model import Decoder
    from mpsim.engine.scheduler import FixedScheduler
    from mpsim.tiny.shipped import load_tiny

    _tiny_only(args.model)
    _, params = load_tiny()
    policy = parse_policy(args.policy)
    decoder = Decoder(params, policy, make_backend(args.backend))
    out = generate(decoder, [list(args.prompt.encode())], args.gen_len, FixedScheduler(policy))
    print(args.prompt + bytes(out.tokens[0]).decode("utf-8", errors="replace"))
    return 0


def _quality(args: argparse.Namespace) -> int:
    # torch and the kernels load here, not when the CLI builds its parser
    from mpsim.quality.heldout import fp16_baseline, heldout_windows, measure_quality
    from mpsim.tiny.shipped import load_tiny

    _tiny_only(args.model)
    _, params = load_tiny()
    windows = heldout_windows(args.samples, args.prompt_len + args.gen_len)
    base = fp16_baseline(params, windows, args.prompt_len, args.gen_len, args.backend)
    print(f"{'policy':<18}{'bits/byte':>10}{'agree':>8}{'rougeL-w':>10}{'rougeL-b':>10}"
          f"{'avg bits (PMPD)':>17}{'avg bits (mean)':>17}")
    for text in args.policy.split(","):
        r = measure_quality(params, text.strip(), None, windows, args.prompt_len, args.gen_len, base,
                            args.backend)
        print(f"{r.policy:<18}{r.bits_per_byte:>10.3f}{r.agreement_with_fp16:>8.3f}{r.rouge_l_words:>10.3f}"
              f"{r.rouge_l_bytes:>10.3f}{r.avg_bits_pmpd:>17.2f}{r.avg_bits_mean:>17.2f}")
    return 0


def _train_tiny(args: argparse.Namespace) -> int:
    # torch loads here, not when the CLI builds its parser
    import dataclasses

    from mpsim.tiny.shipped import tiny_dir
    from mpsim.tiny.train import TinyConfig, train_tiny

    cfg = TinyConfig() if args.steps is None else dataclasses.replace(TinyConfig(), steps=args.steps)
    out = train_tiny(Path(args.out) if args.out else tiny_dir(), cfg)
    print(f"wrote {out}/config.json, model.safetensors, train_log.csv, loss.png")
    return 0

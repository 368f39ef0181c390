"""Scheduler commands: `mpsim evaluate` (policies and schedulers: quality and simulated speed) and
`mpsim train-scheduler` (the learned scheduler's data and classifier)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from mpsim.errors import MpsimInputError


def _csv(text: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in text.split(",") if t.strip())


def _ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(t) for t in _csv(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def register(sub: Any) -> None:
    ev = sub.add_parser("evaluate", help="policies and precision schedulers: quality vs fp16 and speed")
    ev.add_argument("--model", default="tiny", help="the generating model (only 'tiny': byte-level)")
    ev.add_argument("--policies", type=_csv, default=("fp16", "ap4", "ap3", "ap4-3", "ap4-4@8-3"))
    ev.add_argument("--schedulers", type=_csv, default=("static", "learned"),
                    help="any of uniform-high, uniform-low, phase-aware, static, learned, random, "
                         "random-prior, confidence, budget, budget@BITS, oracle")
    ev.add_argument("--hw", type=_csv, default=("h200-sxm", "npu-llm"))
    ev.add_argument("--ladder", type=_ints, default=None,
                    help="widths the schedulers walk down, e.g. 4,3 (default: highest,lowest ap listed)")
    ev.add_argument("--prompt-len", type=int, default=64)
    ev.add_argument("--gen-len", type=int, default=32)
    ev.add_argument("--val-samples", type=int, default=24)
    ev.add_argument("--test-samples", type=int, default=24)
    ev.add_argument("--segments", type=int, default=3, help="N: candidate switch points {0, L/N, ..., L}")
    ev.add_argument("--metric", choices=("rouge_bytes", "rouge_words"), default="rouge_bytes")
    ev.add_argument("--slack", type=float, default=0.0, help="quality target = all-high's minus this")
    ev.add_argument("--budget-bits", type=float, default=None, help="budget scheduler's target (default mid)")
    ev.add_argument("--speed-model", default=None,
                    help="model shapes the schedules are timed on (default: the generating model)")
    ev.add_argument("--perf-model", choices=("sim", "roofline"), default="sim")
    ev.add_argument("--learned", default=None, help="classifier folder (default: the tiny model's)")
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--out", required=True, help="folder for the table, plot and choices")
    ev.set_defaults(func=_evaluate)

    tr = sub.add_parser("train-scheduler", help="generate labels and train the learned scheduler")
    tr.add_argument("--model", default="tiny")
    tr.add_argument("--ladder", type=_ints, default=(4, 3))
    tr.add_argument("--samples", type=int, default=384)
    tr.add_argument("--prompt-len", type=int, default=64)
    tr.add_argument("--gen-len", type=int, default=32)
    tr.add_argument("--segments", type=int, default=3)
    tr.add_argument("--seed", type=int, default=0)
    tr.add_argument("--out", default=None, help="folder (default: the shipped mpsim/data/tiny)")
    tr.set_defaults(func=_train)


def _tiny(model: str) -> Any:
    # the tiny model (torch) loads here, not when the CLI builds its parser
    from mpsim.models import TINY_NAME
    from mpsim.tiny.shipped import load_tiny

    if model != TINY_NAME:
        raise MpsimInputError(f"--model {model!r}: schedulers are evaluated on generated text, which needs "
                              f"the byte-level model '{TINY_NAME}'")
    return load_tiny()


def _evaluate(args: argparse.Namespace) -> int:
    # the engine, the schedulers and the simulator load here, not when the CLI builds its parser
    from mpsim.analysis.evaluate.run import EvalConfig

    cfg = EvalConfig(args.policies, args.schedulers, args.hw, args.ladder, args.prompt_len, args.gen_len,
                     args.val_samples, args.test_samples, args.segments, args.metric, args.slack,
                     args.budget_bits, args.perf_model, args.seed)
    run_evaluation(cfg, args.out, args.model, args.speed_model, args.learned)
    return 0


def run_evaluation(cfg: Any, out: str | Path, model: str = "tiny", speed_model: str | None = None,
                   learned: str | None = None) -> list[Path]:
    # the engine, the schedulers, the simulator and the plots load only when an evaluation runs
    """Evaluate `cfg` (an EvalConfig) on `model`, print the table and write it to `out`."""
    from mpsim.analysis.evaluate.report import markdown, write_evaluation
    from mpsim.analysis.evaluate.run import evaluate
    from mpsim.models import get_model
    from mpsim.tiny.shipped import tiny_dir

    spec, params = _tiny(model)
    speed_spec = spec if speed_model in (None, model) else get_model(str(speed_model))
    ev = evaluate(params, cfg, speed_spec, Path(learned) if learned else tiny_dir())
    paths = write_evaluation(ev, out)
    print(markdown(ev))
    print(f"\n{ev.timings['total_s']:.0f} s; wrote " + ", ".join(str(p) for p in paths))
    return list(paths)


def _train(args: argparse.Namespace) -> int:
    # torch and the schedulers' training load here, not when the CLI builds its parser
    from mpsim.engine.scheduler import Ladder
    from mpsim.schedulers.learned import save_classifier
    from mpsim.schedulers.runs import DecoderPool
    from mpsim.schedulers.train import TrainConfig, make_training_data, train_classifier
    from mpsim.tiny.shipped import tiny_dir

    _, params = _tiny(args.model)
    cfg = TrainConfig(samples=args.samples, prompt_len=args.prompt_len, gen_len=args.gen_len,
                      segments=args.segments, seed=args.seed)
    ladder = Ladder(tuple(args.ladder))
    start = time.perf_counter()
    data = make_training_data(DecoderPool(params), ladder, cfg, progress=print)
    model, record = train_classifier(data, cfg)
    record |= {"ladder": list(ladder.widths), "model": args.model}
    paths = save_classifier(model, Path(args.out) if args.out else tiny_dir(), record)
    print(f"labels {record['label_counts']}, held-out accuracy {record['accuracy_heldout']} "
          f"(majority class {record['majority_class_heldout']}); {time.perf_counter() - start:.0f} s")
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0

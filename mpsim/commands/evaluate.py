"""Scheduler commands: `mpsim evaluate` (policies and schedulers: quality and simulated speed) and
`mpsim train-scheduler` (the learned scheduler's data and classifier)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from mpsim.commands.common import MODEL_HELP, add_prompt_args, check_counts
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
    ev.add_argument("--model", default="tiny", help="the generating model: " + MODEL_HELP)
    ev.add_argument("--prompts", default=None, help="JSONL prompt file: first half validation, second half "
                    "test (default: held-out stdlib windows, byte-level models only)")
    ev.add_argument("--val-prompts", default=None, help="a separate validation prompt file (then all of "
                    "--prompts is the test set)")
    add_prompt_args(ev)
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
    ev.add_argument("--learned", default=None,
                    help="classifier folder (default: the model's own folder; tiny: the shipped one)")
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--backend", choices=("reference", "triton"), default="reference",
                    help="generations on the numba references (CPU) or mpsim's Triton kernels (GPU)")
    ev.add_argument("--out", required=True, help="folder for the table, plot and choices")
    ev.set_defaults(func=_evaluate)

    tr = sub.add_parser("train-scheduler", help="generate labels and train the learned scheduler")
    tr.add_argument("--model", default="tiny", help=MODEL_HELP)
    tr.add_argument("--prompts", default=None, help="JSONL training prompts (default: stdlib windows, "
                    "byte-level models only); never the evaluation's prompts")
    add_prompt_args(tr)
    tr.add_argument("--ladder", type=_ints, default=(4, 3))
    tr.add_argument("--samples", type=int, default=384)
    tr.add_argument("--prompt-len", type=int, default=64)
    tr.add_argument("--gen-len", type=int, default=32)
    tr.add_argument("--segments", type=int, default=3)
    tr.add_argument("--seed", type=int, default=0)
    tr.add_argument("--backend", choices=("reference", "triton"), default="reference")
    tr.add_argument("--out", default=None, help="folder (default: the model's folder; tiny: mpsim/data/tiny)")
    tr.set_defaults(func=_train)


def _model(name: str) -> Any:
    from mpsim.tiny.shipped import open_text_model

    return open_text_model(name)


def _prompt_sets(args: argparse.Namespace, model: Any) -> tuple[Any, Any] | None:
    """(validation, test) from --prompts [--val-prompts]; None: the stdlib windows (byte-level models)."""
    from mpsim.engine.prompts import file_prompt_set

    if args.prompts is None:
        if args.val_prompts is not None:
            raise MpsimInputError("--val-prompts needs --prompts (the test prompts)")
        if not model.byte_level:
            raise MpsimInputError(f"--model {args.model}: give --prompts FILE.jsonl (the held-out stdlib "
                                  "windows are for byte-level models: tiny, or a `train-tiny` folder)")
        return None
    test = file_prompt_set(args.prompts, model, args.gen_len, task=args.task, chat=args.chat)
    if args.val_prompts is not None:
        return file_prompt_set(args.val_prompts, model, args.gen_len, task=args.task, chat=args.chat), test
    if len(test) < 2:
        raise MpsimInputError(f"{args.prompts}: {len(test)} prompt; the validation and test halves need >= 2")
    half = len(test) // 2
    return test.subset(0, half, "val"), test.subset(half, len(test), "test")


def _evaluate(args: argparse.Namespace) -> int:
    import dataclasses

    from mpsim.analysis.evaluate.run import EvalConfig, check_config

    cfg = EvalConfig(args.policies, args.schedulers, args.hw, args.ladder, args.prompt_len, args.gen_len,
                     args.val_samples, args.test_samples, args.segments, args.metric, args.slack,
                     args.budget_bits, args.perf_model, args.seed)
    check_config(cfg)  # every option before the model is opened and generations run
    model = _model(args.model)
    prompts = _prompt_sets(args, model)
    if prompts is not None:  # speed is timed at the test prompts' mean length
        val, test = prompts
        mean_len = round(sum(len(p) for p in test.prompts) / len(test))
        cfg = dataclasses.replace(cfg, prompt_len=mean_len, val_samples=len(val), test_samples=len(test))
    run_evaluation(cfg, args.out, args.model, args.speed_model, args.learned, opened=model, prompts=prompts,
                   backend=args.backend)
    return 0


def run_evaluation(cfg: Any, out: str | Path, model: str = "tiny", speed_model: str | None = None,
                   learned: str | None = None, *, prompts: Any = None, opened: Any = None,
                   backend: str = "reference") -> list[Path]:
    """Evaluate `cfg` (an EvalConfig) on `model`, print the table and write it to `out`."""
    from mpsim.analysis.evaluate.report import markdown, write_evaluation
    from mpsim.analysis.evaluate.run import evaluate
    from mpsim.models import get_model

    text_model = opened or _model(model)
    spec = text_model.spec
    speed_spec = spec if speed_model in (None, model) else get_model(str(speed_model))
    folder = Path(learned) if learned else text_model.folder
    target: Any = text_model.params() if text_model.byte_level else text_model
    ev = evaluate(target, cfg, speed_spec, folder, prompts=prompts, backend=backend)
    paths = write_evaluation(ev, out)
    print(markdown(ev))
    print(f"\n{ev.timings['total_s']:.0f} s; wrote " + ", ".join(str(p) for p in paths))
    return list(paths)


def _train(args: argparse.Namespace) -> int:
    from mpsim.engine.prompts import file_prompt_set
    from mpsim.engine.scheduler import Ladder
    from mpsim.schedulers.learned import save_classifier
    from mpsim.schedulers.runs import DecoderPool
    from mpsim.schedulers.train import TrainConfig, make_training_data, train_classifier

    check_counts(args, samples=1, prompt_len=1, gen_len=1, segments=1)
    model = _model(args.model)
    if args.prompts is None and not model.byte_level:
        raise MpsimInputError(f"--model {args.model}: give --prompts FILE.jsonl (training prompts)")
    pset = (None if args.prompts is None
            else file_prompt_set(args.prompts, model, args.gen_len, task=args.task, chat=args.chat))
    queries = 2 if model.byte_level else model.spec.num_kv_heads  # PMPD: one query per KV head
    cfg = TrainConfig(samples=len(pset) if pset else args.samples, prompt_len=args.prompt_len,
                      gen_len=args.gen_len, segments=args.segments, seed=args.seed, queries=queries)
    ladder = Ladder(tuple(args.ladder))
    start = time.perf_counter()
    data = make_training_data(DecoderPool(model, args.backend), ladder, cfg, progress=print, prompts=pset)
    clf, record = train_classifier(data, cfg)
    record |= {"ladder": list(ladder.widths), "model": args.model,
               "prompts": args.prompts or "stdlib training windows"}
    paths = save_classifier(clf, Path(args.out) if args.out else model.folder, record)
    print(f"labels {record['label_counts']}, held-out accuracy {record['accuracy_heldout']} "
          f"(majority class {record['majority_class_heldout']}); {time.perf_counter() - start:.0f} s")
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0

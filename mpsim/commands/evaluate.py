"""Scheduler commands: `mpsim evaluate` (policies and schedulers: quality and simulated speed) and
`mpsim train-scheduler` (the learned scheduler's data and classifier)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from mpsim import limits
from mpsim.commands.common import MODEL_HELP, add_prompt_args
from mpsim.errors import MpsimInputError

TRAIN_SCHEDULER_OUT = "tiny-scheduler"  # train-scheduler of the shipped model without --out


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
    ev.add_argument("--policies", type=_csv, default=("fp16", "ap4", "ap3", "ap4-3", "ap4-4@8-3"),
                    help="comma-separated policies to compare (default fp16,ap4,ap3,ap4-3,ap4-4@8-3)")
    ev.add_argument("--schedulers", type=_csv, default=("static", "learned"),
                    help="any of uniform-high, uniform-low, phase-aware, static, learned, random, "
                         "random-prior, confidence, budget, budget@BITS, oracle")
    ev.add_argument("--hw", type=_csv, default=("h200-sxm", "npu-llm"),
                    help="comma-separated hardware the schedules are timed on (default h200-sxm,npu-llm)")
    ev.add_argument("--ladder", type=_ints, default=None,
                    help="widths the schedulers walk down, e.g. 4,3 (default: highest,lowest ap listed)")
    ev.add_argument("--prompt-len", type=int, default=64,
                    help="prompt bytes of each held-out window (default 64; not with --prompts)")
    ev.add_argument("--gen-len", type=int, default=32, help="new tokens per prompt (default 32)")
    ev.add_argument("--val-samples", type=int, default=24,
                    help="held-out validation windows, which tune the schedulers (default 24)")
    ev.add_argument("--test-samples", type=int, default=24,
                    help="held-out test windows, which the table reports (default 24)")
    ev.add_argument("--segments", type=int, default=3, help="N: candidate switch points {0, L/N, ..., L}")
    ev.add_argument("--metric", choices=("rouge_bytes", "rouge_words"), default="rouge_bytes",
                    help="quality metric against the fp16 generation (default rouge_bytes)")
    ev.add_argument("--slack", type=float, default=0.0, help="quality target = all-high's minus this")
    ev.add_argument("--budget-bits", type=float, default=None, help="budget scheduler's target (default mid)")
    ev.add_argument("--speed-model", default=None,
                    help="model shapes the schedules are timed on (default: the generating model)")
    ev.add_argument("--perf-model", choices=("sim", "roofline"), default="sim", help="times the schedules")
    ev.add_argument("--learned", default=None,
                    help="classifier folder (default: the model's own folder; tiny: the shipped one)")
    ev.add_argument("--seed", type=int, default=0, help="seed of the held-out windows and random schedulers")
    ev.add_argument("--backend", choices=("reference", "triton"), default="reference",
                    help="generations on the numba references (CPU) or mpsim's Triton kernels (GPU)")
    ev.add_argument("--out", required=True, help="folder for the table, plot and choices")
    ev.add_argument("--no-progress", action="store_true", help="no progress bars")
    ev.set_defaults(func=_evaluate)
    _register_train(sub)


def _register_train(sub: Any) -> None:
    tr = sub.add_parser("train-scheduler", help="generate labels and train the learned scheduler")
    tr.add_argument("--model", default="tiny", help=MODEL_HELP)
    tr.add_argument("--prompts", default=None, help="JSONL training prompts (default: stdlib windows, "
                    "byte-level models only); never the evaluation's prompts")
    add_prompt_args(tr)
    tr.add_argument("--ladder", type=_ints, default=(4, 3),
                    help="widths the scheduler walks down, e.g. 4,3 (default 4,3)")
    tr.add_argument("--samples", type=int, default=384,
                    help="training windows (default 384; with --prompts: every prompt of the file)")
    tr.add_argument("--prompt-len", type=int, default=64,
                    help="prompt bytes of each training window (default 64; not with --prompts)")
    tr.add_argument("--gen-len", type=int, default=32, help="new tokens per prompt (default 32)")
    tr.add_argument("--segments", type=int, default=3, help="N: candidate switch points {0, L/N, ..., L}")
    tr.add_argument("--seed", type=int, default=0,
                    help="seed of the training windows, the hold-out split and the training (default 0)")
    tr.add_argument("--backend", choices=("reference", "triton"), default="reference",
                    help="generations on the numba references (CPU) or mpsim's Triton kernels (GPU)")
    tr.add_argument("--out", default=None,
                    help=f"folder (default: the model's folder; for the shipped tiny model "
                         f"./{TRAIN_SCHEDULER_OUT}: the package's mpsim/data/tiny is rewritten only when "
                         "--out names it)")
    tr.set_defaults(func=_train)


def _model(name: str) -> Any:
    from mpsim.tiny.shipped import open_text_model

    return open_text_model(name)


def _prompt_sets(args: argparse.Namespace, model: Any) -> tuple[Any, Any] | None:
    """(validation, test) from --prompts [--val-prompts]; None: the stdlib windows (byte-level models)."""
    from mpsim.engine.prompts import file_prompt_set

    if args.prompts is None:
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


def _check_prompt_files(args: argparse.Namespace) -> None:
    if args.val_prompts is not None and args.prompts is None:
        raise MpsimInputError("--val-prompts needs --prompts (the test prompts)")
    for option, path in (("--prompts", args.prompts), ("--val-prompts", args.val_prompts)):
        if path is not None and not Path(path).is_file():
            raise MpsimInputError(f"{option} {path}: no such file (expected a JSONL prompt file)")


def _evaluate(args: argparse.Namespace) -> int:
    import dataclasses

    from mpsim.analysis.evaluate.config import EvalConfig, check_config
    from mpsim.analysis.evaluate.report import OUTPUT_FILES
    from mpsim.models import get_model
    from mpsim.traces.atomic_folder import check_folder

    check_folder(args.out, OUTPUT_FILES)
    cfg = EvalConfig(args.policies, args.schedulers, args.hw, args.ladder, args.prompt_len, args.gen_len,
                     args.val_samples, args.test_samples, args.segments, args.metric, args.slack,
                     args.budget_bits, args.perf_model, args.seed)
    check_config(cfg)  # every argument before the model opens and the generations run
    if args.speed_model not in (None, args.model):
        get_model(args.speed_model)
    _check_prompt_files(args)
    model = _model(args.model)
    prompts = _prompt_sets(args, model)
    if prompts is not None:  # speed is timed at the test prompts' mean length
        val, test = prompts
        mean_len = round(sum(len(p) for p in test.prompts) / len(test))
        cfg = dataclasses.replace(cfg, prompt_len=mean_len, val_samples=len(val), test_samples=len(test))
    run_evaluation(cfg, args.out, args.model, args.speed_model, args.learned, opened=model, prompts=prompts,
                   backend=args.backend, bar=not args.no_progress)
    return 0


def run_evaluation(cfg: Any, out: str | Path, model: str = "tiny", speed_model: str | None = None,
                   learned: str | None = None, *, prompts: Any = None, opened: Any = None,
                   backend: str = "reference", bar: bool = False) -> list[Path]:
    """Evaluate `cfg` (an EvalConfig) on `model`, print the table and write it to `out` (`bar`:
    progress bars on stderr, the per-entry lines printed above them)."""
    from tqdm import tqdm

    from mpsim.analysis.evaluate.report import markdown, write_evaluation
    from mpsim.analysis.evaluate.run import evaluate
    from mpsim.models import get_model

    text_model = opened or _model(model)
    spec = text_model.spec
    speed_spec = spec if speed_model in (None, model) else get_model(str(speed_model))
    folder = Path(learned) if learned else text_model.folder
    target: Any = text_model.params() if text_model.byte_level else text_model
    ev = evaluate(target, cfg, speed_spec, folder, progress=tqdm.write if bar else print, prompts=prompts,
                  backend=backend, bar=bar)
    paths = write_evaluation(ev, out)
    print(markdown(ev))
    print(f"\n{ev.timings['total_s']:.0f} s; wrote " + ", ".join(str(p) for p in paths))
    return list(paths)


def _train_ladder(args: argparse.Namespace) -> Any:
    """train-scheduler's arguments, checked before the model opens; the ladder."""
    from mpsim.analysis.evaluate.config import EvalConfig, ladder_of

    for option, value in (("--samples", args.samples), ("--prompt-len", args.prompt_len),
                          ("--gen-len", args.gen_len)):
        if value < 1:
            raise MpsimInputError(f"{option}: expected an integer >= 1, got {value}")
        limits.SHAPE_DIM.check(value, option)  # --segments is at most --gen-len
    if not 1 <= args.segments <= args.gen_len:
        raise MpsimInputError(f"--segments: expected 1..{args.gen_len} (--gen-len), got {args.segments}")
    return ladder_of(EvalConfig(ladder=tuple(args.ladder)))


def _train(args: argparse.Namespace) -> int:
    from mpsim.engine.prompts import file_prompt_set
    from mpsim.schedulers.learned import save_classifier
    from mpsim.schedulers.runs import DecoderPool
    from mpsim.schedulers.train import TrainConfig, make_training_data, train_classifier
    from mpsim.tiny.shipped import inside_package

    ladder = _train_ladder(args)
    model = _model(args.model)
    out = Path(args.out) if args.out else model.folder
    if args.out is None and inside_package(out):  # the shipped model: never the package by default
        out = Path(TRAIN_SCHEDULER_OUT)
    if args.prompts is None and not model.byte_level:
        raise MpsimInputError(f"--model {args.model}: give --prompts FILE.jsonl (training prompts)")
    pset = (None if args.prompts is None
            else file_prompt_set(args.prompts, model, args.gen_len, task=args.task, chat=args.chat))
    queries = 2 if model.byte_level else model.spec.num_kv_heads  # PMPD: one query per KV head
    cfg = TrainConfig(samples=len(pset) if pset else args.samples, prompt_len=args.prompt_len,
                      gen_len=args.gen_len, segments=args.segments, seed=args.seed, queries=queries)
    start = time.perf_counter()
    data = make_training_data(DecoderPool(model, args.backend), ladder, cfg, progress=print, prompts=pset)
    clf, record = train_classifier(data, cfg)
    record |= {"ladder": list(ladder.widths), "model": args.model,
               "prompts": args.prompts or "stdlib training windows"}
    paths = save_classifier(clf, out, record)
    print(f"labels {record['label_counts']}, held-out accuracy {record['accuracy_heldout']} "
          f"(majority class {record['majority_class_heldout']}); {time.perf_counter() - start:.0f} s")
    print("wrote " + ", ".join(str(p) for p in paths))
    if out != model.folder:
        print(f"(`mpsim evaluate --model {args.model} --learned {out}` uses it)")
    return 0

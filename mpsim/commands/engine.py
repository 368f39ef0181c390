"""Engine commands: `mpsim capture`, `mpsim generate`, `mpsim quality`, `mpsim train-tiny`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mpsim.commands.common import (
    MODEL_HELP,
    add_generation_args,
    add_prompt_args,
    check_counts,
    check_outputs,
    check_trace_out,
)
from mpsim.errors import MpsimInputError
from mpsim.policy import parse_policy
from mpsim.workload import Workload

TRAIN_TINY_OUT = "tiny-model"  # `mpsim train-tiny` without --out: a folder in the working directory


def register(sub: Any) -> None:
    cap = sub.add_parser("capture", help="run the engine on mpsim's kernels and record every launch")
    add_generation_args(cap)
    src = cap.add_mutually_exclusive_group()
    src.add_argument("--weights", help="HF-style folder: config.json + *.safetensors "
                     "(default for --model tiny: the shipped weights)")
    src.add_argument("--dummy", action="store_true", help="random weights at the real shapes (timing)")
    cap.add_argument("--out", required=True, help="trace file to write (Parquet)")
    cap.add_argument("--profile", help="also write a torch.profiler (Kineto) JSON with mpsim ranges "
                     "(gzip-compressed when the name ends in .gz)")
    cap.add_argument("--decode", choices=("auto", "graphs", "eager"), default="auto",
                     help="decode steps as CUDA-graph replays (auto: on a CUDA device) or launched eagerly")
    add_tp_arg(cap)
    cap.set_defaults(func=_capture)

    gen = sub.add_parser("generate", help="greedy continuation of a prompt (tiny, or a model folder)")
    gen.add_argument("--model", default="tiny", help=MODEL_HELP)
    gen.add_argument("--policy", default=None, help="default: fp16, or a quantized folder's own format")
    src = gen.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt", help="the prompt text")
    src.add_argument("--prompts", help="JSONL file, one {\"prompt\": ..., \"reference\": ...} per line")
    add_prompt_args(gen)
    gen.add_argument("--gen-len", type=int, default=64, help="new tokens per prompt (default 64)")
    gen.add_argument("--backend", choices=("reference", "triton"), default="reference",
                     help="generations on the numba references (CPU) or mpsim's Triton kernels (GPU)")
    add_tp_arg(gen)
    gen.set_defaults(func=_generate)

    q = sub.add_parser("quality", help="quality of a policy against fp16 (held-out text, or --prompts)")
    q.add_argument("--model", default="tiny", help=MODEL_HELP)
    q.add_argument("--policy", required=True, help="one policy or a comma-separated list")
    q.add_argument("--prompts", default=None, help="JSONL prompt file (default: held-out stdlib windows, "
                   "byte-level models only)")
    add_prompt_args(q)
    q.add_argument("--samples", type=int, default=16,
                   help="held-out windows to score (default 16; not with --prompts)")
    q.add_argument("--prompt-len", type=int, default=64,
                   help="prompt bytes of each held-out window (default 64; not with --prompts)")
    q.add_argument("--gen-len", type=int, default=32, help="new tokens per prompt (default 32)")
    q.add_argument("--backend", choices=("reference", "triton"), default="reference",
                   help="generations on the numba references (CPU) or mpsim's Triton kernels (GPU)")
    q.set_defaults(func=_quality)

    t = sub.add_parser("train-tiny", help="train the tiny byte-level Llama on the stdlib sources")
    t.add_argument("--out", default=None,
                   help=f"output folder (default ./{TRAIN_TINY_OUT}; the shipped model's folder, "
                        "mpsim/data/tiny, is rewritten only when --out names it)")
    t.add_argument("--config", default=None, help="JSON file of training settings (TinyConfig fields; a "
                   "run's written train_config.json repeats it; default: the shipped tiny model's)")
    t.add_argument("--steps", type=int, default=None, help="override the number of training steps")
    t.add_argument("--max-minutes", type=float, default=None,
                   help="stop after this much training wall time (the step reached is written as stop_at)")
    t.set_defaults(func=_train_tiny)


def add_tp_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tp", type=int, default=1, metavar="N",
                   help="run tensor-parallel on N ranks, one process each (torch.distributed: gloo over "
                        "loopback on CPUs, NCCL on GPUs; docs/parallelism.md); default 1")


def _capture(args: argparse.Namespace) -> int:
    from mpsim.engine.capture import capture
    from mpsim.engine.quantized import is_quantized
    from mpsim.tiny.shipped import open_text_model, resolve_model
    from mpsim.traces.io import write_trace

    check_trace_out(args.out)
    model = None
    if not args.dummy and args.weights is None and is_quantized(args.model):
        model = open_text_model(args.model)  # a quantized folder: read its stored weights
        spec, weights = model.spec, None
    else:
        spec, weights = (resolve_model(args.model, None)[0], None) if args.dummy \
            else resolve_model(args.model, args.weights)
        if weights is None and not args.dummy:
            raise MpsimInputError(f"capture --model {args.model}: give --weights DIR or --dummy")
    policy = parse_policy(args.policy)
    if model is not None:
        model.check_policy(policy)
    check_outputs(args.out, args.profile)
    if args.tp != 1:
        return _capture_tp(args, spec, policy, weights, model)
    trace = capture(spec, policy, Workload(args.prompt_len, args.gen_len, args.batch),
                    weights=weights, profile=args.profile, decode=args.decode, model=model)
    path = write_trace(trace, args.out)
    env = trace.meta.environment
    total_ms = trace.rows["measured_us"].sum() / 1e3
    print(f"wrote {path}: {len(trace.rows)} launches, {total_ms:.1f} ms measured "
          f"({env['timer']}, {env['device']}); decode {env['decode']}, protocol {env['protocol']}, "
          f"{env['tokens_per_s']:.1f} tokens/s over the whole generation")
    return 0


def _capture_tp(args: argparse.Namespace, spec: Any, policy: Any, weights: Any, model: Any) -> int:
    from mpsim.engine.capture_tp import capture_tp
    from mpsim.traces.io import write_trace

    if model is not None:
        raise MpsimInputError(f"capture --tp {args.tp} --model {args.model}: a quantized folder's stored "
                              "weights are not split across ranks; give the fp16 folder (quantized at load)")
    if args.profile is not None or args.decode == "graphs":
        raise MpsimInputError(f"capture --tp {args.tp}: ranks decode eagerly without a profiler; drop "
                              "--profile / --decode graphs")
    trace, _ = capture_tp(spec, policy, Workload(args.prompt_len, args.gen_len, args.batch), args.tp,
                          weights=weights)
    path = write_trace(trace, args.out)
    env = trace.meta.environment
    print(f"wrote {path}: {len(trace.rows)} launches of rank 0 of {args.tp} "
          f"({env['parallel']['comm_backend']}), {trace.rows['measured_us'].sum() / 1e3:.1f} ms measured "
          f"({env['timer']}, {env['device']}); {env['tokens_per_s']:.1f} tokens/s over the whole generation")
    return 0


def _generate(args: argparse.Namespace) -> int:
    from mpsim.engine.backends import make_backend
    from mpsim.engine.checkpoint import check_context
    from mpsim.engine.generate import generate
    from mpsim.engine.prompts import PromptRecord, encode_prompt, read_prompts, render_prompt
    from mpsim.engine.scheduler import FixedScheduler
    from mpsim.tiny.shipped import open_text_model

    check_counts(args, gen_len=1)
    if args.prompt == "":
        raise MpsimInputError("--prompt '': expected some text to continue")
    model = open_text_model(args.model)
    policy = parse_policy(args.policy or model.default_policy)
    records = ([PromptRecord(args.prompt, None, {}, "--prompt")] if args.prompts is None
               else read_prompts(args.prompts))
    texts, prompts = [], []
    for r in records:
        text, rendered = render_prompt(r, args.task, args.chat, model)
        ids = encode_prompt(model, text, rendered)
        check_context(model, len(ids), args.gen_len, r.where)
        texts.append(text)
        prompts.append(ids)
    if args.tp != 1:
        from mpsim.engine.capture_tp import generate_tp

        model.params()  # the fp16 checkpoint the ranks split (one clear error if it is not there)
        assert model.fp16_folder is not None
        tokens = generate_tp(model.spec, policy, prompts, args.gen_len, args.tp, weights=model.fp16_folder,
                             backend=args.backend, eos=tuple(model.tokenizer.eos_ids))
    else:
        decoder = model.decoder(policy, make_backend(args.backend))
        tokens = generate(decoder, prompts, args.gen_len, FixedScheduler(policy),
                          eos=model.tokenizer.eos_ids).tokens
    for i, (text, ids, new) in enumerate(zip(texts, prompts, tokens, strict=True)):
        if i:
            print("\n---")
        print(text + continuation_text(model.tokenizer, ids, new))
    return 0


def continuation_text(tok: Any, prompt: list[int], new: list[int]) -> str:
    """The new tokens' text as it continues the prompt (decoded together, so a leading space or a
    character split across tokens comes out right); a final EOS is not printed."""
    new = new[:-1] if new and new[-1] in tok.eos_ids else new
    before, after = tok.decode(prompt), tok.decode(prompt + new)
    return after[len(before):] if after.startswith(before) else tok.decode(new)


def _quality(args: argparse.Namespace) -> int:
    from mpsim.tiny.shipped import open_text_model

    check_counts(args, samples=1, prompt_len=1, gen_len=1)
    for text in args.policy.split(","):
        parse_policy(text.strip())
    model = open_text_model(args.model)
    if args.prompts is not None:
        return _quality_prompts(args, model)
    if not model.byte_level:
        raise MpsimInputError(f"--model {args.model}: give --prompts FILE.jsonl (the held-out stdlib "
                              "windows are for byte-level models: tiny, or a `train-tiny` folder)")
    from mpsim.quality.heldout import fp16_baseline, heldout_windows, measure_quality

    params = model.params()
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


def _quality_prompts(args: argparse.Namespace, model: Any) -> int:
    """Quality on a prompt file: Rouge-L vs fp16's continuation (tokens, words) and vs references."""
    import numpy as np

    from mpsim.engine.prompts import file_prompt_set
    from mpsim.schedulers.runs import DecoderPool, Runner

    pset = file_prompt_set(args.prompts, model, args.gen_len, task=args.task, chat=args.chat)
    runner = Runner(DecoderPool(model, args.backend), pset, args.gen_len, forced=True)
    refs = pset.references is not None
    print(f"{len(pset)} prompts from {args.prompts}; Rouge-L against fp16's continuation"
          + (" and against the references" if refs else "") + "; bits/tok and agree are teacher-forced "
          "on fp16's continuation")
    print(f"{'policy':<18}{'bits/tok':>9}{'agree':>8}{'rougeL-w':>10}{'rougeL-t':>10}"
          + (f"{'ref-w':>8}{'ref-t':>8}" if refs else "") + f"{'avg bits (PMPD)':>17}{'avg bits (mean)':>17}")
    for text in args.policy.split(","):
        r = runner.fixed(text.strip())
        line = (f"{text.strip():<18}{r.bits_per_byte:>9.3f}{r.agreement:>8.3f}{np.mean(r.rouge_words):>10.3f}"
                f"{np.mean(r.rouge_bytes):>10.3f}")
        if refs and r.ref_rouge_words is not None and r.ref_rouge_tokens is not None:
            line += f"{np.nanmean(r.ref_rouge_words):>8.3f}{np.nanmean(r.ref_rouge_tokens):>8.3f}"
        print(line + f"{r.avg_bits_pmpd:>17.2f}{r.avg_bits_mean:>17.2f}")
    return 0


def _train_tiny(args: argparse.Namespace) -> int:
    import dataclasses

    from mpsim.tiny.train import TinyConfig, train_tiny

    cfg = TinyConfig.from_json(args.config) if args.config else TinyConfig()
    if args.steps is not None:
        cfg = dataclasses.replace(cfg, steps=args.steps)
    if args.max_minutes is not None:
        cfg = dataclasses.replace(cfg, max_minutes=args.max_minutes)
    folder = Path(args.out or TRAIN_TINY_OUT)  # never the package by default
    print(f"training {cfg.name}: {cfg.params() / 1e6:.2f} M parameters, {cfg.steps} steps of "
          f"{cfg.batch} x {cfg.seq_len} bytes, {cfg.threads} thread(s) -> {folder}", flush=True)
    out = train_tiny(folder, cfg)
    print(f"wrote {out}/config.json, model.safetensors, train_config.json, train_log.csv, loss.png")
    return 0

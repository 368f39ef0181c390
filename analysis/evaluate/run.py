"""`mpsim evaluate`: policies and precision schedulers, quality against fp16 and simulated speed.

Quality runs on the generating model (the byte-level tiny model, or a model folder; reference
backend): held-out prompts (the stdlib windows, or a prompt file) split into a validation half
(searches, calibration) and a test half (every number in the table). Schedulers that need a
trained classifier (learned, random-prior) are skipped, with a note, when there is none. Speed replays
each test generation's own precision schedule on each hardware model (analysis/evaluate/speed.py),
optionally on a larger model's shapes (`speed_model`): the precision schedule is the tiny model's,
the time is what that schedule costs on the bigger model.

Table columns (one row per entry and hardware): label, kind, detail, avg_bits_pmpd (PMPD's count:
decode passes 2..n per sample, then the mean over samples), avg_bits_mean (plain mean over every
decode pass), prefill_bits, rouge_l_bytes / rouge_l_words (greedy continuation vs fp16's, over
tokens (bytes for the tiny model) / words), rouge_l_ref_words / rouge_l_ref_tokens (vs the prompt
file's references; NaN without),
agreement (teacher-forced next-token agreement with fp16), bits_per_byte (of the true text),
kept_vs_high (share of prompts whose Rouge-L is >= uniform high's), mean_switch_step, hw,
perf_model, speed_model, ttft_ms, tpot_ms, tokens_per_s, speedup_vs_fp16, speedup_vs_high.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mpsim.analysis.evaluate.config import EvalConfig, check_config
from mpsim.analysis.evaluate.schedulers import (
    Context,
    Entry,
    build_entry,
    fixed_entry,
)
from mpsim.analysis.evaluate.speed import SpeedModel
from mpsim.analysis.evaluate.switch import switch_table
from mpsim.engine.checkpoint import TextModel
from mpsim.engine.prompts import PromptSet
from mpsim.engine.weights import ModelParams
from mpsim.hw_models.loader import load_hardware
from mpsim.models import ModelSpec
from mpsim.progress import progress_bar
from mpsim.schedulers.runs import DecoderPool, Runner, prompt_set
from mpsim.schedulers.static import QualityTarget
from mpsim.workload import Workload


@dataclass
class Evaluation:
    table: pd.DataFrame
    switch_table: pd.DataFrame
    choices: dict[str, Any]
    timings: dict[str, float] = field(default_factory=dict)


NEEDS_CLASSIFIER = ("learned", "random-prior")


def evaluate(model: ModelParams | TextModel, cfg: EvalConfig, speed_spec: ModelSpec, learned_dir: Path | None,
             progress: Callable[[str], None] = print,
             prompts: tuple[PromptSet, PromptSet] | None = None, backend: str = "reference",
             bar: bool = False) -> Evaluation:
    """`prompts`: (validation, test) prompt sets; default: the held-out stdlib windows (tiny model).
    `backend`: reference (numba, CPU) or triton (mpsim's kernels: a GPU, or the CPU interpreter).
    `bar`: tqdm progress bars on stderr (entries generated, runs simulated), as sweeps have."""
    start = time.perf_counter()
    ladder = check_config(cfg)
    pool = DecoderPool(model, backend)
    if prompts is None:
        prompts = (prompt_set("val", cfg.val_samples, cfg.prompt_len, cfg.gen_len, cfg.seed),
                   prompt_set("test", cfg.test_samples, cfg.prompt_len, cfg.gen_len, cfg.seed))
    val_set, test_set = prompts
    val = Runner(pool, val_set, cfg.gen_len)
    test = Runner(pool, test_set, cfg.gen_len, forced=True)
    ctx = Context(ladder, val, test, QualityTarget(cfg.metric, cfg.slack), cfg.segments, cfg.budget_bits,
                  learned_dir, cfg.seed)
    cfg = _without_classifier(cfg, learned_dir, ctx, progress)
    entries = _entries(ctx, cfg, progress, bar)
    quality_s = time.perf_counter() - start
    progress(f"quality: {len(entries)} entries in {quality_s:.0f} s; simulating")
    speed = SpeedModel(speed_spec, Workload(cfg.prompt_len, cfg.gen_len, 1), cfg.perf_model)
    table = _table(entries, ctx, cfg, speed, speed_spec.name, bar)
    choices = ctx.choices | {"ladder": list(ladder.widths), "config": asdict(cfg)}
    timings = {"quality_s": quality_s, "total_s": time.perf_counter() - start}
    return Evaluation(table, switch_table(entries, ctx), choices, timings)


def _without_classifier(cfg: EvalConfig, learned_dir: Path | None, ctx: Context,
                        progress: Callable[[str], None]) -> EvalConfig:
    """Drop the schedulers that need a trained classifier when there is none, and say so."""
    from mpsim.schedulers.learned import CONFIG_FILE

    if learned_dir is not None and (learned_dir / CONFIG_FILE).exists():
        return cfg
    skipped = [s for s in cfg.schedulers if s in NEEDS_CLASSIFIER]
    if skipped:
        where = "no classifier folder" if learned_dir is None else f"no {learned_dir / CONFIG_FILE}"
        note = (f"skipped {', '.join(skipped)}: {where} (train one with `mpsim train-scheduler --model DIR "
                "--prompts FILE`)")
        progress(note)
        ctx.choices["skipped"] = {"schedulers": skipped, "reason": note}
    return replace(cfg, schedulers=tuple(s for s in cfg.schedulers if s not in NEEDS_CLASSIFIER))


def _entries(ctx: Context, cfg: EvalConfig, progress: Callable[[str], None], bar: bool) -> list[Entry]:
    out: list[Entry] = []
    seen: set[str] = set()
    policies, schedulers = dict.fromkeys(("fp16", *cfg.policies)), dict.fromkeys(cfg.schedulers)
    with progress_bar(len(policies) + len(schedulers), "evaluate: quality", "entry", bar) as pbar:
        for p in policies:
            out.append(fixed_entry(ctx, p))
            seen.add(p)
            pbar.update(1)
            progress(f"  {p}")
        for name in schedulers:
            e = build_entry(ctx, name)
            pbar.update(1)
            if e.kind == "policy" and e.label in seen:
                continue
            out.append(e)
            progress(f"  {name}: {e.detail}")
    return out


def _quality_columns(e: Entry, high_rouge: np.ndarray, high: int) -> dict[str, Any]:
    s = e.score
    switch = [sum(1 for b in log if b == high) if s.prefill_bits == high else np.nan for log in s.bits]
    return {
        "label": e.label, "kind": e.kind, "detail": e.detail,
        "avg_bits_pmpd": s.avg_bits_pmpd, "avg_bits_mean": s.avg_bits_mean, "prefill_bits": s.prefill_bits,
        "rouge_l_bytes": float(np.mean(s.rouge_bytes)), "rouge_l_words": float(np.mean(s.rouge_words)),
        "rouge_l_ref_words": _nanmean(s.ref_rouge_words), "rouge_l_ref_tokens": _nanmean(s.ref_rouge_tokens),
        "agreement": s.agreement, "bits_per_byte": s.bits_per_byte,
        "kept_vs_high": float(np.mean(s.rouge_bytes >= high_rouge)),
        "mean_switch_step": float(np.mean(switch)),
    }


def _nanmean(x: np.ndarray | None) -> float:
    return float("nan") if x is None or np.isnan(x).all() else float(np.nanmean(x))


def _table(entries: list[Entry], ctx: Context, cfg: EvalConfig, speed: SpeedModel,
           speed_name: str, bar: bool) -> pd.DataFrame:
    high_rouge = ctx.test.fixed(f"ap{ctx.ladder.high}").rouge_bytes
    rows = []
    with progress_bar(len(cfg.hw) * len(entries), "evaluate: speed", "entry", bar) as pbar:
        for hw_name in cfg.hw:
            hw = load_hardware(hw_name)
            base = {sp: speed.speed([sp], hw).tokens_per_s for sp in ("fp16", f"ap{ctx.ladder.high}")}
            for e in entries:
                sp = speed.speed(e.spellings, hw)
                rows.append(_quality_columns(e, high_rouge, ctx.ladder.high) | {
                    "hw": hw.name, "perf_model": speed.perf_model, "speed_model": speed_name,
                    "ttft_ms": sp.ttft_s * 1e3, "tpot_ms": sp.tpot_s * 1e3, "tokens_per_s": sp.tokens_per_s,
                    "speedup_vs_fp16": sp.tokens_per_s / base["fp16"],
                    "speedup_vs_high": sp.tokens_per_s / base[f"ap{ctx.ladder.high}"],
                })
                pbar.update(1)
    return pd.DataFrame(rows)

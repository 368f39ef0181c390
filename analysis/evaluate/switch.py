"""The learned scheduler against random ones, on the test prompts: which switch point each picked.

Every candidate switch point S of the test prompts is run as a fixed policy, which gives a quality
matrix Q (prompts x points) and the test labels (the earliest S keeping all-high's quality). For each
scheduler whose switch points lie on the candidates: how often it picked the label, and what it
kept. Random schedulers are also scored in expectation over their draws (exactly, from Q: no
sampling noise), so a learned scheduler is held against what chance gives at the same prior.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from mpsim.analysis.evaluate.schedulers import Context, Entry, quality_by_switch_point
from mpsim.policy import mean_decode_bits, pmpd_average_bits
from mpsim.schedulers.train import labels_from_quality


def switch_table(entries: list[Entry], ctx: Context) -> pd.DataFrame:
    chosen = [e for e in entries if e.label in ctx.switches]
    if not chosen:
        return pd.DataFrame()
    quality = quality_by_switch_point(ctx)
    labels = labels_from_quality(quality)
    rows = [_scheduler_row(e, ctx, quality, labels) for e in chosen]
    for e in chosen:
        prior = _random_prior(e.label, ctx)
        if prior is not None:
            rows.append(_expected_row(f"{e.label} (expected)", prior, ctx, quality, labels))
    rows.append(_expected_row("(test labels)", None, ctx, quality, labels))
    for c, p in enumerate(ctx.points):  # the trade-off curve every two-rung scheduler lives on
        rows.append(_expected_row(f"fixed S={p}", np.eye(len(ctx.points))[c], ctx, quality, labels))
    return pd.DataFrame(rows)


def _classes(steps: Sequence[int], ctx: Context) -> list[int | None]:
    points, last = ctx.points, ctx.test.gen_len - 1
    return [points.index(s) if s in points else None for s in (s if s < last else points[-1] for s in steps)]


def _scheduler_row(e: Entry, ctx: Context, quality: np.ndarray, labels: np.ndarray) -> dict[str, object]:
    classes = _classes(ctx.switches[e.label], ctx)
    on_grid = all(c is not None for c in classes)
    keep = quality[:, -1]
    score = e.score.rouge_bytes if ctx.target.metric == "rouge_bytes" else e.score.rouge_words
    return {
        "scheduler": e.label, "mean_switch_step": float(np.mean(ctx.switches[e.label])),
        "histogram": _histogram(classes, ctx.points) if on_grid else "off-grid (per-step decisions)",
        "label_accuracy": float(np.mean([c == y for c, y in zip(classes, labels, strict=True)]))
        if on_grid else np.nan,
        "rouge_l": float(np.mean(score)), "kept_vs_high": float(np.mean(score >= keep)),
        "avg_bits_pmpd": e.score.avg_bits_pmpd, "avg_bits_mean": e.score.avg_bits_mean,
    }


def _random_prior(label: str, ctx: Context) -> np.ndarray | None:
    n = len(ctx.points)
    if label == "random":
        return np.full(n, 1.0 / n)
    if label == "random-prior":
        return np.asarray(ctx.learned()[1]["class_prior"], dtype=float)
    return None


def _expected_row(name: str, prior: np.ndarray | None, ctx: Context, quality: np.ndarray,
                  labels: np.ndarray) -> dict[str, object]:
    """A scheduler drawing class c with probability prior[c] (None: the labels themselves)."""
    n_prompts, n = quality.shape
    probs = np.eye(n)[labels] if prior is None else np.tile(prior, (n_prompts, 1))  # (prompts, classes)
    bits = [_class_bits(c, ctx) for c in range(n)]
    kept = (quality >= quality[:, -1:]).astype(float)
    return {
        "scheduler": name,
        "mean_switch_step": float((probs @ np.minimum(ctx.points, ctx.test.gen_len - 1)).mean()),
        "histogram": " ".join(f"S={p}:{v:.2f}" for p, v in zip(ctx.points, probs.sum(0), strict=True)),
        "label_accuracy": float(probs[np.arange(n_prompts), labels].mean()),
        "rouge_l": float((probs * quality).sum(1).mean()),
        "kept_vs_high": float((probs * kept).sum(1).mean()),
        "avg_bits_pmpd": float((probs @ [b[0] for b in bits]).mean()),
        "avg_bits_mean": float((probs @ [b[1] for b in bits]).mean()),
    }


def _class_bits(cls: int, ctx: Context) -> tuple[float, float]:
    steps = ctx.test.gen_len - 1
    high = min(ctx.points[cls], steps)
    log = [ctx.ladder.high] * high + [ctx.ladder.low] * (steps - high)
    return pmpd_average_bits([log]), mean_decode_bits([log])


def _histogram(classes: Sequence[int | None], points: Sequence[int]) -> str:
    counts = [sum(1 for c in classes if c == i) for i in range(len(points))]
    return " ".join(f"S={p}:{n}" for p, n in zip(points, counts, strict=True))

"""Per-run figures from per-launch times: TTFT, time per output token, tokens/s, time by op class.

Shared by the roofline baseline, the simulators and validation, so every model reports the same way.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class RunSummary:
    ttft_s: float             # the prefill pass (it yields the first token)
    tpot_mean_s: float        # time per output token over decode passes
    tpot_p50_s: float
    tpot_p99_s: float
    total_s: float
    tokens_per_s: float       # generated tokens of all sequences / total time
    decode_tokens_per_s: float
    time_by_op_s: dict[str, float]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize(rows: pd.DataFrame, launch_s: np.ndarray, batch: int, gen_len: int) -> RunSummary:
    """Aggregate per-launch seconds (aligned with `rows`) into run-level figures."""
    t = pd.Series(np.asarray(launch_s, dtype=float), index=rows.index)
    prefill = rows["phase"] == "prefill"
    per_step = t[~prefill].groupby(rows.loc[~prefill, "step"].astype(int)).sum()
    ttft = float(t[prefill].sum())
    total = float(t.sum())
    steps = per_step.to_numpy()
    tpot = (float(steps.mean()), float(np.percentile(steps, 50)), float(np.percentile(steps, 99))) \
        if len(steps) else (float("nan"),) * 3
    # grouped by the op column as it is (categorical in a trace: no string per launch is made)
    by_op = {str(k): float(v) for k, v in t.groupby(rows["op"], observed=True).sum().items()}
    decode_total = float(steps.sum()) if len(steps) else 0.0
    return RunSummary(
        ttft_s=ttft, tpot_mean_s=tpot[0], tpot_p50_s=tpot[1], tpot_p99_s=tpot[2], total_s=total,
        tokens_per_s=batch * gen_len / total if total > 0 else float("nan"),
        decode_tokens_per_s=batch * len(steps) / decode_total if decode_total > 0 else float("nan"),
        time_by_op_s=by_op,
    )


def format_summary(s: RunSummary, title: str) -> str:
    lines = [
        title,
        f"  TTFT                 {s.ttft_s * 1e3:10.3f} ms",
        f"  time per out token   {s.tpot_mean_s * 1e3:10.3f} ms mean, "
        f"{s.tpot_p50_s * 1e3:.3f} p50, {s.tpot_p99_s * 1e3:.3f} p99",
        f"  tokens/s             {s.tokens_per_s:10.1f} (decode only {s.decode_tokens_per_s:.1f})",
        f"  total                {s.total_s * 1e3:10.3f} ms",
        "  time by op class:",
    ]
    for op, sec in sorted(s.time_by_op_s.items(), key=lambda kv: -kv[1]):
        share = sec / s.total_s if s.total_s > 0 else 0.0
        lines.append(f"    {op:<10} {sec * 1e3:10.3f} ms  {share:6.1%}")
    return "\n".join(lines)

"""Export of measured or simulated launch timelines as Chrome trace-event JSON (opens in Perfetto)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from mpsim.traces.cells import plain
from mpsim.traces.errors import TraceError

ARG_COLUMNS = ("op", "phase", "step", "layer", "module", "m", "n", "k", "w_format", "w_bits",
               "kv_len", "k_bits", "bytes_read", "bytes_written", "flops")


def chrome_events(rows: pd.DataFrame, start_us: Sequence[float], dur_us: Sequence[float],
                  process: str, extra_args: pd.DataFrame | None = None) -> dict[str, object]:
    """Complete ('X') events, one per launch, on one track per stream; the pipeline stages of a
    parallel plan (column `stage`) are separate processes (`<process> stage s`), one per device."""
    if len(start_us) != len(rows) or len(dur_us) != len(rows):
        raise TraceError(
            f"timeline has {len(rows)} launches but {len(start_us)} starts and {len(dur_us)} durations"
        )
    stages = (sorted({int(s) for s in rows["stage"].dropna().unique()})
              if "stage" in rows.columns else [0]) or [0]
    events: list[dict[str, object]] = [
        {"ph": "M", "pid": s, "name": "process_name",
         "args": {"name": process if len(stages) == 1 else f"{process} stage {s}"}} for s in stages
    ]
    staged = len(stages) > 1
    for i, row in enumerate(rows.itertuples(index=False)):
        args = {c: plain(getattr(row, c)) for c in ARG_COLUMNS}
        if extra_args is not None:
            args.update({c: plain(v) for c, v in extra_args.iloc[i].items()})
        name = f"{row.module or row.kernel}" + (f" L{row.layer}" if row.layer >= 0 else "")
        if staged:
            args["micro_batch"] = plain(getattr(row, "micro_batch", 0))
        events.append({"ph": "X", "pid": int(row.stage) if staged else 0, "tid": int(row.stream),
                       "name": name,
                       "cat": str(row.op), "ts": float(start_us[i]), "dur": float(dur_us[i]),
                       "args": args})
    return {"traceEvents": events, "displayTimeUnit": "ns"}



"""A trace's rows rebuilt as another engine's kernels (`mpsim simulate --reprice --engine NAME`).

Only on request: the simulator prices each row as the kernel the row names, so a captured or
synthesized trace is never priced as another stack's kernels unless it is rebuilt here first. Each
row keeps its identity and shape (op, phase, step, layer, module, sizes, formats) and takes the
kernel, grid, config and analytic FLOPs/bytes of the kernel the engine's file names for its op,
format and M on the target architecture. Measured times described the old kernels: a rebuilt
row's `measured_us` and `device` are cleared. Identical shapes are rebuilt once.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from mpsim.engines import (
    DEFAULT_ARCH,
    DEFAULT_ENGINE,
    EngineChoice,
    engine_target,
    get_engine,
    model_heads,
)
from mpsim.engines.rows import Target, as_engine
from mpsim.errors import MpsimInputError
from mpsim.kernels import launch_config as lc
from mpsim.launch_plan import costed
from mpsim.policy import parse_policy

if TYPE_CHECKING:
    from mpsim.traces.trace import Trace

IDENTITY = ("launch_id", "stream", "phase", "step", "layer", "module")
MEASURED = ("measured_us", "device")


def reprice(trace: Trace, choice: EngineChoice) -> Trace:
    """`trace` with every row rebuilt as `choice`'s engine kernels; the metadata names the engine
    (and, in its environment, the engine the rows were before and the architecture)."""
    from mpsim.traces.trace import Trace, rows_to_frame

    heads = model_heads(trace.meta.model)
    policy = trace.meta.policy
    if not policy:
        raise MpsimInputError("--reprice: the trace names no policy (its metadata), so whether "
                              f"engine {choice.name!r} can run it is unknown")
    target = engine_target(choice.name, parse_policy(policy), heads, arch=choice.arch, sms=choice.sms)
    if target is None:  # the default engine: mpsim's own launchers rebuild the rows
        target = Target(get_engine(DEFAULT_ENGINE), choice.arch or DEFAULT_ARCH, heads,
                        choice.sms or lc.GPU_SMS)
    columns = [c for c in trace.rows.columns if c not in MEASURED]
    built: dict[tuple[Any, ...], dict[str, Any]] = {}
    out = []
    for values in trace.rows[columns].itertuples(index=False, name=None):
        row = {c: _plain(v) for c, v in zip(columns, values, strict=True)}
        key = tuple(v for c, v in row.items() if c not in IDENTITY)
        if key not in built:
            built[key] = costed(as_engine(row, target))
        out.append(built[key] | {c: row[c] for c in IDENTITY})
    env = trace.meta.environment | {"repriced_from": trace.meta.engine, "engine_arch": target.arch,
                                    "engine_sms": target.sms}
    meta = dataclasses.replace(trace.meta, engine=choice.name, environment=env, protocol=None)
    return Trace(rows_to_frame(out), meta)


def _plain(value: Any) -> Any:
    """A pandas cell as the row builders take it: None for NA, Python numbers."""
    if value is None:
        return None
    try:
        if value != value:  # NaN
            return None
    except TypeError:  # pandas.NA
        return None
    return value.item() if hasattr(value, "item") else value

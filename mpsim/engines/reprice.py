"""A trace's rows rebuilt as another engine's kernels (`mpsim simulate --reprice --engine NAME`).

Only on request: the simulator prices each row as the kernel the row names, so a captured or
synthesized trace is never priced as another stack's kernels unless it is rebuilt here first. Each
row keeps its identity and shape (op, phase, step, layer, module, sizes, formats) and takes the
kernel, grid, config and analytic FLOPs/bytes of the kernel the engine's file names for its op,
format and M on the target architecture; activation-quantization launches are the target engine's
(the old ones dropped, the file's `act_quant` added before each GEMM that has one). Measured times
described the old kernels: a rebuilt row's `measured_us` and `device` are cleared. Identical shapes
are rebuilt once.
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
from mpsim.engines.files import FUSED
from mpsim.engines.rows import Target, engine_rows
from mpsim.errors import MpsimInputError
from mpsim.kernels import launch_config as lc
from mpsim.launch_plan import costed
from mpsim.library import act_quant, trtllm
from mpsim.policy import parse_policy
from mpsim.traces.cells import plain

if TYPE_CHECKING:
    from mpsim.traces.trace import Trace

IDENTITY = ("launch_id", "stream", "phase", "step", "layer", "module")
MEASURED = ("measured_us", "device")
# the launches an engine makes before a GEMM (its input quantized, or scaled per channel)
BEFORE_GEMM = (*act_quant.KERNELS, *trtllm.PRESCALE_KERNELS)


def reprice(trace: Trace, choice: EngineChoice) -> Trace:
    """`trace` with every row rebuilt as `choice`'s engine kernels; the metadata names the engine
    (and, in its environment, the engine the rows were before and the architecture)."""
    from mpsim.traces.trace import Trace, rows_to_frame

    _check_no_fused_ops(trace, choice)
    hq, hk, d, rot = model_heads(trace.meta.model)
    tp = int(trace.meta.environment.get("parallel", {}).get("tp", 1))  # one rank's heads
    heads = (hq // tp, max(1, hk // tp), d, rot)
    policy = trace.meta.policy
    if not policy:
        raise MpsimInputError("--reprice: the trace names no policy (its metadata), so whether "
                              f"engine {choice.name!r} can run it is unknown")
    # the checkpoint's quantization method: the choice's, else the one the trace was built for
    method = choice.method or trace.meta.environment.get("quant_method")
    target = engine_target(choice.name, parse_policy(policy), heads, arch=choice.arch, sms=choice.sms,
                           method=method)
    if target is None:  # the default engine: mpsim's own launchers rebuild the rows
        target = Target(get_engine(DEFAULT_ENGINE), choice.arch or DEFAULT_ARCH, heads,
                        choice.sms or lc.GPU_SMS)
    columns = [c for c in trace.rows.columns if c not in MEASURED]
    built: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    out = []
    for values in trace.rows[columns].itertuples(index=False, name=None):
        row = {c: plain(v) for c, v in zip(columns, values, strict=True)}
        if row["kernel"] in BEFORE_GEMM:  # the old engine's; the new one's come with its GEMMs
            continue
        key = tuple(v for c, v in row.items() if c not in IDENTITY)
        if key not in built:  # none for a fused op (RoPE, KV append); a quantization before a GEMM
            built[key] = [costed(r) for r in engine_rows(row, target)]
        for done in built[key]:
            ident = {c: row[c] for c in IDENTITY}
            if done["kernel"] in BEFORE_GEMM:
                ident["module"] = f"{row['module']}_act_quant"
            out.append(done | ident)
    env = trace.meta.environment | {"repriced_from": trace.meta.engine, "engine_arch": target.arch,
                                    "engine_sms": target.sms}
    meta = dataclasses.replace(trace.meta, engine=choice.name, environment=env, protocol=None)
    if len(out) != len(trace.rows):  # fused ops dropped, quantizations added: consecutive launch ids
        for i, row in enumerate(out):
            row["launch_id"] = i
    return Trace(rows_to_frame(out), meta)




def _check_no_fused_ops(trace: Trace, choice: EngineChoice) -> None:
    """A trace whose engine fused ops into its attention kernels (RoPE, the KV append: no rows of
    their own) cannot be rebuilt as another engine, which may launch them: one clear error."""
    get_engine(choice.name)  # an unknown target engine is its own error first
    if trace.meta.engine in (DEFAULT_ENGINE, choice.name):
        return
    source = get_engine(trace.meta.engine)
    arch = str(trace.meta.environment.get("engine_arch") or DEFAULT_ARCH)
    fused = sorted({op for op, per_format in source.ops for _, choices in per_format
                    for c in choices if c.kernel == FUSED and arch in c.arch})
    if fused:
        raise MpsimInputError(
            f"--reprice: the trace's engine {source.name!r} fuses {', '.join(fused)} into its "
            f"attention kernels on {arch} (no rows of their own), so its rows cannot be rebuilt as "
            f"engine {choice.name!r}; reprice a trace that has every op (mpsim synth without "
            "--engine, or a captured trace)")

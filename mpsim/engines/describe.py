"""`mpsim engines`: each engine's name, description, source, what it runs, and the kernel that
serves each op and format (per architecture where it differs, with the M cut-offs), the kernels
that stand in for ones not modelled yet named as such."""

from __future__ import annotations

from mpsim.engines import ARCHES, describe_supports, engine_names, get_engine
from mpsim.engines.files import Choice, Engine
from mpsim.engines.rows import PENDING_KERNELS


def describe_engine(engine: Engine) -> list[str]:
    lines = [f"{engine.name}: {engine.description}", f"  file: {engine.file}",
             f"  source: {engine.source}", f"  runs: {describe_supports(engine)}"]
    for op, formats in engine.ops:
        for fmt, choices in formats:
            label = op if fmt == "any" else f"{op} {fmt}"
            lines.append(f"  {label:<26}" + "; ".join(_choice(c) for c in choices))
    return lines


def _choice(c: Choice) -> str:
    text = c.kernel
    if c.max_m is not None:
        text += f" (M <= {c.max_m})"
    if c.n_multiple is not None or c.k_multiple is not None:
        text += f" (N % {c.n_multiple or 1} == 0, K % {c.k_multiple or 1} == 0)"
    if c.a_dtype != "fp16":
        text += f" [{c.a_dtype} activations, quantized by {c.act_quant}]"
    if c.arch != ARCHES:
        text += f" on {'/'.join(c.arch)}"
    if c.stands_in_for:
        text += f" [stands in for {c.stands_in_for}]"
    if c.kernel in PENDING_KERNELS:
        text += " [no row builder or work model in this build yet]"
    return text


def describe_engines(names: list[str] | None = None) -> str:
    """Every shipped engine (or those named), one block each."""
    blocks = ["\n".join(describe_engine(get_engine(n))) for n in (names or engine_names())]
    return "\n\n".join(blocks)

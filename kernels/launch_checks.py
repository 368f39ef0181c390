"""Argument checks and the trace-recording wrapper shared by the attention and small-op launchers.

Every public launcher checks its tensors before launching (a Triton kernel reading a wrong dtype or
stride computes garbage silently), then launches through `launch_recorded`, which wraps the launch
in the active trace recorder's `launch(...)` when a capture is running (docs: pinned interfaces).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from mpsim.kernels.launch_config import LaunchConfig
from mpsim.traces.recorder import active_recorder

DTYPE_NAMES = {torch.float16: "fp16", torch.float32: "fp32", torch.int32: "int32",
               torch.int64: "int64", torch.uint8: "uint8", torch.bfloat16: "bf16"}


def _name(dtype: torch.dtype) -> str:
    return DTYPE_NAMES.get(dtype, str(dtype))


def check_tensor(name: str, t: object, dtypes: tuple[torch.dtype, ...], ndim: int,
                 shape: tuple[int | None, ...] | None = None,
                 device: torch.device | None = None, inner_contiguous: bool = True) -> torch.Tensor:
    """Check a tensor argument; the error names the argument, what was expected and what came."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in dtypes:
        want = " or ".join(_name(d) for d in dtypes)
        raise ValueError(f"{name}: expected dtype {want}, got {_name(t.dtype)}")
    if t.dim() != ndim:
        raise ValueError(f"{name}: expected {ndim} dimensions, got shape {tuple(t.shape)}")
    if shape is not None:
        for axis, (want_size, got) in enumerate(zip(shape, t.shape, strict=True)):
            if want_size is not None and want_size != got:
                raise ValueError(f"{name}: expected size {want_size} on axis {axis} "
                                 f"(shape {_fmt(shape)}), got shape {tuple(t.shape)}")
    if device is not None and t.device != device:
        raise ValueError(f"{name}: expected a tensor on {device}, got one on {t.device}")
    if inner_contiguous and t.numel() > 0 and t.stride(-1) != 1 and t.shape[-1] > 1:
        raise ValueError(f"{name}: the last axis must be contiguous (stride 1), "
                         f"got strides {tuple(t.stride())}")
    return t


def check_contiguous(name: str, t: torch.Tensor) -> None:
    if not t.is_contiguous():
        raise ValueError(f"{name}: expected a contiguous tensor, got strides {tuple(t.stride())} "
                         f"for shape {tuple(t.shape)}")


def check_choice(name: str, value: Any, allowed: tuple[Any, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name}={value!r}: expected one of {allowed}")


def check_positive(name: str, value: int) -> None:
    if not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}={value!r}: expected a positive int")


def _fmt(shape: tuple[int | None, ...]) -> str:
    return "(" + ", ".join("*" if s is None else str(s) for s in shape) + ")"


def launch_recorded(cfg: LaunchConfig, op: str, columns: dict[str, Any] | None,
                    launch: Callable[[], object]) -> None:
    """Run `launch()`; inside the active recorder's launch(...) scope when a capture is running
    (columns None: an autotuning trial, never recorded)."""
    rec = active_recorder()
    if rec is None or columns is None:
        launch()
        return
    with rec.launch(kernel=cfg.kernel, op=op, grid=cfg.grid, config=cfg.config_dict(), **columns):
        launch()

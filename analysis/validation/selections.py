"""Named row selections of the published tables (`mpsim validate --against F --select NAME`).

`issue11`: the selections the fidelity bars are stated on (docs/validation.md), all rows:
- GEMM (any aiconfigurator gemm_perf file): bf16, n and k on the grid between 2048 and 16384,
  m <= 8192; weight-only int4_wo / int8_wo rows with m <= 4;
- decode attention (generation file): head_dim 128, full attention (window 0), 32 query / 8 KV
  heads, step >= 255 (at least 256 keys), both KV dtypes;
- prefill (context file): head_dim 128, window 0, bf16 attention and KV, isl >= 128;
- Vidur mlp.csv: tensor-parallel degree 1;
- a generic CSV: every row.

`stacks`: every row of a table the classes of the every-stack report cover (stacks.py), each
stack's whole grid: GEMM bf16 (and fp16), fp8, fp8_block and nvfp4 of every shape and weight-only
int4_wo / int8_wo of every M; decode and prefill attention of every head configuration, both
KV-cache dtypes and both compute dtypes (FP8 compute, TRT-LLM's context FMHA and SGLang's FA3 fp8,
is its own class "attention prefill fp8"; SmoothQuant GEMMs stay out); a Vidur or generic table:
every row. Rows the model cannot price stay in (their status says why).

`fp8`: issue 26's GEMM rows alone: fp8, fp8_block and nvfp4 on issue 11's grid (n and k between
2048 and 16384, m <= 8192); any other table: no rows.

Rows outside the selection keep their place in the rows file with status `skipped: outside
selection NAME` and blank predictions.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from mpsim.analysis.validation.measured import Measurements
from mpsim.errors import MpsimInputError

FLOAT_DTYPES = ("fp8", "fp8_block", "nvfp4")  # issue 26: fp8 / block-fp8 / nvfp4 GEMMs
NK_GRID = (2048, 2560, 3072, 3584, 4096, 5120, 6144, 7168, 8192, 10240, 12288, 16384)


def _issue11(m: Measurements) -> np.ndarray:
    d = m.input
    cols = set(d.columns)
    if "gemm_dtype" in cols:
        bf16 = ((d["gemm_dtype"] == "bfloat16") & d["n"].isin(NK_GRID) & d["k"].isin(NK_GRID)
                & (d["m"] <= 8192))
        wo = d["gemm_dtype"].isin(["int4_wo", "int8_wo"]) & (d["m"] <= 4)
        return (bf16 | wo).to_numpy()
    if "op_name" in cols:
        window = d["window_size"].fillna(0) == 0 if "window_size" in cols else True
        common = (d["head_dim"] == 128) & window
        decode = ((d["op_name"] == "generation_attention") & (d["num_heads"] == 32)
                  & (d["num_key_value_heads"] == 8) & (d["step"] >= 255))
        prefill = ((d["op_name"] == "context_attention") & (d["attn_dtype"] == "bfloat16")
                   & (d["kv_cache_dtype"] == "bfloat16") & (d["isl"] >= 128))
        return (common & (decode | prefill)).to_numpy()
    if "num_tensor_parallel_workers" in cols:
        return (d["num_tensor_parallel_workers"] == 1).to_numpy()
    return np.ones(len(d), dtype=bool)


def _stacks(m: Measurements) -> np.ndarray:
    d = m.input
    if "gemm_dtype" in d.columns:
        return d["gemm_dtype"].isin(["bfloat16", "float16", "int4_wo", "int8_wo", *FLOAT_DTYPES]).to_numpy()
    if "op_name" in d.columns:
        return d["attn_dtype"].astype(str).isin(["bfloat16", "fp8"]).to_numpy()
    return np.ones(len(d), dtype=bool)


def _fp8(m: Measurements) -> np.ndarray:
    d = m.input
    if "gemm_dtype" not in d.columns:
        return np.zeros(len(d), dtype=bool)
    return (d["gemm_dtype"].isin(list(FLOAT_DTYPES)) & d["n"].isin(NK_GRID) & d["k"].isin(NK_GRID)
            & (d["m"] <= 8192)).to_numpy()


SELECTIONS: dict[str, Callable[[Measurements], np.ndarray]] = {"issue11": _issue11, "stacks": _stacks,
                                                                "fp8": _fp8}


def apply_selection(m: Measurements, name: str | None) -> Measurements:
    """The measurements with rows outside selection `name` marked skipped (None: all rows)."""
    if name is None:
        return m
    if name not in SELECTIONS:
        raise MpsimInputError(f"unknown selection {name!r}; expected one of {list(SELECTIONS)}")
    keep = SELECTIONS[name](m)
    rows = m.rows.copy()
    rows.loc[~keep, "status"] = f"skipped: outside selection {name}"
    return Measurements(m.source, m.input, rows, [*m.notes, f"selection {name}: {int(keep.sum())} of "
                                                          f"{len(keep)} rows"])


def selected(m: Measurements) -> pd.Series:
    return ~m.rows["status"].str.startswith("skipped")

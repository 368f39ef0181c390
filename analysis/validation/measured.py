"""Measured rows: the generic table every source is read into, and its hand-writable CSV form.

One row is one measured call: an op with its shapes, the measured time, the protocol it was timed
under and the op's scope. Columns (blank where they do not apply; extra CSV columns are carried
through untouched):

- `op`: gemm, attention, rmsnorm, rope, silu_mul, add
- gemm: `m, n, k, w_format, w_bits, group_size` (w_format as in the trace contract; fp16, bf16 and
  bfloat16 all read as 16-bit fp16; `group_size` 0 or k means per-channel, blank 128 for group
  formats; a `w_bits` that disagrees with `w_format` is an error)
- attention: `batch, q_len, kv_len, heads, kv_heads, head_dim, kv_bits` (kv_len counts the keys
  attended including the new token(s); q_len > 1 is causal attention over 16-bit K/V)
- row-wise ops: `tokens, hidden` (silu_mul: hidden is the output width, the input is 2 x hidden;
  rope: `tokens, heads, kv_heads, head_dim`)
- `measured_us`, `protocol` (kernel, graph, eager, trt-profiler), optional `includes` (blank,
  kv_append, rope+kv_append: what the measured attention call also ran).

Malformed rows (an unknown op, protocol or scope, a missing or non-numeric size, w_bits against
w_format) are errors naming the row and column. Rows that are well formed but that the model cannot
represent get a `status` saying why and are counted, never dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from mpsim import limits
from mpsim.errors import MpsimInputError
from mpsim.traces.schema import FORMAT_BITS, KV_BITS, PROTOCOLS

OPS = ("gemm", "attention", "rmsnorm", "rope", "silu_mul", "add")
SCOPES = ("", "kv_append", "rope+kv_append")
GENERIC_COLUMNS = (
    "op", "m", "n", "k", "w_format", "w_bits", "group_size", "batch", "q_len", "kv_len", "heads",
    "kv_heads", "head_dim", "kv_bits", "window", "tokens", "hidden", "measured_us", "protocol",
    "includes",
)
# `window`: attention under a sliding window of that many keys a query sees (empty or 0: none)
INT_COLUMNS = ("m", "n", "k", "w_bits", "group_size", "batch", "q_len", "kv_len", "heads",
               "kv_heads", "head_dim", "kv_bits", "window", "tokens", "hidden")
NEEDS = {
    "gemm": ("m", "n", "k"),
    "attention": ("batch", "q_len", "kv_len", "heads", "kv_heads", "head_dim"),
    "rmsnorm": ("tokens", "hidden"), "silu_mul": ("tokens", "hidden"), "add": ("tokens", "hidden"),
    "rope": ("tokens", "heads", "kv_heads", "head_dim"),
}
SIXTEEN_BIT = ("fp16", "bf16", "bfloat16", "float16")
GROUP_BITS = (8, 4, 3, 2)
ANYPREC_BITS = range(2, 9)
DEFAULT_GROUP = 128
# low-precision float weights (the FP8/FP4 contract) -> their group_size (fp8: per tensor or row)
FLOAT_GROUP = {"fp8": 0, "fp8-block": 128, "nvfp4": 16, "mxfp4": 32}
BANDS = ((16, "1-16"), (256, "17-256"), (8192, "257-8192"))
# Extra columns of the normalized frame (not written to the rows file). `in_forward`: measured inside
# a model's forward pass (Vidur), so a residual add's second input is the previous kernel's output.
# `framework`, `fw_version`, `kernel_source`: who ran the op and the kernel the source names (the
# adapter prices an attention row with that kernel); `attn_dtype`: the attention's compute dtype.
EXTRA = ("cls", "kv_dtype", "status", "in_forward", "framework", "fw_version", "kernel_source",
         "attn_dtype")


@dataclass
class Measurements:
    """A measured table read from FILE: `input` as read (carried to the rows file unchanged) and
    `rows`, the normalized generic rows aligned with it (same length and order)."""

    source: str
    input: pd.DataFrame
    rows: pd.DataFrame
    notes: list[str] = field(default_factory=list)


def row_error(where: str, row: int, column: str, reason: str) -> MpsimInputError:
    return MpsimInputError(f"{where}: row {row + 1}, column '{column}': {reason}")


def band_of(m: np.ndarray) -> np.ndarray:
    """M band of each row (the activation rows: m, tokens, or batch x q_len)."""
    m = np.asarray(m, dtype=float)
    out = np.full(len(m), ">8192", dtype=object)
    for hi, label in reversed(BANDS):
        out[m <= hi] = label
    out[~np.isfinite(m)] = "n/a"
    return out


def activation_rows(rows: pd.DataFrame) -> np.ndarray:
    """The M of each row: gemm m, row-wise tokens, attention batch x q_len."""
    m = rows["m"].astype("Float64")
    tokens = rows["tokens"].astype("Float64")
    att = rows["batch"].astype("Float64") * rows["q_len"].astype("Float64")
    out = m.where(rows["op"] == "gemm", tokens.where(rows["op"] != "attention", att))
    return out.to_numpy(dtype=float, na_value=np.nan)


def gemm_class(w_format: str, bits: int, group: int | None, k: int) -> str:
    if w_format == "fp16":
        return "gemm fp16"
    if w_format in FLOAT_GROUP:  # named as aiconfigurator's gemm_dtype (fp8, fp8_block, nvfp4)
        return "gemm " + w_format.replace("-", "_")
    if w_format == "anyprec":
        return f"gemm anyprec{bits}"
    return f"gemm int{bits} per-channel" if group in (None, k) else f"gemm int{bits} g{group}"


def attention_class(q_len: int, kv_bits: int, kv_dtype: str = "") -> str:
    if q_len > 1:
        return "attention prefill"
    return f"attention decode {kv_dtype}-kv" if kv_dtype else f"attention decode kv{kv_bits}"


# ---- the generic CSV ---------------------------------------------------------------------------

def read_csv_file(path: Path, **options: object) -> pd.DataFrame:
    """pd.read_csv, with a file that is not a CSV table (binary, not UTF-8, empty, ragged) one clear
    error naming it."""
    try:
        return pd.read_csv(path, **options)  # type: ignore[call-overload, no-any-return]
    except UnicodeDecodeError as exc:
        raise MpsimInputError(f"{path}: not a text (UTF-8) file: byte {exc.start}: expected a CSV "
                              "table") from None
    except pd.errors.EmptyDataError:
        raise MpsimInputError(f"{path}: empty file: expected a CSV table with a header row") from None
    except (pd.errors.ParserError, ValueError) as exc:
        raise MpsimInputError(f"{path}: not a readable CSV table ({exc})") from None


def read_generic_csv(path: Path) -> Measurements:
    """A hand-written CSV with the generic columns; every cell kept as its text for the rows file."""
    text = read_csv_file(path, dtype=str, keep_default_na=False)
    where = str(path)
    missing = [c for c in ("op", "measured_us", "protocol") if c not in text.columns]
    if missing:
        raise MpsimInputError(f"{where}: missing column(s) {missing}; a generic measurement CSV "
                              f"has columns {list(GENERIC_COLUMNS)} (docs/validation.md)")
    if text.empty:
        raise MpsimInputError(f"{where}: no rows")
    rows = normalize_generic(text, where)
    return Measurements("generic CSV", text, rows)


def _ints(text: pd.DataFrame, col: str, where: str) -> pd.Series:
    raw = text[col].str.strip() if col in text.columns else pd.Series("", index=text.index)
    out = pd.to_numeric(raw.replace("", np.nan), errors="coerce")
    bad = raw.ne("") & (out.isna() | (out != out.round()) | (out < 0) | ~np.isfinite(out))
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise row_error(where, i, col, f"expected a whole number >= 0, got {raw.iloc[i]!r}")
    big = out > limits.SHAPE_DIM.value()
    if big.any():
        i = int(np.flatnonzero(big.to_numpy())[0])
        limits.SHAPE_DIM.check(int(out.iloc[i]), f"{where}: row {i + 1}, column '{col}'")
    return out.astype("Int64")


def check_rows(rows: pd.DataFrame, where: str) -> None:
    """Every source's normalized rows: measured times finite and > 0, sizes within the stated limit
    on one dimension (mpsim/limits.py); the first bad one names its row."""
    times = rows["measured_us"].to_numpy(dtype=float, na_value=np.nan)
    bad = ~(np.isfinite(times) & (times > 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise row_error(where, i, "measured_us", f"expected a finite time in microseconds > 0, got "
                        f"{times[i]}")
    for col in INT_COLUMNS:
        values = rows[col].astype("Float64").to_numpy(dtype=float, na_value=0.0)
        big = values > limits.SHAPE_DIM.value()
        if big.any():
            i = int(np.flatnonzero(big)[0])
            limits.SHAPE_DIM.check(int(values[i]), f"{where}: row {i + 1}, column '{col}'")


def _words(text: pd.DataFrame, col: str) -> pd.Series:
    if col not in text.columns:
        return pd.Series("", index=text.index, dtype=object)
    return text[col].astype(str).str.strip()


def normalize_generic(text: pd.DataFrame, where: str) -> pd.DataFrame:
    """Typed generic rows from the CSV's text: checks the vocabulary, sizes and times, then each
    op's shape rules (statuses for what the model cannot represent)."""
    rows = pd.DataFrame({c: _ints(text, c, where) for c in INT_COLUMNS})
    for c in ("op", "w_format", "protocol", "includes"):
        rows[c] = _words(text, c)
    rows["op"] = rows["op"].str.lower()
    rows["measured_us"] = pd.to_numeric(_words(text, "measured_us").replace("", np.nan), errors="coerce")
    _check_vocabulary(rows, where)
    rows["cls"], rows["kv_dtype"], rows["status"], rows["in_forward"] = "", "", "ok", False
    for c in ("framework", "fw_version", "kernel_source", "attn_dtype"):
        rows[c] = _words(text, c)
    rows["framework"] = rows["framework"].str.lower()
    for i in range(len(rows)):
        _check_shape(rows, i, where)
    return rows[list(GENERIC_COLUMNS) + list(EXTRA)]


def _check_vocabulary(rows: pd.DataFrame, where: str) -> None:
    for col, allowed in (("op", OPS), ("protocol", PROTOCOLS), ("includes", SCOPES)):
        bad = ~rows[col].isin(allowed)
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise row_error(where, i, col, f"unknown value {rows[col].iloc[i]!r}; expected one of "
                            f"{[a for a in allowed if a] + ([''] if '' in allowed else [])}")
    bad = ~(rows["measured_us"] > 0) | ~np.isfinite(rows["measured_us"])
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise row_error(where, i, "measured_us", f"expected a finite time in microseconds > 0, got "
                        f"{_words(rows, 'measured_us').iloc[i]!r}")
    scoped = (rows["includes"] != "") & (rows["op"] != "attention")
    if scoped.any():
        i = int(np.flatnonzero(scoped.to_numpy())[0])
        raise row_error(where, i, "includes", "an op scope applies to attention rows only")


def _check_shape(rows: pd.DataFrame, i: int, where: str) -> None:
    op = rows.at[i, "op"]
    for col in NEEDS[op]:
        value = rows.at[i, col]
        if value is pd.NA or int(value) < 1:
            raise row_error(where, i, col, f"op {op} needs {col} >= 1")
    window = rows.at[i, "window"]
    if op != "attention" and window is not pd.NA and int(window) > 0:
        raise row_error(where, i, "window", f"a sliding window is attention's, not op {op}'s")
    if op == "gemm":
        _gemm_format(rows, i, where)
    elif op == "attention":
        _attention_shape(rows, i)
    else:
        rows.at[i, "cls"] = op


def _gemm_format(rows: pd.DataFrame, i: int, where: str) -> None:
    fmt, bits, group, k = rows.at[i, "w_format"].lower(), rows.at[i, "w_bits"], rows.at[i, "group_size"], \
        int(rows.at[i, "k"])
    if fmt in SIXTEEN_BIT or (fmt == "" and bits in (pd.NA, 16)):
        if bits is not pd.NA and bits != 16:
            raise row_error(where, i, "w_bits", f"{bits} disagrees with w_format {fmt or 'fp16'!r} (16)")
        rows.loc[i, ["w_format", "w_bits", "group_size"]] = ["fp16", 16, pd.NA]
    elif fmt.startswith("int") and fmt.endswith("-group") and fmt[3:-6].isdigit():
        fbits = int(fmt[3:-6])
        if bits is not pd.NA and bits != fbits:
            raise row_error(where, i, "w_bits", f"{bits} disagrees with w_format {fmt!r} ({fbits})")
        if fbits not in GROUP_BITS:
            return _status(rows, i, f"unrepresentable: group formats have {GROUP_BITS} bits, not {fbits}")
        g = DEFAULT_GROUP if group is pd.NA else (k if int(group) in (0, k) else int(group))
        rows.loc[i, ["w_format", "w_bits", "group_size"]] = [fmt, fbits, g]
    elif fmt in FLOAT_GROUP:
        fbits = FORMAT_BITS[fmt][0]
        if bits is not pd.NA and bits != fbits:
            raise row_error(where, i, "w_bits", f"{bits} disagrees with w_format {fmt!r} ({fbits})")
        g = FLOAT_GROUP[fmt]
        if fmt == "fp8":  # per tensor (<NA>) or per output row (0, or k)
            g = pd.NA if group is pd.NA else 0
        elif group is not pd.NA and int(group) != g:
            raise row_error(where, i, "group_size", f"{fmt} has group_size {g}, got {group}")
        rows.loc[i, ["w_format", "w_bits", "group_size"]] = [fmt, fbits, g]
    elif fmt == "anyprec":
        if bits is pd.NA or int(bits) not in ANYPREC_BITS:
            raise row_error(where, i, "w_bits", f"anyprec needs w_bits in 2..8, got {bits}")
        rows.loc[i, ["w_format", "group_size"]] = ["anyprec", pd.NA]
    else:
        return _status(rows, i, f"unrepresentable: w_format {fmt!r} is not a trace weight format "
                       "(fp16, int{8,4,3,2}-group, anyprec, fp8, fp8-block, nvfp4, mxfp4)", "gemm " + fmt)
    rows.at[i, "cls"] = gemm_class(rows.at[i, "w_format"], int(rows.at[i, "w_bits"]),
                                   None if rows.at[i, "group_size"] is pd.NA
                                   else int(rows.at[i, "group_size"]), k)


def _attention_shape(rows: pd.DataFrame, i: int) -> None:
    if rows.at[i, "kv_bits"] is pd.NA:
        rows.at[i, "kv_bits"] = 16
    q, kv, bits = int(rows.at[i, "q_len"]), int(rows.at[i, "kv_len"]), int(rows.at[i, "kv_bits"])
    heads, kv_heads = int(rows.at[i, "heads"]), int(rows.at[i, "kv_heads"])
    rows.at[i, "cls"] = attention_class(q, bits)
    if bits not in KV_BITS:
        _status(rows, i, f"unrepresentable: kv_bits {bits} (the model has {list(KV_BITS)})")
    elif q > 1 and bits != 16:
        _status(rows, i, "unrepresentable: causal attention (q_len > 1) reads 16-bit K/V")
    elif kv < q:
        _status(rows, i, f"unrepresentable: kv_len {kv} < q_len {q}")
    elif heads % kv_heads:
        _status(rows, i, f"unrepresentable: heads {heads} not a multiple of kv_heads {kv_heads}")


def _status(rows: pd.DataFrame, i: int, reason: str, cls: str | None = None) -> None:
    rows.at[i, "status"] = reason
    if cls is not None:
        rows.at[i, "cls"] = cls

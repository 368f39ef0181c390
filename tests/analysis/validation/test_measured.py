"""The generic measurement CSV: vocabulary, shapes, 16-bit and per-channel readings, statuses."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from mpsim.analysis.validation.measured import band_of, read_generic_csv
from mpsim.errors import MpsimInputError

HEADER = ("op,m,n,k,w_format,w_bits,group_size,batch,q_len,kv_len,heads,kv_heads,head_dim,kv_bits,"
          "tokens,hidden,measured_us,protocol,includes")


def _csv(tmp_path: Path, *lines: str, header: str = HEADER) -> Path:
    path = tmp_path / "m.csv"
    path.write_text("\n".join([header, *lines]) + "\n")
    return path


def test_rows_read_with_their_classes_and_statuses(tmp_path: Path) -> None:
    m = read_generic_csv(_csv(
        tmp_path,
        "gemm,1,4096,4096,bf16,,,,,,,,,,,,12.6,graph,",
        "gemm,16,4096,4096,int4-group,,0,,,,,,,,,,9.0,trt-profiler,",
        "gemm,16,4096,4096,int4-group,4,,,,,,,,,,,9.0,kernel,",
        "gemm,2,64,64,fp8,,,,,,,,,,,,3.0,graph,",
        "attention,,,,,,,4,1,512,32,8,128,,,,15.0,graph,kv_append",
        "attention,,,,,,,1,128,128,32,8,128,8,,,15.0,graph,",
        "silu_mul,,,,,,,,,,,,,,16,11008,6.0,kernel,",
        "rope,,,,,,,,,,32,8,128,,16,,4.0,eager,"))
    r = m.rows
    assert list(r["cls"]) == ["gemm fp16", "gemm int4 per-channel", "gemm int4 g128", "gemm fp8",
                              "attention decode kv16", "attention prefill", "silu_mul", "rope"]
    assert r.loc[0, "w_format"] == "fp16" and r.loc[0, "w_bits"] == 16  # bf16 reads as fp16
    assert r.loc[1, "group_size"] == 4096 and r.loc[1, "w_bits"] == 4  # 0 = per-channel = k
    assert r.loc[4, "kv_bits"] == 16  # blank kv_bits: a 16-bit cache
    assert r["status"].tolist()[:3] == ["ok"] * 3
    assert r.loc[3, "status"] == "ok" and r.loc[3, "w_bits"] == 8  # issue 26: fp8 is a weight format
    assert "reads 16-bit K/V" in r.loc[5, "status"]
    assert (m.input.iloc[0] == pd.read_csv(tmp_path / "m.csv", dtype=str, keep_default_na=False)
            .iloc[0]).all()  # the text as written, for the rows file


@pytest.mark.parametrize(("line", "match"), [
    ("gemm,1,64,64,int4-group,8,,,,,,,,,,,3.0,graph,", r"row 1, column 'w_bits': 8 disagrees"),
    ("gemm,1,64,64,fp16,8,,,,,,,,,,,3.0,graph,", r"column 'w_bits': 8 disagrees"),
    ("conv,1,64,64,,,,,,,,,,,,,3.0,graph,", r"column 'op': unknown value 'conv'"),
    ("gemm,1,64,64,,,,,,,,,,,,,3.0,cupti,", r"column 'protocol': unknown value 'cupti'"),
    ("gemm,1,64,,,,,,,,,,,,,,3.0,graph,", r"column 'k': op gemm needs k >= 1"),
    ("gemm,1,64,1.5,,,,,,,,,,,,,3.0,graph,", r"column 'k': expected a whole number"),
    ("gemm,1,64,64,,,,,,,,,,,,,0,graph,", r"column 'measured_us'"),
    ("rmsnorm,,,,,,,,,,,,,,4,64,3.0,graph,kv_append", r"column 'includes': an op scope"),
    ("attention,,,,,,,1,1,64,8,8,64,,,,3.0,graph,rope", r"column 'includes': unknown value 'rope'"),
])
def test_malformed_rows_are_errors_naming_row_and_column(tmp_path: Path, line: str, match: str) -> None:
    with pytest.raises(MpsimInputError, match=match):
        read_generic_csv(_csv(tmp_path, line))


def test_missing_required_columns_and_optional_ones(tmp_path: Path) -> None:
    with pytest.raises(MpsimInputError, match=r"missing column\(s\) \['protocol'\]"):
        read_generic_csv(_csv(tmp_path, "gemm,3.0", header="op,measured_us"))
    m = read_generic_csv(_csv(tmp_path, "gemm,2,64,64,3.0,graph,x",
                              header="op,m,n,k,measured_us,protocol,who"))  # blank = not applicable
    assert m.rows.loc[0, "cls"] == "gemm fp16" and list(m.input.columns)[-1] == "who"


def test_the_window_column(tmp_path: Path) -> None:
    """An optional `window` (keys a query sees; blank or 0: none), attention's only; a sliding
    window binding its cache is priced by FA3's room (a blank framework), below the full cache."""
    from mpsim.analysis.validation.against import validate_against
    from mpsim.hw_models import load_hardware
    header = "op,batch,q_len,kv_len,heads,kv_heads,head_dim,window,measured_us,protocol,includes"
    m = read_generic_csv(_csv(tmp_path, "attention,8,1,32768,32,8,128,,100,graph,kv_append",
                              "attention,8,1,32768,32,8,128,4096,30,graph,kv_append",
                              "attention,8,1,1024,32,8,128,0,10,graph,kv_append", header=header))
    assert m.rows["window"].tolist()[1:] == [4096, 0] and m.rows["window"].isna().tolist()[0]
    r = validate_against(m, load_hardware("h200-sxm"), cache_dir=None, progress=False).frame
    assert (r["status"] == "ok").all() and r.loc[1, "predicted_us"] < 0.5 * r.loc[0, "predicted_us"]
    with pytest.raises(MpsimInputError, match=r"row 1, column 'window': a sliding window is "
                                              r"attention's, not op gemm's"):
        read_generic_csv(_csv(tmp_path, "gemm,2,64,64,128,3.0,graph",
                              header="op,m,n,k,window,measured_us,protocol"))
    with pytest.raises(MpsimInputError, match=r"row 1, column 'window': expected a whole number"):
        read_generic_csv(_csv(tmp_path, "attention,8,1,1024,32,8,128,-1,10,graph,", header=header))


def test_bands() -> None:
    assert list(band_of([1, 16, 17, 256, 257, 8192, 8193, float("nan")])) == [
        "1-16", "1-16", "17-256", "17-256", "257-8192", "257-8192", ">8192", "n/a"]

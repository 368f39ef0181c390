"""TensorRT-LLM's AUTO all-reduce strategy (mpsim/sim/trtllm_allreduce.py): its table read as
selectStrategyLookUpTable reads it (floor(log2) indices, out of range: NCCL) and its workspace."""

from __future__ import annotations

import pytest

from mpsim.sim.trtllm_allreduce import strategy, workspace_bytes


def test_the_table_is_indexed_by_floor_log2_of_tokens_and_hidden() -> None:
    # sm90, TP 2, hidden 4096: {4, 5, 4, 5, 4, ...}; tokens 3 reads the entry of 2, 5000 hidden that of 4096
    assert strategy(1, 4096, 2, 8192, blackwell=False) == "oneshot"
    assert strategy(2, 4096, 2, 16384, blackwell=False) == "twoshot"
    assert strategy(3, 5000, 2, 30000, blackwell=False) == "twoshot"
    # sm90, TP 8, hidden 4096: TWOSHOT from 64 tokens; sm100 keeps ONESHOT to 128
    assert strategy(64, 4096, 8, 64 * 8192, blackwell=False) == "twoshot"
    assert strategy(64, 4096, 8, 64 * 8192, blackwell=True) == "oneshot"
    assert strategy(256, 4096, 8, 256 * 8192, blackwell=True) == "twoshot"


def test_out_of_the_table_and_over_the_workspace_fall_back_to_nccl() -> None:
    assert strategy(1, 64, 2, 128, blackwell=False) == "nccl"  # hidden below 128
    assert strategy(1 << 15, 128, 2, (1 << 15) * 256, blackwell=False) == "nccl"  # tokens past 16384
    assert workspace_bytes(2) == 16_000_000 and workspace_bytes(4) == 8_000_000
    assert strategy(1024, 4096, 2, 1024 * 8192, blackwell=False) == "oneshot"  # 8 MiB fits 16 MB
    assert strategy(1024, 4096, 4, 1024 * 8192, blackwell=False) == "nccl"  # 8 MiB > 8 MB
    assert strategy(4, 4096, 2, 4 * 8192, blackwell=False, nvlink=False) == "nccl"
    assert strategy(8192, 512, 2, 8 << 20, blackwell=False) == "nccl"  # the sm90 table's own NCCL
    assert strategy(8192, 512, 2, 8 << 20, blackwell=True) == "oneshot"
    with pytest.raises(ValueError, match="tokens >= 1"):
        strategy(0, 4096, 2, 0, blackwell=False)

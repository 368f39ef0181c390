"""The group kernels' scales and zeros as one 32-bit word per row and group: the config key and its rule.

A group weight's scales and zeros are fp16 (N, KP / G), one per row and group. Read one at a time
(2 bytes) they cannot go through cp.async (4, 8 or 16 bytes a copy), so Triton's pipeliner leaves
them register loads consumed in their own K trip: the sm_90a SASS of the 16-row GEMV and of the
tiled GEMM (Triton 3.9) stages the code words and x with LDGSTS but issues the scales and zeros as
LDG.E.U16 at the top of each trip and waits for them about 120 instructions later, a load round
trip every trip (the H200 capture measured the int4 prefill GEMMs at that lock-step pace:
docs/validation.md#mpsims-own-kernels-on-an-h200). Read from one 32-bit word per row and group
(s in the low half, z in the high, as TurboMind keeps its scales and zeros interleaved:
reference/group_quant.py `scale_zero_words`, built once when a weight is loaded, the same 4 bytes
a group), the load is one Triton stages with the codes, and the halves are the register's two fp16
lanes (kernels/group_dequant.py `_group_sz`). The launches whose loop reads them so carry `sz_words`
1 in their config (the trace records it; the simulator prices those loops pipelined:
mpsim/sim/gpu/library/mpsim_gemm.py); a config without the key ran the 2-byte loads (traces before
the key, MPSIM_SZ_WORDS=0, and the one-row partial sums, which read z once a run and s once an
iteration). docs/kernels.md#staged-scales. No triton import.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from mpsim.kernels.config_keys import env_switch, key_of
from mpsim.kernels.partial_runs import gemv_partial_trips

SZ_WORDS_KEY = "sz_words"
# MPSIM_SZ_WORDS=0 leaves every group loop on the 2-byte loads (the configs carry no sz_words, so
# synthesis prices what runs): the GPU kit's side-by-side timing of the two loops
SZ_WORDS_SWITCH = "MPSIM_SZ_WORDS"


def sz_words_on() -> bool:
    """MPSIM_SZ_WORDS: '1' or unset reads scales and zeros as words, '0' as 2-byte loads."""
    return env_switch(SZ_WORDS_SWITCH)


def reads_sz_words(tag: str, bits: int, group: int | None, block_m: int | None,
                   block_k: int | None) -> bool:
    """Whether a group launch's K loop reads its scales and zeros as words: the W_hat loops (the
    tiled GEMM, 2..16 rows, one row at 8 bits or with K tiles as wide as a group), not the one-row
    partial sums."""
    if tag != "group" or not group:
        return False
    return gemv_partial_trips(bits, group, int(block_m or 1), int(block_k or 1)) == 1


def sz_words_extra(tag: str, bits: int, group: int | None, block_m: int | None,
                   block_k: int | None) -> tuple[tuple[str, int], ...]:
    """The `extra` a config carries for it (reads_sz_words; nothing with MPSIM_SZ_WORDS=0)."""
    on = reads_sz_words(tag, bits, group, block_m, block_k) and sz_words_on()
    return ((SZ_WORDS_KEY, 1),) if on else ()


def sz_words_of(extra: Iterable[tuple[str, int]] | Mapping[str, int]) -> bool:
    """A config's sz_words (its `extra`, or its config dict; False without the key)."""
    return bool(key_of(extra, SZ_WORDS_KEY))

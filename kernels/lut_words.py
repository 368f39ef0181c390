"""Any-precision's 4-bit LUT read as 32-bit words on the 2..16-row and tiled paths: the key and its rule.

At 4 bits the any-precision kernels look each weight up in its row's 16-entry fp16 LUT (the 2..3-bit
widths read the pair table, 4-byte words, instead). A 2-byte gather is no copy cp.async can make, so
Triton's pipeliner leaves the gathers register loads, and with them the plane words that address
them: the sm_90a SASS of the 16-row GEMV and of the tiled GEMM (Triton 3.9) issues 72 and 36 LDG a
trip and no LDGSTS for the codes, a lock-step loop. With each LUT entry widened to a 32-bit word (the
fp16 bits in the low half: `lut_words`, built once when a weight is loaded, 64 B a row instead of
32, rows at multiples of 64 B for the OR addressing of kernels/table_rows.py) the gathers are 4-byte
copies, and the same loops stage every load (LDGSTS, no LDG). The one-row GEMV keeps the fp16 LUT:
its pipelined loop would issue 12% more for it (sm_90a, 64 x 128: 518 -> 581 instructions a trip).
Launches that read the words carry `lut_words` 1 in their config (the trace records it, the
accountant charges the wider LUT, the simulator prices the loop pipelined); a config without it ran
the fp16 LUT. docs/kernels.md#staged-scales. No triton import.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from mpsim.kernels.config_keys import key_of
from mpsim.kernels.sz_words import sz_words_extra

# the widths: above the pair table's, within the OR-addressed nibble fields (kernels/gemm_anyprec.py)
from mpsim.traces.accounting import LUT_WORDS_BITS

LUT_WORDS_KEY = "lut_words"


def reads_lut_words(tag: str, bits: int, block_m: int | None) -> bool:
    """Whether an any-precision launch reads its LUT as words: 4 bits, 2 or more activation rows."""
    return tag == "anyprec" and bits in LUT_WORDS_BITS and int(block_m or 1) > 1


def lut_words_extra(tag: str, bits: int, block_m: int | None) -> tuple[tuple[str, int], ...]:
    """The `extra` a config carries for it (reads_lut_words)."""
    return ((LUT_WORDS_KEY, 1),) if reads_lut_words(tag, bits, block_m) else ()


def lut_words_of(extra: Iterable[tuple[str, int]] | Mapping[str, int]) -> bool:
    """A config's lut_words (its `extra`, or its config dict; False without the key)."""
    return bool(key_of(extra, LUT_WORDS_KEY))


def staged_extra(tag: str, bits: int, group: int | None, block_m: int | None,
                 block_k: int | None) -> tuple[tuple[str, int], ...]:
    """The keys of the tables a launch reads as words so that its loop is staged: sz_words
    (kernels/sz_words.py) and lut_words."""
    return sz_words_extra(tag, bits, group, block_m, block_k) + lut_words_extra(tag, bits, block_m)

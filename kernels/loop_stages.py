"""The one-row GEMVs' pipelined K loop: the config key, the switch and the tl.range argument.

A one-row GEMV's K loop multiplies on CUDA cores, so Triton pipelines none of its loads unless the
loop asks (`tl.range(num_stages=...)`): the H200 capture of 2026-12-04 measured the unpipelined loop
at one load round trip a trip (docs/validation.md#mpsims-own-kernels-on-an-h200). Its GPU configs
carry `loop_stages` (the config's num_stages) and the kernels pass it to their K loop; a config
without the key (traces before it) ran the unpipelined loop (docs/kernels.md#pipelined-k-loops).
No triton import (kernels/launch_config.py re-exports these for the synthesizer and the simulator).
"""

from __future__ import annotations

from collections.abc import Iterable

from mpsim.kernels.config_keys import env_switch, key_of
from mpsim.traces.accounting import PAIR_MAX_BITS

LOOP_STAGES_KEY = "loop_stages"
# MPSIM_LOOP_STAGES=0 leaves the one-row K loops unpipelined (the configs carry no loop_stages, so
# synthesis prices what runs): the GPU kit's `-plain-loop` captures, a fallback should a GPU show no gain
LOOP_STAGES_SWITCH = "MPSIM_LOOP_STAGES"


def loop_stages_on() -> bool:
    """MPSIM_LOOP_STAGES: '1' or unset pipelines the one-row GEMVs' K loop, '0' does not."""
    return env_switch(LOOP_STAGES_SWITCH)


def gemv_loop_stages(block_m: int, stages: int, *,
                     switch: bool = True) -> tuple[tuple[str, int], ...]:
    """The `extra` of a GPU GEMV config: loop_stages for one activation row, nothing for more rows
    (their tl.dot loops are pipelined by Triton as they are) or with MPSIM_LOOP_STAGES=0 (`switch`
    False: whatever it says, as scripts/sass_mix.py counts both loops)."""
    on = loop_stages_on() if switch else True
    return ((LOOP_STAGES_KEY, stages),) if block_m == 1 and stages > 0 and on else ()


def loop_stages_of(extra: Iterable[tuple[str, int]]) -> int:
    """A launch config's loop_stages (from its `extra`; 0 without the key)."""
    return key_of(extra, LOOP_STAGES_KEY)


def loop_stages_or_none(stages: int) -> int | None:
    """A K loop's `tl.range(num_stages=...)`: None (Triton's default: only loads that feed tl.dot as
    they are are pipelined) for 0, else the stages every load of the loop is pipelined over."""
    return int(stages) if int(stages) > 0 else None


def one_row_stages(tag: str, bits: int) -> int:
    """loop_stages of a one-row GPU GEMV: 3, but 2 for the any-precision partial sums (<= 3 bits):
    Triton stages every load of a pipelined trip in shared memory, the T tiles' pair-table words
    included, 4 B per two weights: 78 KB a CTA at 256 x 32 with 2 stages, 156 KB with 3, above an
    Ada GPU's 99 KB per block and one CTA per SM on Hopper. On Hopper that loop prefetches in
    registers instead (prefetched_in_registers): the next run, two stages as well."""
    return 2 if tag == "anyprec" and bits <= PAIR_MAX_BITS else 3


def prefetched_in_registers(tag: str, bits: int, sm_major: int | None) -> bool:
    """Whether a one-row GEMV's partial sums (T > 1 K tiles a run), asked for stages, keep their next
    run in registers rather than Triton's shared-memory stages (a two-stage pipeline, whatever
    loop_stages the config carries):
    - the group partial sums at 2 and 3 bits (kernels/gemv_group.py _prefetched_at_sums), on every
      GPU (sm_90a, 256 x 32: 3.80 -> 3.62 issue slots per weight at 3 bits, 3.58 -> 3.16 at 2; sm_80
      4.04 -> 4.00, 3.81 -> 3.78, fewer integer ops as well);
    - the any-precision partial sums at <= PAIR_MAX_BITS (kernels/gemv_anyprec.py
      _prefetched_pair_sums, the kernel's REG_PREFETCH) on Hopper and later (`sm_major` >= 9) and
      the interpreter (None): Triton's stages hold the pair-table gathers too (sm_90a, 256 x 32,
      5.55 -> 4.59 at 3 bits, 5.24 -> 4.24 at 2). On sm_80 that loop issued fewer slots (5.88 ->
      5.24) but more integer ops (ALU lanes 2.94 -> 3.08 per weight, the pipe that binds an A100
      there), so Ampere and Ada keep Triton's stages."""
    if tag == "group":
        return 2 <= bits <= 3
    return tag == "anyprec" and bits <= PAIR_MAX_BITS and (sm_major is None or sm_major >= 9)

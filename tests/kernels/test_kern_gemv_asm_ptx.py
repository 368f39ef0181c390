"""The inline PTX of kernels/group_dequant_asm.py, run by a small emulator of the five instructions it
uses (shr, shl, lop3, sub.f16x2, mov), against reference/packing.py's codes: every pair it returns is
(q - z) 2^-E of the right two weights, exactly, for every code and zero at each width. The GPU check
(tests/kernels/test_kern_gemv_asm_gpu.py) runs the compiled PTX; this one runs on the CPU and pins
the masks, exponents, lop3 truth tables and the pair order the kernel joins them in.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from mpsim.kernels.gemv_group import partial_exp
from mpsim.kernels.group_dequant_asm import _pairs_asm, _three_asm
from mpsim.kernels.launch_config import gemv_partial_trips
from mpsim.reference.packing import pack_codes, unit_codes

GROUP = 128


def _f16(u: np.ndarray) -> np.ndarray:
    return u.astype(np.uint16).view(np.float16)


def _sub_f16x2(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = []
    for shift in (0, 16):
        low = np.uint32(0xFFFF)
        ha, hb = _f16((a >> np.uint32(shift)) & low), _f16((b >> np.uint32(shift)) & low)
        out.append((ha - hb).view(np.uint16).astype(np.uint32) << np.uint32(shift))
    return out[0] | out[1]


def _lop3(a: np.ndarray, b: np.ndarray, c: np.ndarray, lut: int) -> np.ndarray:
    """PTX lop3: result bit = bit (a<<2 | b<<1 | c) of the truth table, per bit position."""
    out = np.zeros_like(a)
    for idx in range(8):
        if lut >> idx & 1:
            term = np.full_like(a, 0xFFFFFFFF)
            for operand, bit in ((a, 4), (b, 2), (c, 1)):
                term &= operand if idx & bit else ~operand
            out |= term
    return out


def run_ptx(ptx: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Emulate the straight-line PTX block on uint32 vectors; $i operands come from `inputs`."""
    regs = dict(inputs)

    def val(tok: str) -> np.ndarray:
        tok = tok.strip()
        if tok.startswith("0x") or tok.isdigit():
            return np.full_like(next(iter(inputs.values())), int(tok, 0))
        return regs[tok]

    for line in ptx.splitlines():
        line = line.strip().rstrip(";")
        if line in ("{", "}") or line.startswith(".reg"):
            continue
        op, rest = line.split(None, 1)
        args = [a.strip() for a in rest.split(",")]
        if op == "shr.b32":
            regs[args[0]] = val(args[1]) >> np.uint32(int(args[2]))
        elif op == "shl.b32":
            regs[args[0]] = val(args[1]) << np.uint32(int(args[2]))
        elif op == "lop3.b32":
            regs[args[0]] = _lop3(val(args[1]), val(args[2]), val(args[3]), int(args[4], 0))
        elif op == "sub.f16x2":
            regs[args[0]] = _sub_f16x2(val(args[1]), val(args[2]))
        elif op == "mov.b32":
            regs[args[0]] = val(args[1])
        else:
            raise AssertionError(f"unexpected PTX instruction {op!r}")
    return regs


def _cpair(value: np.ndarray) -> np.ndarray:
    b = value.astype(np.float16).view(np.uint16).astype(np.uint32)
    return b | (b << np.uint32(16))


@pytest.mark.parametrize("bits", [4, 3, 2])
def test_asm_pairs_are_q_minus_z_of_the_right_weights(bits: int) -> None:
    rng = np.random.default_rng(bits)
    n = 4096
    codes = rng.integers(0, 1 << bits, size=(n, 32), dtype=np.uint8)
    codes[: 1 << bits] = np.arange(1 << bits)[:, None]  # every code at every position
    z = rng.integers(0, 1 << bits, size=n).astype(np.float16)
    z[: 1 << bits] = np.arange(1 << bits)[::-1]
    e = partial_exp(bits, gemv_partial_trips(bits, GROUP, 1, 32))
    words = pack_codes(codes, bits).view(np.uint32)  # (n, bits): one 32-code chunk per row
    c0 = (z + np.float16(1024)) * np.float16(1.0 / (1 << e))

    def ck(k: int) -> np.ndarray:
        return _cpair(c0 + np.float16(((1 << (10 - k)) - 1024.0) / (1 << e)))

    got = np.empty((n, 32), dtype=np.float16)
    per = unit_codes(bits)
    if bits == 3:
        inputs = {f"${16 + u}": words[:, u] for u in range(3)}
        inputs.update({f"${19 + i}": ck(k) for i, k in enumerate((0, 3, 6, 5, 4))})
        regs = run_ptx(_three_asm(e), inputs)
        pairs = {(u, j): regs[f"${4 * u + j}"] for u in range(4) for j in range(4)}
    else:
        ks = (0, 4) if bits == 4 else (0, 2, 4, 6)
        n_out = 2 * len(ks)
        pairs = {}
        for u in range(bits):  # the unit of a 2- or 4-bit chunk is a word
            inputs = {f"${n_out}": words[:, u]}
            inputs.update({f"${n_out + 1 + i}": ck(k) for i, k in enumerate(ks)})
            regs = run_ptx(_pairs_asm(bits, e), inputs)
            pairs.update({(u, j): regs[f"${j}"] for j in range(n_out)})
    for (u, j), p in pairs.items():
        for h in (0, 1):
            got[:, u * per + 2 * j + h] = _f16((p >> np.uint32(16 * h)) & np.uint32(0xFFFF))
    want = (codes.astype(np.float64) - z[:, None].astype(np.float64)) / (1 << e)
    assert np.array_equal(got.astype(np.float64), want)
    assert len(pairs) * 2 == 32


def test_the_emulator_reads_every_instruction_of_the_blocks() -> None:
    ops = {line.split()[0] for e in (4, 5, 6) for text in (_pairs_asm(4, e), _pairs_asm(2, e),
           _three_asm(e)) for line in text.splitlines() if re.match(r"^[a-z]", line)}
    assert ops == {"shr.b32", "shl.b32", "lop3.b32", "sub.f16x2", "mov.b32"}


def test_the_interpreter_never_takes_the_asm_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """MPSIM_GEMV_ASM=1 is a GPU switch: the interpreter runs the pure twin (the same output as with
    the switch off), and a hand-passed asm config is refused with a clear error."""
    import torch

    from mpsim.kernels.gemm_group import gemm_group
    from mpsim.kernels.gemv_group_asm import ASM_SWITCH, asm_config, switch_on
    from mpsim.kernels.launch_config import gemm_config

    gen = torch.Generator().manual_seed(0)
    n, k, bits = 64, 256, 4
    words = torch.randint(-(2**31), 2**31, (n, k * bits // 32), dtype=torch.int32, generator=gen)
    scales = (torch.rand(n, k // GROUP, generator=gen) * 0.01 + 1e-3).half()
    zeros = torch.randint(0, 1 << bits, (n, k // GROUP), generator=gen).half()
    x = torch.randn(1, k, generator=gen).half()
    run = lambda **kw: gemm_group(x, words, scales, zeros, bits=bits, group_size=GROUP, **kw)  # noqa: E731
    monkeypatch.setenv(ASM_SWITCH, "0")
    off = run()
    monkeypatch.setenv(ASM_SWITCH, "1")
    assert switch_on() and torch.equal(run(), off)
    cfg = gemm_config(1, n, k, f"int{bits}-group", bits, GROUP, on_gpu=True)
    with pytest.raises(ValueError, match="interpreter"):
        run(config=asm_config(cfg, bits, GROUP))
    monkeypatch.setenv(ASM_SWITCH, "yes")
    with pytest.raises(ValueError, match=ASM_SWITCH):
        switch_on()

"""Bit-exact numba references and the quantization formats every mpsim kernel implements."""

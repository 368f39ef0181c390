"""Shared fixtures for engine tests: a small random Llama with the tiny model's shape family."""

from __future__ import annotations

import dataclasses

from mpsim.models import ModelSpec

SMALL = ModelSpec("small-test", num_layers=1, hidden=128, ffn=256, num_heads=4, num_kv_heads=2,
                  head_dim=32, vocab=256, source="tests")


def variant(**changes: object) -> ModelSpec:
    return dataclasses.replace(SMALL, **changes)  # type: ignore[arg-type]

TIE_GAP = 1e-2  # logits closer than this are a tie a summation-order difference may flip


def first_divergence(a: list[list[int]], b: list[list[int]]) -> tuple[int, int] | None:
    """(sequence, step) of the first token where two generations differ, or None."""
    for seq, (x, y) in enumerate(zip(a, b, strict=True)):
        for step, (u, v) in enumerate(zip(x, y, strict=True)):
            if u != v:
                return seq, step
    return None

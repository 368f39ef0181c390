"""Rouge-L (longest common subsequence F-measure, Lin 2004) over token sequences.

Implemented here rather than taken from `rouge-score`: that package's tokenizer keeps only
lower-cased alphanumerics, which erases most of what differs between two continuations of Python
source (operators, brackets, indentation). mpsim scores whitespace-separated words and, separately,
bytes. Tested against hand-computed cases in tests/quality/test_quality_heldout.py.
"""

from __future__ import annotations

from collections.abc import Sequence


def lcs_length(a: Sequence[object], b: Sequence[object]) -> int:
    """Length of the longest common subsequence (O(len(a) * len(b)) dynamic program, two rows)."""
    if len(a) < len(b):
        a, b = b, a
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def rouge_l(candidate: Sequence[object], reference: Sequence[object], beta: float = 1.0) -> float:
    """Rouge-L F-measure of a candidate against a reference; 1.0 when both are empty."""
    if not candidate and not reference:
        return 1.0
    lcs = lcs_length(candidate, reference)
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(candidate), lcs / len(reference)
    return (1 + beta**2) * precision * recall / (recall + beta**2 * precision)


def words(data: bytes) -> list[bytes]:
    return data.split()

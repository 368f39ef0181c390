"""Reading ../shared/engine-benchmarks.md in place: its table as cells by column, and the small
matchers the per-row readers (engine_rows.py) use to take numbers out of a cell's prose.

The file is read where it lies, never copied into the project. Every problem is one
MpsimInputError naming the file, the row (its `#`, e.g. E1), the column and what was expected, so a
row whose wording changed upstream fails loudly instead of being read as something else.
"""

from __future__ import annotations

import re
from pathlib import Path

from mpsim.errors import MpsimInputError

COLUMNS = ("#", "engine, tool", "GPU", "model", "workload", "published result", "counts", "source")
Row = dict[str, str]


def default_path() -> Path:
    """../shared/engine-benchmarks.md beside the checkout (the worktree's parent folder)."""
    return Path(__file__).resolve().parents[3] / "shared" / "engine-benchmarks.md"


def read_table(path: Path) -> dict[str, Row]:
    """The table's rows by their `#` (E1, E2, ...), each as {column: cell text}."""
    if not path.is_file():
        raise MpsimInputError(f"no engine benchmarks file at {path} (the shared "
                              "engine-benchmarks.md; pass --benchmarks PATH)")
    lines = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines()]
    table = [ln for ln in lines if ln.startswith("|")]
    if not table or _cells(table[0]) != list(COLUMNS):
        got = _cells(table[0]) if table else "no table"
        raise MpsimInputError(f"{path}: expected a table with the columns {list(COLUMNS)}, got {got}")
    rows: dict[str, Row] = {}
    for line in table[2:]:
        cells = _cells(line)
        if len(cells) != len(COLUMNS):
            raise MpsimInputError(f"{path}: row {cells[0]} has {len(cells)} cells, expected "
                                  f"{len(COLUMNS)} {list(COLUMNS)}")
        if cells[0] in rows:
            raise MpsimInputError(f"{path}: row {cells[0]} appears twice")
        rows[cells[0]] = dict(zip(COLUMNS, cells, strict=True))
    return rows


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


class Cell:
    """One cell of one row, with matchers whose failure names the row, the column and the pattern."""

    def __init__(self, row: Row, column: str) -> None:
        self.row_id, self.column, self.text = row["#"], column, row[column]

    def error(self, expected: str) -> MpsimInputError:
        return MpsimInputError(f"engine-benchmarks.md row {self.row_id}, column {self.column!r}: "
                               f"expected {expected}, got {self.text!r}")

    def need(self, word: str) -> None:
        """The cell must still say `word` (the set-up reads the row as saying it)."""
        if word not in self.text:
            raise self.error(f"the text {word!r}")

    def match(self, pattern: str, what: str) -> re.Match[str]:
        m = re.search(pattern, self.text)
        if m is None:
            raise self.error(f"{what} (pattern {pattern!r})")
        return m

    def ints(self, pattern: str, what: str) -> tuple[int, ...]:
        """The integers of the first match's groups (a group may hold "1 / 8 / 64")."""
        m = self.match(pattern, what)
        return tuple(int(v) for g in m.groups() for v in _split(g))

    def series(self, label: str, count: int) -> tuple[float, ...]:
        """The `count` numbers after `label`, written "LABEL 1.0 / 2.0 / 3.0" (or "LABEL 1.0")."""
        m = self.match(rf"(?<![\w-]){re.escape(label)}:? ((?:\d+(?:\.\d+)?)(?: / \d+(?:\.\d+)?)*)",
                       f"{label!r} followed by {count} number(s)")
        values = tuple(float(v) for v in _split(m.group(1)))
        if len(values) != count:
            raise self.error(f"{count} number(s) after {label!r}, found {len(values)}")
        return values


def _split(group: str) -> list[str]:
    return [v.strip() for v in group.split("/") if v.strip()]

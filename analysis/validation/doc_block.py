"""One marked block of a doc, and a table command's exit: the pieces the table commands that own a
single block (loo.py, stack_noise.py) share."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from mpsim.errors import MpsimInputError
from mpsim.traces.atomic import write_text_atomic


def write_block(doc: Path, begin: str, end: str, heading: str, body: str) -> Path:
    """`body` between the `begin` and `end` markers of `doc`, replaced in place (the prose around
    them is the doc's own), or under `heading` at the end of the doc the first time."""
    if not doc.is_file():
        raise MpsimInputError(f"{doc}: no such doc")
    text = doc.read_text(encoding="utf-8")
    block = f"{begin}\n{body}\n{end}"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + f"\n\n{heading}\n\n{block}\n"
    return write_text_atomic(text, doc)


def publish(body: str, doc: Path | None, write: Callable[[Path], Path]) -> int:
    """Print a table command's block, and write it into `doc` (`write(doc)`) when one is given."""
    print(body)
    if doc is not None:
        print(f"wrote {write(doc)}")
    return 0


def run(main: Callable[[], int]) -> int:
    """`main()`, with bad input reported as one line on stderr and exit status 2."""
    try:
        return main()
    except MpsimInputError as exc:
        print(f"mpsim: error: {exc}", file=sys.stderr)
        return 2

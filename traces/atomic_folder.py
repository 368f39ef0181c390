"""A folder of several output files replaced as a whole (`mpsim serve --out`, `evaluate --out`,
`quantize --out`): readers see the previous run's folder or the new one, never a mix of two runs.

The command writes into a temporary sibling folder (`.NAME.PID.*.tmp`); when every file is there it
takes the place of the target (the old folder is moved aside, the new one renamed in, the old one
removed). A failed write leaves the target as it was and no temporary folder; an interrupted run
leaves at most its temporary sibling, which the next run into the same target removes. A target
holding files the command does not write is refused rather than replaced (it is not the command's).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path

from mpsim.traces.atomic import check_output, reason, umask
from mpsim.traces.errors import OutputError
from mpsim.traces.processes import alive


@contextmanager
def atomic_folder(target: str | Path, owned: Collection[str]) -> Iterator[Path]:
    """Yield an empty temporary folder; when the block ends without error it becomes `target`.
    `owned`: the file names the command writes there (anything else in an existing target refuses)."""
    target = check_folder(target, owned)
    tmp = _make_temporary(target)
    try:
        os.chmod(tmp, 0o777 & ~umask())  # mkdtemp's folder is private; the output follows the umask
        try:
            yield tmp
        except OutputError as exc:  # a file inside: name the folder the user gave
            raise OutputError(target, exc.reason) from None
        try:
            _swap(tmp, target)
        except OSError as exc:
            raise OutputError(target, reason(exc, target)) from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def check_folder(target: str | Path, owned: Collection[str]) -> Path:
    """Raise OutputError unless `target` can be replaced by a folder of the `owned` files: what
    check_output checks, and an existing folder holds nothing else (before any work starts)."""
    folder = check_output(target, folder=True)
    if folder.is_symlink():  # replace the folder it points to, not the link
        folder = folder.resolve()
    if folder.is_dir():
        foreign = sorted(set(os.listdir(folder)) - set(owned))
        if foreign:
            raise OutputError(folder, f"it holds files this command does not write ({', '.join(foreign[:5])}"
                                      f"{', ...' if len(foreign) > 5 else ''}); the folder is replaced "
                                      "as a whole: name a new or empty folder")
    return folder


def _make_temporary(target: Path) -> Path:
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale(target)
        return Path(tempfile.mkdtemp(prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp",
                                     dir=target.parent))
    except OSError as exc:
        raise OutputError(target, reason(exc, target)) from None


def _swap(new: Path, target: Path) -> None:
    """`new` takes the place of `target`; if that fails, `target` stays as it was."""
    if not target.exists():
        os.replace(new, target)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.{os.getpid()}.", suffix=".old", dir=target.parent))
    os.replace(target, old / target.name)
    try:
        os.replace(new, target)
    except OSError:
        os.replace(old / target.name, target)
        old.rmdir()
        raise
    shutil.rmtree(old, ignore_errors=True)


def _remove_stale(target: Path) -> None:
    """Temporary siblings of `target` left by runs whose process is gone."""
    for p in target.parent.glob(f".{target.name}.*.*"):
        pid = p.name[len(target.name) + 2:].split(".", 1)[0]
        if p.is_dir() and p.suffix in (".tmp", ".old") and pid.isdigit() and not alive(int(pid)):
            shutil.rmtree(p, ignore_errors=True)

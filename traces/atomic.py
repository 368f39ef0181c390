"""The one atomic file writer: readers see the old file or the whole new one, never a part.

Every file mpsim writes (traces, sweep points and tables, the simulator's memo, timelines, per-launch
results, CSV tables, figures) goes through `atomic_write`: the writer fills a temporary file in the
same folder, which is flushed to disk (fsync) and then replaces the target with `os.replace`. A
write that cannot happen (read-only file system, full disk or file-size limit, a file where a folder
should be) raises OutputError naming the target and leaves no temporary file behind;
`check_output` says so before any work starts where the path alone shows it. Folders of several
files are replaced as a whole by mpsim.traces.atomic_folder.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from mpsim.traces.errors import OutputError

REASONS = {errno.EROFS: "read-only file system", errno.ENOSPC: "no space left on device",
           errno.EDQUOT: "disk quota exceeded", errno.EFBIG: "file too large (full disk or file-size limit)",
           errno.EACCES: "permission denied", errno.EPERM: "operation not permitted"}


def reason(exc: OSError, path: Path) -> str:
    """Why writing `path` failed, in words (a file standing where a folder should be is named)."""
    blocker = file_in_the_way(path)
    if blocker is not None:
        return f"{blocker} is a file, not a folder"
    if isinstance(exc, IsADirectoryError) or path.is_dir():
        return "it is a folder, not a file"
    return REASONS.get(exc.errno or 0, exc.strerror or str(exc) or type(exc).__name__)


def file_in_the_way(path: Path) -> Path | None:
    """The first ancestor of `path` that exists as something other than a folder, if any."""
    for parent in reversed(path.parents):
        if parent.exists() and not parent.is_dir():
            return parent
        if not parent.exists():
            return None
    return None


def check_output(path: str | Path, *, folder: bool = False) -> Path:
    """Raise OutputError now if `path` cannot become a file (or, `folder`, a folder): a file in the
    way, the wrong kind already there, or a read-only / unwritable first existing ancestor."""
    path = Path(path)
    blocker = file_in_the_way(path)
    if blocker is not None:
        raise OutputError(path, f"{blocker} is a file, not a folder")
    if path.exists() and path.is_dir() != folder:
        raise OutputError(path, "it is a file, not a folder" if folder else "it is a folder, not a file")
    base = next(p for p in (path, *path.parents) if p.exists())
    if not os.access(base, os.W_OK):
        readonly = os.statvfs(base).f_flag & os.ST_RDONLY
        raise OutputError(path, "read-only file system" if readonly else f"{base} is not writable")
    return path


def atomic_write(path: str | Path, write: Callable[[str], Any]) -> Path:
    """Call `write(tmp_path)` on a temporary file beside `path`, then move it onto `path`."""
    path = Path(path)
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        write(tmp)
        os.chmod(tmp, 0o666 & ~umask())  # mkstemp's file is private; the output follows the umask
        _fsync(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        raise OutputError(path, reason(exc, path)) from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
    return path


@functools.lru_cache(maxsize=1)
def umask() -> int:
    """This process's umask (read once, without changing it where /proc tells it)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_parquet_atomic(table: pa.Table, path: str | Path, **options: Any) -> Path:
    """`table` as Parquet at `path`; `options` go to pyarrow.parquet.write_table."""
    return atomic_write(path, lambda tmp: pq.write_table(table, tmp, **options))


def write_json_atomic(obj: object, path: str | Path, **options: Any) -> Path:
    """`obj` as JSON at `path`; `options` go to json.dump (indent, ...)."""
    def write(tmp: str) -> None:
        with open(tmp, "w") as fh:
            json.dump(obj, fh, **options)

    return atomic_write(path, write)


def write_text_atomic(text: str, path: str | Path) -> Path:
    return atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def write_csv_atomic(frame: Any, path: str | Path, **options: Any) -> Path:
    """A pandas DataFrame as CSV at `path`; `options` go to DataFrame.to_csv (index=False, ...)."""
    return atomic_write(path, lambda tmp: frame.to_csv(tmp, **options))


def write_figure_atomic(fig: Any, path: str | Path, **options: Any) -> Path:
    """A matplotlib Figure at `path`, in the format its suffix names; `options` go to savefig."""
    fmt = Path(path).suffix.lstrip(".").lower() or None
    return atomic_write(path, lambda tmp: fig.savefig(tmp, format=fmt, **options))

"""One sweep per folder: an advisory lock (DIR/.lock) that records its owner, and workers that die
with the sweep that started them.

The lock is `flock` on DIR/.lock, which the OS releases when the last descriptor of it closes; the
file records the owner's pid while it runs and is emptied on a clean exit. Worker processes close
their inherited copy of the descriptor as they start (`worker_init`) and ask the kernel to kill them
when their parent dies (Linux: prctl(PR_SET_PDEATHSIG); elsewhere a thread that watches the parent),
so `kill` or `kill -9` of a sweep neither leaves workers computing nor holding its folder.

Taking the lock: free with an owner still recorded (a sweep that was killed) -> taken over, with a
message; held while the recorded owner is alive -> "another sweep is running"; held although the
recorded owner is gone (leftover processes of it, e.g. workers of an older mpsim that kept the
descriptor) -> those processes, found by the descriptor they hold, are stopped and the lock taken
over, with a message naming them.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import signal
import sys
import threading
import time
from pathlib import Path

from mpsim.errors import MpsimInputError
from mpsim.traces.processes import alive

PR_SET_PDEATHSIG = 1  # linux/prctl.h
RELEASE_WAIT_S = 10.0  # how long stopped leftover holders may take to let the lock go
WATCH_INTERVAL_S = 1.0  # the parent watch where prctl is not available


def acquire(fd: int, root: Path, lock: Path) -> str | None:
    """Take the lock on `fd` (DIR/.lock open read-write) and record this process as its owner.
    Returns a message when it was taken over from a sweep that is gone; raises when one runs."""
    note = None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        owner = _owner(fd)
        if owner is not None and owner != os.getpid() and not alive(owner):
            note = (f"{root}: took over the lock of a sweep that is gone (pid {owner}); "
                    "its finished points are kept")
    except BlockingIOError:
        note = _take_from_leftovers(fd, root, lock)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return note


def release(fd: int) -> None:
    """Empty the owner record and let the lock go (a clean end)."""
    os.ftruncate(fd, 0)
    fcntl.flock(fd, fcntl.LOCK_UN)


def _take_from_leftovers(fd: int, root: Path, lock: Path) -> str:
    owner = _owner(fd)
    busy = MpsimInputError(f"{root}: another sweep{'' if owner is None else f' (pid {owner})'} is "
                           "running in this folder")
    if owner is None or alive(owner):
        raise busy
    holders = sorted(_holders(lock) - {os.getpid()})
    if _owner(fd) != owner:  # a new sweep took it meanwhile (it records itself at once)
        raise busy
    for pid in holders:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + RELEASE_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                left = holders or "not found"
                raise MpsimInputError(f"{root}: the lock is held by processes left by a sweep that is "
                                      f"gone (pid {owner}): {left}; stop them and rerun") from None
            time.sleep(0.05)
    return (f"{root}: took over the lock of a sweep that is gone (pid {owner}); stopped "
            f"{len(holders)} leftover process(es) of it that still held the folder: {holders}")


def _owner(fd: int) -> int | None:
    text = os.pread(fd, 32, 0).decode(errors="replace").strip()
    return int(text) if text.isdigit() else None


def _holders(lock: Path) -> set[int]:
    """The processes with a descriptor open on `lock` (Linux /proc; empty elsewhere)."""
    target, found = str(lock.resolve()), set()
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            fds = list((proc / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(fd) == target:
                    found.add(int(proc.name))
                    break
            except OSError:
                continue
    return found


def worker_init(lock_fd: int | None, lock: str | None, parent: int) -> None:
    """A sweep worker's first act: let go of the folder's lock (its inherited descriptor, where the
    worker was forked) and die with the sweep `parent` (directly, or with the fork server that
    started it, which exits with the sweep)."""
    if lock_fd is not None and lock is not None:
        with contextlib.suppress(OSError):  # only if the number still names the lock file
            if os.path.samestat(os.fstat(lock_fd), os.stat(lock)):
                os.close(lock_fd)
    direct = os.getppid()
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    else:
        threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    if direct != parent and not alive(parent):  # the sweep died before the request above
        os._exit(1)


def _watch_parent(parent: int) -> None:
    while alive(parent):
        time.sleep(WATCH_INTERVAL_S)
    os._exit(1)

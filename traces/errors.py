"""Errors raised for malformed trace files and rows."""

from __future__ import annotations


class TraceError(ValueError):
    """A trace file, row or column is not what the trace contract says."""


class OutputError(Exception):
    """A file or folder mpsim was asked to write cannot be written there (read-only, full disk, a
    file where a folder should be). `path` is the output the user named; nothing partial is left."""

    def __init__(self, path: object, reason: str) -> None:
        super().__init__(f"cannot write {path}: {reason}")
        self.path, self.reason = path, reason

    def __reduce__(self) -> tuple[type[OutputError], tuple[object, str]]:  # raised in sweep workers
        return OutputError, (self.path, self.reason)

"""Errors raised for malformed trace files and rows."""

from __future__ import annotations


class TraceError(ValueError):
    """A trace file, row or column is not what the trace contract says."""

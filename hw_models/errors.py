"""Errors raised for malformed hardware description files."""

from __future__ import annotations


class HardwareFileError(ValueError):
    """A hardware YAML file is missing a key, has a bad value, or cannot be read."""

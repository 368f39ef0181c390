"""The errors that mean "bad input" (a file, key, row or value a user gave us).

The CLI prints these as one line and exits non-zero; anything else is a bug and keeps its traceback.
Lower layers (traces/, hw_models/) define their own ValueError subclasses because they import
nothing of mpsim; this module gathers them.
"""

from __future__ import annotations

import sys

from mpsim.hw_models.base import UnsupportedDtypeError
from mpsim.hw_models.errors import HardwareFileError
from mpsim.traces.errors import OutputError, TraceError


class MpsimInputError(ValueError):
    """A value given on the command line or in a spec file is not one mpsim accepts."""


USER_ERRORS: tuple[type[BaseException], ...] = (
    MpsimInputError,
    TraceError,
    HardwareFileError,
    UnsupportedDtypeError,  # a rate the hardware file lacks (fp8 on Ampere, fp4 before Blackwell)
    FileNotFoundError,
    IsADirectoryError,
    PermissionError,
    OutputError,
)


def warn(message: str | None) -> None:
    """A warning the user should see, on stderr, in the CLI's own voice (any layer may give one)."""
    if message:
        print(f"mpsim: warning: {message}", file=sys.stderr)

"""Where the published ground truth lives (../shared/groundtruth beside the project root) and a
skip marker for tests that read it: CI always has it; a checkout without it skips with a reason."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GROUNDTRUTH = ROOT.parent / "shared" / "groundtruth"
AIC = GROUNDTRUTH / "aiconfigurator"
VIDUR = GROUNDTRUTH / "vidur"

needs_groundtruth = pytest.mark.skipif(
    not GROUNDTRUTH.is_dir(),
    reason=f"published ground truth not found at {GROUNDTRUTH} (docs/validation.md#the-data)")

"""The launch memo: simulated launches by key, in memory and (optionally) persisted on disk.

Entries live in namespaces, one per (hardware content, simulator parameters, model code): the
namespace is a hash of the HardwareSpec's full content (every number and source of the file it was
loaded from), SimParams.fingerprint(), MODEL_VERSION and `source_fingerprint()`, a hash of the source
of everything that decides a simulated number (the simulator, the roofline, the accounting, the
launch plan and synthesis, the launch configs), so an edit to any of them starts a new namespace and
no stale outcome comes back. The sweep's point keys include the same fingerprint. On disk a
namespace is one JSON file `<cache_dir>/<namespace>.json` mapping key text -> outcome; writes merge
with what is there and replace the file atomically, so concurrent runs at worst recompute. The
default folder is $MPSIM_CACHE_DIR, else ~/.cache/mpsim/sim. Only plain JSON is read back (no
pickles).
The NPU's step model memoizes whole steps the same way (`get_step`/`put_step`: plain JSON column
lists keyed by the step's signature, in `<cache_dir>/<namespace>.steps.json`).
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from mpsim.errors import MpsimInputError
from mpsim.sim.params import SimParams
from mpsim.sim.result import LaunchOutcome
from mpsim.traces.atomic import write_json_atomic

MODEL_VERSION = "gpu-npu-2"  # a readable marker; the source fingerprint decides staleness
# What decides a simulated number: every module of mpsim.sim (GPU and NPU models, the roofline, the
# replay, the parameters, the SASS table), the byte/FLOP accounting, the launch plan, synthesis and
# what they read (policies, models, memory), and the launch configs.
SOURCE_PACKAGES = ("mpsim.sim",)
SOURCE_MODULES = ("mpsim.traces.accounting", "mpsim.launch_plan", "mpsim.synth", "mpsim.policy",
                  "mpsim.models", "mpsim.memory", "mpsim.kernels.launch_config",
                  "mpsim.kernels.launch_base", "mpsim.kernels.external_configs")


def source_files() -> list[Path]:
    """The files whose content `source_fingerprint` hashes, in a fixed order."""
    files: list[Path] = []
    for name in SOURCE_PACKAGES:
        spec = find_spec(name)
        assert spec is not None and spec.submodule_search_locations is not None
        for root in spec.submodule_search_locations:
            files += sorted(Path(root).rglob("*.py"))
    for name in SOURCE_MODULES:
        spec = find_spec(name)
        assert spec is not None and spec.origin is not None
        files.append(Path(spec.origin))
    return files


def fingerprint_files(files: list[Path]) -> str:
    """A hash of the files' names and bytes."""
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


@lru_cache(maxsize=1)
def source_fingerprint() -> str:
    """The hash of the simulator's deciding source (computed once per process)."""
    return fingerprint_files(source_files())


def default_cache_dir() -> Path:
    env = os.environ.get("MPSIM_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "mpsim" / "sim"


def namespace(hw: Any, params: SimParams, model: str) -> str:
    text = f"{model}|{MODEL_VERSION}|{source_fingerprint()}|{params.fingerprint()}|{hw!r}"
    return hashlib.sha256(text.encode()).hexdigest()[:24]


class LaunchMemo:
    """In-memory memo with an optional disk layer. Share one object across runs to reuse entries."""

    def __init__(self, cache_dir: str | Path | None = None) -> None:
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._entries: dict[str, dict[str, LaunchOutcome]] = {}
        self._dirty: set[str] = set()
        self._steps: dict[str, dict[str, dict[str, Any]]] = {}
        self._dirty_steps: set[str] = set()
        self.hits = 0
        self.misses = 0
        self.sim_seconds = 0.0  # wall time spent simulating the misses

    def _space(self, ns: str) -> dict[str, LaunchOutcome]:
        if ns not in self._entries:
            self._entries[ns] = self._load(ns)
        return self._entries[ns]

    def get(self, ns: str, key: str) -> LaunchOutcome | None:
        found = self._space(ns).get(key)
        if found is None:
            self.misses += 1
        else:
            self.hits += 1
        return found

    def put(self, ns: str, key: str, outcome: LaunchOutcome) -> None:
        self._space(ns)[key] = outcome
        self._dirty.add(ns)

    def get_step(self, ns: str, key: str) -> dict[str, Any] | None:
        """A memoized step outcome (plain JSON), or None."""
        if ns not in self._steps:
            self._steps[ns] = self._load_steps(ns)
        found = self._steps[ns].get(key)
        if found is None:
            self.misses += 1
        else:
            self.hits += 1
        return found

    def put_step(self, ns: str, key: str, outcome: dict[str, Any]) -> None:
        self._steps.setdefault(ns, {})[key] = outcome
        self._dirty_steps.add(ns)

    def flush(self) -> None:
        """Write new entries to disk (merged with the file's current content)."""
        if self.cache_dir is None:
            self._dirty.clear()
            self._dirty_steps.clear()
            return
        for ns in sorted(self._dirty):
            merged = {**self._load(ns), **self._entries[ns]}
            write_json_atomic({k: v.as_dict() for k, v in sorted(merged.items())}, self._path(ns))
        for ns in sorted(self._dirty_steps):
            steps = {**self._load_steps(ns), **self._steps[ns]}
            write_json_atomic(dict(sorted(steps.items())), self._path(ns, ".steps.json"))
        self._dirty.clear()
        self._dirty_steps.clear()

    def _path(self, ns: str, suffix: str = ".json") -> Path:
        assert self.cache_dir is not None
        return self.cache_dir / f"{ns}{suffix}"

    def _load_steps(self, ns: str) -> dict[str, dict[str, Any]]:
        if self.cache_dir is None or not self._path(ns, ".steps.json").is_file():
            return {}
        path = self._path(ns, ".steps.json")
        try:
            raw = json.loads(path.read_text())
        except ValueError as exc:
            raise MpsimInputError(f"{path}: not a readable mpsim step memo ({exc}); "
                                  "delete it to rebuild") from None
        if not isinstance(raw, dict) or not all(isinstance(v, dict) for v in raw.values()):
            raise MpsimInputError(f"{path}: not a readable mpsim step memo; delete it to rebuild")
        return raw

    def _load(self, ns: str) -> dict[str, LaunchOutcome]:
        if self.cache_dir is None or not self._path(ns).is_file():
            return {}
        try:
            raw = json.loads(self._path(ns).read_text())
            return {k: LaunchOutcome.from_dict(v) for k, v in raw.items()}
        except (ValueError, TypeError, AttributeError) as exc:
            raise MpsimInputError(f"{self._path(ns)}: not a readable mpsim launch memo ({exc}); "
                                  "delete it to rebuild") from None

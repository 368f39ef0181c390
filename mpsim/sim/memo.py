"""The launch memo: simulated launches by key, in memory and (optionally) persisted on disk.

Entries live in namespaces, one per (hardware content, simulator parameters, model code): the
namespace is a hash of the HardwareSpec's full content (every number and source of the file it was
loaded from), SimParams.fingerprint(), MODEL_VERSION and `source_fingerprint()`, a hash of the source
of everything that decides a simulated number (the simulator, the roofline, the accounting, the
launch plan and synthesis, the launch configs), so an edit to any of them starts a new namespace and
no stale outcome comes back. The sweep's point keys include the same fingerprint. On disk a
namespace is one JSON file `<cache_dir>/<namespace>.json` mapping key text -> {"sum", "outcome"},
`sum` a hash of the key and the outcome; writes merge with what is there and replace the file
atomically, so concurrent runs at worst recompute. The default folder is $MPSIM_CACHE_DIR, else
~/.cache/mpsim/sim. Only plain JSON is read back (no pickles).
The NPU's step model memoizes whole steps the same way (`get_step`/`put_step`: plain JSON column
lists keyed by the step's signature), one file per step, `<cache_dir>/<namespace>.steps/<hash of the
key>.json` holding {"key", "sum", "outcome"}: a step's columns run to thousands of numbers, so a
lookup reads only the steps it asks for and a flush writes only the new ones (one namespace file
of them reached 80 MB in a day's sweeps, read, re-hashed and rewritten whole at every point).
The memo only saves work: an unreadable file, or an entry of the wrong type or whose sum does not
match (edited by hand, damaged), is discarded with a warning and computed again; a memo that cannot
be written (read-only, full disk) is a warning, and the results computed are kept.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any, TypeVar

from mpsim.errors import warn
from mpsim.sim.params import SimParams
from mpsim.sim.result import LaunchOutcome
from mpsim.traces.atomic import write_json_atomic
from mpsim.traces.errors import OutputError

T = TypeVar("T")
_UNSAVED: set[Path] = set()  # memo folders this process could not write to (warned once)

MODEL_VERSION = "gpu-npu-3+cublas-arch-replay"  # a readable marker; the source fingerprint decides staleness
# What decides a simulated number: every module of mpsim.sim (GPU and NPU models, the roofline, the
# replay, the parameters, the SASS table), the byte/FLOP accounting, the launch plan, synthesis and
# what they read (policies, models, memory), the launch configs and every library room's configs and
# row builders (mpsim.library).
SOURCE_PACKAGES = ("mpsim.sim", "mpsim.library")
SOURCE_MODULES = ("mpsim.traces.accounting", "mpsim.launch_plan", "mpsim.synth", "mpsim.policy",
                  "mpsim.models", "mpsim.memory", "mpsim.kernels.launch_config",
                  "mpsim.kernels.launch_config_fp")


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
        self._steps: dict[str, dict[str, dict[str, Any] | None]] = {}  # None: looked up, not on disk
        self._dirty_steps: dict[str, set[str]] = {}
        self._warned: set[Path] = set()
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
        space = self._steps.setdefault(ns, {})
        if key not in space:
            space[key] = self._load_step(ns, key)
        found = space[key]
        if found is None:
            self.misses += 1
        else:
            self.hits += 1
        return found

    def put_step(self, ns: str, key: str, outcome: dict[str, Any]) -> None:
        self._steps.setdefault(ns, {})[key] = outcome
        self._dirty_steps.setdefault(ns, set()).add(key)

    def flush(self) -> None:
        """Write new entries to disk (merged with the file's current content); a write that fails
        is a warning (the results stay in memory, only not cached)."""
        if self.cache_dir is None:
            self._dirty.clear()
            self._dirty_steps.clear()
            return
        for ns in sorted(self._dirty):
            merged = {**self._load(ns), **self._entries[ns]}
            self._save({k: v.as_dict() for k, v in sorted(merged.items())}, self._path(ns))
        for ns, keys in sorted(self._dirty_steps.items()):
            for key in sorted(keys):
                outcome = self._steps[ns][key]
                if outcome is not None:
                    self._save_one({"key": key, "sum": entry_sum(key, outcome), "outcome": outcome},
                                   self._step_path(ns, key))
        self._dirty.clear()
        self._dirty_steps.clear()

    def _save(self, outcomes: dict[str, dict[str, Any]], path: Path) -> None:
        self._save_one({k: {"sum": entry_sum(k, v), "outcome": v} for k, v in outcomes.items()}, path)

    def _save_one(self, sealed: dict[str, Any], path: Path) -> None:
        try:
            write_json_atomic(sealed, path)
        except OutputError as exc:
            if path.parent not in _UNSAVED:  # once per folder and process (a sweep saves per point)
                _UNSAVED.add(path.parent)
                warn(f"the simulator's memo was not saved ({exc}); the results are kept, not cached")

    def _path(self, ns: str) -> Path:
        assert self.cache_dir is not None
        return self.cache_dir / f"{ns}.json"

    def _step_path(self, ns: str, key: str) -> Path:
        assert self.cache_dir is not None
        return self.cache_dir / f"{ns}.steps" / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"

    def _load_step(self, ns: str, key: str) -> dict[str, Any] | None:
        """The step's file, if there is one, it is readable, names this key and its sum matches;
        a damaged one is discarded with a warning (and rewritten when the step is computed again)."""
        if self.cache_dir is None:
            return None
        path = self._step_path(ns, key)
        if not path.is_file():
            return None
        try:
            raw = json.loads(path.read_text())
            if not isinstance(raw, dict) or raw.get("key") != key:
                raise ValueError("not this step's entry")
            if raw.get("sum") != entry_sum(key, raw.get("outcome")):
                raise ValueError("sum does not match")
            return _step(raw["outcome"])
        except (OSError, ValueError, TypeError, KeyError) as exc:
            self._discarded(path, f"a damaged step entry ({exc}) discarded; it is computed again")
            return None

    def _load(self, ns: str) -> dict[str, LaunchOutcome]:
        return self._read(self._path(ns), _launch) if self.cache_dir is not None else {}

    def _read(self, path: Path, parse: Callable[[Any], T]) -> dict[str, T]:
        """The entries of a memo file whose sums match and that `parse` accepts; the others are
        discarded with one warning per file (once per memo)."""
        if not path.is_file():
            return {}
        try:
            raw = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            self._discarded(path, f"unreadable ({exc}); it is rebuilt")
            return {}
        if not isinstance(raw, dict):
            self._discarded(path, "not a memo (a JSON object of entries); it is rebuilt")
            return {}
        out, bad = {}, []
        for key, entry in raw.items():
            try:
                if not isinstance(entry, dict) or entry.get("sum") != entry_sum(key, entry.get("outcome")):
                    raise ValueError("sum does not match")
                out[key] = parse(entry["outcome"])
            except (ValueError, TypeError, KeyError):
                bad.append(key)
        if bad:
            self._discarded(path, f"{len(bad)} of {len(raw)} entries of the wrong type or whose sum does "
                                  "not match (edited or damaged) discarded; they are computed again")
        return out

    def _discarded(self, path: Path, what: str) -> None:
        if path not in self._warned:
            self._warned.add(path)
            warn(f"{path}: {what}")


def entry_sum(key: str, outcome: Any) -> str:
    """The hash a memo entry carries: of its key and its outcome (as JSON)."""
    text = key + "\n" + json.dumps(outcome, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _number(v: Any, name: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise TypeError(f"{name}: expected a number, got {v!r}")
    return float(v)


def _launch(d: Any) -> LaunchOutcome:
    """A launch outcome from a memo entry, every field of its type (else TypeError)."""
    if not isinstance(d, dict) or not isinstance(d.get("util", {}), dict) or not isinstance(
            d.get("bound", ""), str) or not isinstance(d.get("parts", {}), dict):
        raise TypeError("not a launch outcome")
    numbers = {k: _number(v, k) for k, v in d.items() if k not in ("util", "bound", "parts")}
    util = {str(k): _number(v, k) for k, v in (d.get("util") or {}).items()}
    parts = {str(k): _number(v, k) for k, v in (d.get("parts") or {}).items()}
    return LaunchOutcome(**numbers, util=util, bound=d.get("bound", "latency"), parts=parts)


def _step(d: Any) -> dict[str, Any]:
    """A step outcome from a memo entry: columns of numbers as long as its bounds (else TypeError)."""
    if not isinstance(d, dict) or not isinstance(d.get("columns"), dict) or not d["columns"]:
        raise TypeError("not a step outcome")
    bound = d.get("bound")
    if not isinstance(bound, list) or not all(isinstance(b, str) for b in bound):
        raise TypeError("bound: expected a list of names")
    for name, col in d["columns"].items():
        if not isinstance(col, list) or len(col) != len(bound):
            raise TypeError(f"column {name}: expected {len(bound)} numbers")
        if not set(map(type, col)) <= {int, float}:  # what _number accepts, without a call a value
            raise TypeError(f"column {name}: expected numbers")
    _number(d.get("duration_s"), "duration_s")
    return d

#!/usr/bin/env bash
# Download the wheels scripts/gpu-check.sh installs on a GPU machine that has no network (simpy:
# the one package mpsim needs that the device image lacks) into .whl/ (ignored by git: name `.whl`
# in the device tool's `carry`). Run it once on a machine where pip reaches a package index.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEST=${1:-$ROOT/.whl}
PY=${PYTHON:-python3}
mkdir -p "$DEST"
"$PY" -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation py \
    -d "$DEST" "simpy==4.1.1"
# GemLite 0.4.1 (the kit's gemlite step: SGLang's torchao W4A16 kernels, engine-benchmarks E5) as
# its sdist; preparing its metadata imports torch, so no build isolation (optional: a failure here
# leaves the step saying GemLite is missing)
"$PY" -m pip download --no-deps --no-build-isolation -d "$DEST" "gemlite==0.4.1" \
    || echo "gpu-check-wheels: gemlite 0.4.1 not downloaded (the kit's gemlite step will say so)"
ls -l "$DEST"

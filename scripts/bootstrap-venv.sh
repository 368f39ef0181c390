#!/usr/bin/env bash
# Create .venv and install mpsim with its dev and cluster extras, from nothing.
# Torch: a torch the machine already has is kept (the venv sees system site-packages); otherwise a
# machine without an NVIDIA driver gets the CPU build (torch==2.13.0, which pip takes from local disk
# here; see docs/setup.md), and a machine with one gets pip's default (CUDA) build.
set -euo pipefail
PY=${PYTHON:-python3}
VENV=${VENV:-.venv}

if [ ! -x "$VENV/bin/python" ]; then
    if "$PY" -c "import torch" >/dev/null 2>&1; then
        echo "bootstrap: keeping the torch this machine has ($("$PY" -c 'import torch; print(torch.__version__)'))"
        "$PY" -m venv --system-site-packages "$VENV"
    else
        "$PY" -m venv "$VENV"
    fi
fi
PIP=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
if ! "$VENV/bin/python" -c "import torch" >/dev/null 2>&1; then
    if command -v nvidia-smi >/dev/null 2>&1; then
        echo "bootstrap: NVIDIA driver found, installing pip's default torch build"
        "${PIP[@]}" torch
    else
        echo "bootstrap: no NVIDIA driver, installing the CPU build torch==2.13.0"
        "${PIP[@]}" torch==2.13.0
    fi
fi
"${PIP[@]}" -e ".[dev,cluster]"
"$VENV/bin/python" -c "import mpsim, torch, triton, numba, simpy; print('bootstrap: mpsim', mpsim.__version__, '| torch', torch.__version__, '| triton', triton.__version__)"

#!/usr/bin/env bash
# Create .venv and install rooftop into it. Idempotent: a stamp file skips the work when
# pyproject.toml has not changed.
#  - a machine whose python3 already has a CUDA build of torch (a GPU machine) gets a venv that
#    sees the system packages, so that torch is used as it is;
#  - elsewhere torch comes from `pip install torch==2.13.0` (a CPU build).
set -euo pipefail
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
stamp="$VENV/.rooftop-installed"
if [ -f "$stamp" ] && [ "$stamp" -nt pyproject.toml ]; then exit 0; fi
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "rooftop needs Python >= 3.11" >&2; exit 2; }
if "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.version.cuda else 1)' 2>/dev/null; then
  echo "using the CUDA torch of $PYTHON"
  "$PYTHON" -m venv --system-site-packages "$VENV"
else
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q "torch==2.13.0"
fi
"$VENV/bin/python" -m pip install -q -e ".[dev]"
touch "$stamp"

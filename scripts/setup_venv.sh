#!/usr/bin/env bash
# Create the virtual environment and install rooftop into it. Idempotent: a stamp file skips the
# work when pyproject.toml has not changed since the last install.
#
# Where torch comes from:
#  - when $PYTHON already has a CUDA build of torch (a GPU machine), the new environment reuses
#    it. A plain interpreter or a conda env is reused through --system-site-packages. A virtual
#    environment (sys.prefix != sys.base_prefix) cannot be: --system-site-packages would show
#    its *base* interpreter's packages, not its own, so the new environment gets a .pth file that
#    adds the parent environment's site-packages folders after its own.
#  - elsewhere torch comes from `pip install torch==2.13.0` (a CPU build).
#
# Settings, all environment variables:
#   VENV=DIR            the environment to create (default .venv)
#   PYTHON=EXE          the interpreter it is made from (default python3)
#   WHEELS=DIR          install offline from this folder of wheels (pip --no-index --find-links DIR),
#                       for machines that cannot reach PyPI; rooftop itself is then built without
#                       build isolation, with setuptools from DIR or from the reused environment
#   REUSE_TORCH=auto|1|0  auto (default): reuse $PYTHON's environment when its torch is a CUDA
#                       build; 1: reuse it whatever it holds; 0: never (fresh environment, pip torch)
#   INSTALL=COMMAND     replaces the step that installs rooftop (default: pip install -e ".[dev]");
#                       it runs with the new environment first on PATH, and INSTALL=: installs nothing
set -euo pipefail
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
WHEELS=${WHEELS:-}
REUSE_TORCH=${REUSE_TORCH:-auto}
stamp="$VENV/.rooftop-installed"

# bubblewrap, the candidates' sandbox: installed where this user can (root with apt-get), else said how
if ! command -v bwrap >/dev/null 2>&1 && [ -z "${ROOFTOP_BWRAP:-}" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing bubblewrap (the sandbox candidates run in)"
    apt-get install -y -q bubblewrap >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 && \
      apt-get install -y -q bubblewrap >/dev/null 2>&1; } || echo "could not install bubblewrap with apt-get" >&2
  fi
  command -v bwrap >/dev/null 2>&1 || echo "bubblewrap is not installed: eval and demo will run candidates" \
    "without a sandbox, and serve, batch, the env and agent runs refuse to unless given --sandbox none;" \
    "install it with: sudo apt-get install bubblewrap" >&2
fi
if [ -f "$stamp" ] && [ "$stamp" -nt pyproject.toml ]; then exit 0; fi

"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "rooftop needs Python >= 3.11" >&2; exit 2; }
pip_opts=(-q)
if [ -n "$WHEELS" ]; then
  [ -d "$WHEELS" ] || { echo "WHEELS=$WHEELS: no such folder (expected a folder of .whl files)" >&2; exit 2; }
  pip_opts+=(--no-index --find-links "$(cd "$WHEELS" && pwd)")
fi
pip_install() { "$VENV/bin/python" -m pip install "${pip_opts[@]}" "$@"; }

cuda_torch='import torch, sys; sys.exit(0 if torch.version.cuda else 1)'
case "$REUSE_TORCH" in
  auto) if "$PYTHON" -c "$cuda_torch" 2>/dev/null; then reuse=1; else reuse=0; fi ;;
  1 | 0) reuse=$REUSE_TORCH ;;
  *) echo "REUSE_TORCH=$REUSE_TORCH: expected auto, 1 or 0" >&2; exit 2 ;;
esac

if [ "$reuse" = 1 ]; then
  # the parent environment's site-packages folders when $PYTHON is a virtual environment, else nothing
  parent_sites=$("$PYTHON" -c 'import site, sys
if sys.prefix != sys.base_prefix:
    print("\n".join(site.getsitepackages()))')
  if [ -n "$parent_sites" ]; then
    echo "reusing the packages of the environment $("$PYTHON" -c 'import sys; print(sys.prefix)')"
    "$PYTHON" -m venv "$VENV"
    # addsitedir (not a bare path line) so that the parent's own .pth files are read too; it
    # appends, so the new environment's packages come first
    PARENT_SITES=$parent_sites "$VENV/bin/python" -c 'import os, sysconfig
from pathlib import Path
sites = [s for s in os.environ["PARENT_SITES"].splitlines() if s]
lines = [f"import site, sys; {s!r} in sys.path or site.addsitedir({s!r})\n" for s in sites]
Path(sysconfig.get_path("purelib"), "_rooftop_parent_env.pth").write_text("".join(lines))'
  else
    echo "reusing the packages of $PYTHON"
    "$PYTHON" -m venv --system-site-packages "$VENV"
  fi
  # the setuptools that the venv module bundles (older than rooftop's build needs) would hide the
  # reused one, which an offline build (WHEELS) relies on
  own_site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
  if [ -d "$own_site/setuptools" ] && "$PYTHON" -c 'import setuptools' 2>/dev/null; then
    "$VENV/bin/python" -m pip uninstall -q -y setuptools
  fi
  if [ "$REUSE_TORCH" = auto ] && ! "$VENV/bin/python" -c "$cuda_torch" 2>/dev/null; then
    echo "$VENV does not see the CUDA torch of $PYTHON; remove $VENV, or set REUSE_TORCH=0" >&2
    exit 1
  fi
else
  "$PYTHON" -m venv "$VENV"
  [ -n "$WHEELS" ] || "$VENV/bin/python" -m pip install -q --upgrade pip
  pip_install "torch==2.13.0"
fi

if [ -n "${INSTALL:-}" ]; then
  (VIRTUAL_ENV=$(cd "$VENV" && pwd) && export VIRTUAL_ENV PATH="$VIRTUAL_ENV/bin:$PATH" && eval "$INSTALL")
elif [ -n "$WHEELS" ]; then
  # without build isolation pip fetches nothing to build rooftop: the backend comes from here
  pip_install "setuptools>=77"
  pip_install --no-build-isolation -e ".[dev]"
else
  pip_install -e ".[dev]"
fi
touch "$stamp"

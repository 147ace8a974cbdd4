#!/usr/bin/env bash
# Set up hcq for use: a virtual environment in .venv with hcq installed (editable) and its runtime dependencies.
# On a machine without python3 or its venv module (a fresh Debian 12), python3 and python3-venv are installed first
# (through sudo when not root).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! "$PY" -c "import ensurepip, venv" >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo"; else
    echo "error: $PY cannot create a virtual environment and there is no sudo: install python3 and python3-venv" >&2
    exit 1
  fi
  $SUDO apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -q python3 python3-venv >/dev/null
  PY=python3
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e .
# bytecode for the package's modules now, so that the first commands (and every command where the environment sets
# PYTHONDONTWRITEBYTECODE) do not compile ~100 modules from source (~0.2 s); the caches are git-ignored
.venv/bin/python -m compileall -q -j 0 __init__.py config.py errors.py autogen cli compiler drivers mockgpu smi >/dev/null

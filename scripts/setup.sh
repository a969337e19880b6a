#!/usr/bin/env bash
# Set up symgrad in a virtual environment, .venv/ beside this checkout's pyproject.toml.
#
#   bash scripts/setup.sh          # symgrad, torch, pytest and matplotlib: generate, test and plot Functions
#   bash scripts/setup.sh --dev    # also the development tools (pytest, ruff, black, mypy, ...)
#
# torch: a torch already in .venv is kept. Otherwise, on a machine without an NVIDIA GPU,
# the CPU build is installed (from PyTorch's CPU index where it is reachable; a few hundred
# MB instead of several GB). With a GPU, install the build for your CUDA version into .venv
# first (https://pytorch.org/get-started/locally/), or set SYMGRAD_TORCH, e.g.
#   SYMGRAD_TORCH="torch==2.13.0" bash scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# The plot extra (matplotlib) is what `symgrad show SPEC --plot`, which the README points to, needs.
extras="[plot]"
case "${1:-}" in
  --dev) extras="[dev,plot]" ;;
  "") ;;
  *) echo "usage: bash scripts/setup.sh [--dev]" >&2; exit 2 ;;
esac

python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $("$python" --version)"
  "$python" -m venv .venv
fi
pip=(.venv/bin/python -m pip -q --disable-pip-version-check)
"${pip[@]}" install --upgrade pip

# The torch release CI tests with; any torch>=2.4 works.
torch_spec=${SYMGRAD_TORCH:-torch==2.13.0}
if .venv/bin/python -c "import torch" 2>/dev/null; then
  echo "setup: keeping torch $(.venv/bin/python -c 'import torch; print(torch.__version__)')"
elif command -v nvidia-smi >/dev/null 2>&1; then
  echo "setup: NVIDIA GPU found: installing $torch_spec from PyPI (a CUDA build)"
  "${pip[@]}" install "$torch_spec" numpy
else
  echo "setup: no NVIDIA GPU: installing $torch_spec, CPU build"
  "${pip[@]}" install --retries 0 --timeout 10 \
    --extra-index-url https://download.pytorch.org/whl/cpu "$torch_spec" numpy
fi

echo "setup: installing symgrad$extras from $(pwd)"
"${pip[@]}" install -e ".$extras" pytest  # pytest runs the generated tests
echo "setup: done; symgrad is .venv/bin/symgrad ($(.venv/bin/symgrad --version))"

#!/usr/bin/env bash
# Installs the nanovllm Python package as a user does, `pip install .`, into its own virtual
# environment (.venv-package/, made by install-deps.sh), and runs tests/python against it:
# the API, its errors, Ctrl-C, and nano-vllm's example.py and bench.py unchanged. Outputs are
# compared with the `nanovllm` command of the CMake build (build/apps/nanovllm).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
VENV=${PACKAGE_VENV:-.venv-package}
if [ ! -x "$VENV/bin/python" ]; then
  echo "test-python-package.sh: no $VENV/; run scripts/install-deps.sh first" >&2
  exit 1
fi

# The CMake build has compiled the CUDA backend already; the package's second
# compile of the engine leaves it out to save CI time (a plain `pip install .` includes it
# when a CUDA toolkit is present).
start=$(date +%s)
CMAKE_BUILD_PARALLEL_LEVEL=$JOBS "$VENV/bin/python" -m pip install -q \
  -C cmake.define.NANOVLLM_CUDA=OFF .
echo "pip install .: $(($(date +%s) - start)) s"

start=$(date +%s)
NANOVLLM_BIN="$PWD/$BUILD_DIR/apps/nanovllm" "$VENV/bin/python" -m pytest -q -p no:cacheprovider \
  -rA tests/python
echo "Python package tests: $(($(date +%s) - start)) s"

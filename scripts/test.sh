#!/usr/bin/env bash
# Configures, builds and runs every test that needs no GPU, then installs the Python package
# and tests it. The CUDA backend is compiled too when a CUDA toolkit is installed.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
PYTHON=${PYTHON:-$PWD/.venv/bin/python}

cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE="$PYTHON"
cmake --build "$BUILD_DIR" -j "$JOBS"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS"
bash scripts/test-python-package.sh

#!/usr/bin/env bash
# Configures, builds and runs every test that needs no GPU, then installs the Python package
# and tests it. The CUDA backend is compiled too when a CUDA toolkit is installed. Then, unless
# SANITIZE=0, the same tests run again under AddressSanitizer and UndefinedBehaviorSanitizer
# (CPU only, clang, in build-sanitize/, which also holds the libFuzzer targets) and each fuzz
# target runs for FUZZ_SECONDS (scripts/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
PYTHON=${PYTHON:-$PWD/.venv/bin/python}

cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE="$PYTHON"
cmake --build "$BUILD_DIR" -j "$JOBS"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS"
bash scripts/test-python-package.sh

if [ "${SANITIZE:-1}" != 0 ]; then
  SANITIZE_BUILD_DIR=${SANITIZE_BUILD_DIR:-build-sanitize}
  start=$SECONDS
  cmake -S . -B "$SANITIZE_BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DNANOVLLM_CUDA=OFF -DNANOVLLM_FUZZ=ON \
    -DPython3_EXECUTABLE="$PYTHON"
  cmake --build "$SANITIZE_BUILD_DIR" -j "$JOBS"
  echo "sanitizer build: $((SECONDS - start)) s"
  start=$SECONDS
  ctest --test-dir "$SANITIZE_BUILD_DIR" --output-on-failure -j "$JOBS"
  echo "tests under ASan/UBSan: $((SECONDS - start)) s"
  start=$SECONDS
  BUILD_DIR="$SANITIZE_BUILD_DIR" JOBS="$JOBS" bash scripts/fuzz.sh
  echo "fuzzing: $((SECONDS - start)) s"
fi

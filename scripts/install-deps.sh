#!/usr/bin/env bash
# Installs what building and testing nanovllm needs on Debian/Ubuntu: compilers and libraries
# from apt (clang, its sanitizer and libFuzzer runtimes and llvm-symbolizer for the sanitizer and
# fuzzing build), and the Python packages the reference tests compare against in .venv/.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

$SUDO apt-get update -qq
# libFuzzer's and the sanitizers' runtimes: on Debian 12 they are in libclang-rt-14-dev, which
# clang does not pull in; libclang-rt-dev names the default clang's. Where apt has no such name
# they are expected to come with clang itself.
clang_runtimes=()
if apt-cache show libclang-rt-dev >/dev/null 2>&1; then clang_runtimes=(libclang-rt-dev); fi
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  build-essential cmake pkg-config git \
  nlohmann-json3-dev libxxhash-dev libfmt-dev libcli11-dev libpcre2-dev libutf8proc-dev libboost-dev \
  libgtest-dev libgmock-dev python3 python3-dev python3-venv python3-pip \
  clang "${clang_runtimes[@]}" llvm >/dev/null

if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -r tools/requirements-test.txt
# CUTLASS's headers for the CUDA backend's grouped GEMMs, which CMake finds through .venv's
# Python: the headers alone (the package's Python dependencies, scipy and cuda-python among
# them, serve its code generator, which the build does not use).
.venv/bin/python -m pip install -q --no-deps nvidia-cutlass==4.2.0.0
# FlashInfer's headers (and the CCCL they need) for Hopper's prefill attention, found the same
# way; the package's dependencies (PyTorch among them) serve its Python side, not the headers.
.venv/bin/python -m pip install -q --no-deps flashinfer-python==0.7.2.post1

# The Python package is tested as users install it, `pip install .` into a virtual environment
# of its own (scripts/test-python-package.sh), with the same test packages.
if [ ! -x .venv-package/bin/python ]; then python3 -m venv .venv-package; fi
.venv-package/bin/python -m pip install -q --upgrade pip
.venv-package/bin/python -m pip install -q -r tools/requirements-test.txt
echo "dependencies installed"

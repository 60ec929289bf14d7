#!/usr/bin/env bash
# Builds the GPU binaries here and gathers what scripts/gpu-checks.sh needs on a GPU machine
# that has the CUDA driver and toolkit libraries but none of this project's build dependencies:
# .gpu/bin (the binaries, with nanovllm_timeline: nanovllm built with -DNANOVLLM_TIMELINE=ON),
# .gpu/lib (their non-system shared libraries), .gpu/peer (a copy of
# nano-vllm, to benchmark it in the same run) and .gpu/whl (guidellm's wheels for the serving
# benchmark, tools/requirements-bench-gpu.txt); and .gpu/bundle.tar.xz, bin and lib
# compressed to a fraction of their size, which scripts/gpu-checks.sh unpacks where .gpu/bin is
# missing, for machines that take only so much of the tree. .gpu/ is ignored by git.
#   usage: scripts/gpu-pack.sh [PEER_DIR]   (PEER_DIR defaults to ../shared/peer)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
peer=${1:-../shared/peer}
targets="nanovllm cuda_kernels_test engine_golden_test attention_bench decode_ops_bench launch_chain_bench
  allreduce_bench linear_bench cublaslt_algo_bench moe_bench prefill_attention_bench bandwidth_bench"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE="$PWD/.venv/bin/python" >/dev/null
# CUPTI's kernel trace (tools/kernel_trace), where the toolkit has CUPTI.
build_targets=$(cmake --build "$BUILD_DIR" --target help)
if grep -qx '\.\.\. kernel_trace' <<<"$build_targets"; then targets+=" kernel_trace"; fi
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target $targets
TIMELINE_BUILD_DIR=${TIMELINE_BUILD_DIR:-$BUILD_DIR-timeline}
cmake -S . -B "$TIMELINE_BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DNANOVLLM_TIMELINE=ON \
  -DNANOVLLM_TESTS=OFF -DPython3_EXECUTABLE="$PWD/.venv/bin/python" >/dev/null
cmake --build "$TIMELINE_BUILD_DIR" -j "${JOBS:-$(nproc)}" --target nanovllm
rm -rf .gpu/bin .gpu/lib .gpu/peer && mkdir -p .gpu/bin .gpu/lib
cp "$BUILD_DIR/apps/nanovllm" "$BUILD_DIR/tests/kernels/cuda_kernels_test" \
  "$BUILD_DIR/tests/e2e/engine_golden_test" "$BUILD_DIR/tests/kernels/attention_bench" \
  "$BUILD_DIR/tests/kernels/decode_ops_bench" "$BUILD_DIR/tests/kernels/launch_chain_bench" \
  "$BUILD_DIR/tests/kernels/allreduce_bench" "$BUILD_DIR/tests/kernels/linear_bench" \
  "$BUILD_DIR/tests/kernels/cublaslt_algo_bench" \
  "$BUILD_DIR/tests/kernels/moe_bench" "$BUILD_DIR/tests/kernels/prefill_attention_bench" \
  "$BUILD_DIR/tests/kernels/bandwidth_bench" .gpu/bin/
cp "$TIMELINE_BUILD_DIR/apps/nanovllm" .gpu/bin/nanovllm_timeline
strip --strip-debug .gpu/bin/*
# The trace library goes with the libraries (with CUPTI, which ldd finds below).
if [ -f "$BUILD_DIR/tools/kernel_trace/libkernel_trace.so" ]; then
  cp "$BUILD_DIR/tools/kernel_trace/libkernel_trace.so" .gpu/lib/
fi
# Shared libraries from this machine's packages (fmt, PCRE2, utf8proc, xxhash, ...), not the
# C/C++ runtime or CUDA, which the GPU machine has (NCCL there comes with PyTorch: gpu-checks.sh
# puts it on the library path).
for binary in .gpu/bin/* .gpu/lib/libkernel_trace.so; do
  [ -f "$binary" ] || continue
  ldd "$binary" | awk '/=> \//{print $3}'
done | sort -u | grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux|libpthread|libdl|librt|libcuda|libcudart|libcublas|libcublasLt|libnccl)[.-]' |
  xargs -r -I{} cp -L {} .gpu/lib/
if [ -d "$peer" ]; then cp -r "$peer" .gpu/peer; fi
rm -f .gpu/bundle.tar.xz && tar -C .gpu -cJf .gpu/bundle.tar.xz bin lib
# The GPU machine has Python 3.12 and no internet. A fresh download replaces .gpu/whl (one
# version of each package); without one, wheels already there are kept.
whl=$(mktemp -d)
if python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$whl" \
  -r tools/requirements-bench-gpu.txt; then
  rm -rf .gpu/whl && mv "$whl" .gpu/whl
else
  rm -rf "$whl"
  echo "warning: could not download guidellm's wheels; .gpu/whl is left as it was" >&2
fi
du -sh .gpu .gpu/*

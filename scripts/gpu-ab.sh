#!/usr/bin/env bash
# A/B comparison on a GPU machine: runs `nanovllm bench` once per variant, ROUNDS times over
# (the variants alternating, so that drift between runs of the machine falls on all alike), and
# prints each variant's output tok/s and their medians. A variant is a space-separated list of
# environment assignments ('-' for none); a variant may also name another binary of .gpu/bin
# with BIN=name.
#   usage: scripts/gpu-ab.sh [-r ROUNDS] VARIANT... -- BENCH_ARGS...
#   e.g.:  scripts/gpu-ab.sh - BIN=nanovllm_b -- --model /tmp/qwen3-0.6b-random --batch-1
set -uo pipefail
cd "$(dirname "$0")/.."
rounds=3
if [ "${1:-}" = "-r" ]; then rounds=$2; shift 2; fi
variants=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do variants+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
if [ ${#variants[@]} -eq 0 ] || [ $# -eq 0 ]; then
  sed -n '2,8p' "$0" >&2
  exit 2
fi
if [ ! -d .gpu/bin ] && [ -f .gpu/bundle.tar.xz ]; then tar -C .gpu -xJf .gpu/bundle.tar.xz; fi
export LD_LIBRARY_PATH=$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
log_dir=${LOG_DIR:-/tmp/gpu-ab}
mkdir -p "$log_dir"
declare -A results
for ((round = 1; round <= rounds; round++)); do
  for i in "${!variants[@]}"; do
    read -ra assignments <<<"${variants[$i]}"
    [ "${assignments[0]}" = "-" ] && assignments=()
    binary=nanovllm
    environment=()
    for a in "${assignments[@]}"; do
      if [[ $a == BIN=* ]]; then binary=${a#BIN=}; else environment+=("$a"); fi
    done
    log="$log_dir/variant${i}_round${round}.log"
    env "${environment[@]}" ".gpu/bin/$binary" bench "$@" >"$log" 2>&1
    # bench.py's line ("Total: ..., Throughput: T tok/s") or batch-1's ("batch-1 decode: ... T tok/s")
    tps=$(grep -E '^(Total|batch-1 decode)' "$log" | grep -oE '[0-9.]+ ?tok/s' | tail -n 1 |
      grep -oE '^[0-9.]+')
    results[$i]+="${tps:-FAIL} "
    echo "round $round, variant $i (${variants[$i]}): ${tps:-FAIL, see $log}"
  done
done
echo
echo "=== A/B: nanovllm bench $* ==="
for i in "${!variants[@]}"; do
  median=$(printf '%s\n' ${results[$i]} | grep -v FAIL | sort -g |
    awk '{v[NR] = $1} END {if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}')
  printf '%-48s median %-10s runs: %s\n' "${variants[$i]}" "${median:-none}" "${results[$i]}"
done

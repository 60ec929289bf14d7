#!/usr/bin/env bash
# Every GPU check and benchmark in one call, on a GPU machine, over what scripts/gpu-pack.sh
# gathered in .gpu/ (.gpu/bin, or .gpu/bundle.tar.xz unpacked); prints a table last. Logs go to $LOG_DIR (default /tmp/gpu-checks); when
# $OUT is set they are also packed into $OUT/gpu-checks-logs.tar.gz with the table in
# $OUT/gpu-checks.txt.
#   usage: scripts/gpu-checks.sh [SECTION...]
#   sections: ops golden sanitizer hf attention bench timeline serve peer (default: all, in
#   that order), and, on a machine of several GPUs, tp (the goldens and hf_compare over 2 and 4
#   ranks) and tp_bench (allreduce_bench, then TP_SHAPE, 8b by default, at TP_RANKS ranks,
#   "1 2 4" by default, beside nano-vllm at PEER_TP, 2 by default); gemm (linear_bench: every
#   linear of the 0.6B to 32B shapes against copy bandwidth and bf16 peak), moe (the CUDA MoE
#   ops' tests, then moe_bench: Qwen3-30B-A3B's experts against copy bandwidth and bf16 peak)
#   and families (Qwen2, Llama and Qwen3-MoE: their fixtures against transformers, their
#   released shapes' benches) run when named, and so does long (32 prompts of 8k to 30k tokens
#   on the 0.6B shape, beside nano-vllm; the 8B shape beside nano-vllm is tp_bench with
#   TP_RANKS=1 PEER_TP=1), and so does energy (bandwidth_bench, then the 8B shape's bench.py
#   workload and the long prompts' prefill, ours and nano-vllm's in turn ENERGY_ROUNDS times,
#   each under tools/gpu_energy.py)
set -uo pipefail
cd "$(dirname "$0")/.."
LOG_DIR=${LOG_DIR:-/tmp/gpu-checks}
mkdir -p "$LOG_DIR"
sections=${*:-ops golden sanitizer hf attention bench timeline serve peer}
bin=$PWD/.gpu/bin
if [ ! -d "$bin" ] && [ -f .gpu/bundle.tar.xz ]; then tar -C .gpu -xJf .gpu/bundle.tar.xz; fi
# NCCL (tensor parallelism on GPUs) is PyTorch's; its NVLink multicast stays off (the machines'
# notes say why).
nccl_lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH=$PWD/.gpu/lib:/usr/local/cuda/lib64:${nccl_lib:+$nccl_lib:}${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
export PYTHONUNBUFFERED=1
# The test binaries find their fixtures by the source path they were built from.
data_dir=$(strings "$bin/engine_golden_test" | grep -m1 -oE '^/[^ ]*/tests/data$' || true)
if [ -n "$data_dir" ] && [ ! -e "$data_dir" ]; then
  mkdir -p "$(dirname "$(dirname "$data_dir")")" && ln -sfn "$PWD" "$(dirname "$(dirname "$data_dir")")"
fi
model=${MODEL:-/tmp/qwen3-0.6b-random}
tiny=tests/data/models/qwen3-tiny-tied
rows=()
record() { rows+=("$(printf '%-34s %s' "$1" "$2")"); }
has() { [[ " $sections " == *" $1 "* ]]; }
# Runs a command with its output in $LOG_DIR/<name>.log; records pass/FAIL with the tail of a failure.
check() {
  local name=$1; shift
  if "$@" >"$LOG_DIR/$name.log" 2>&1; then record "$name" pass; else
    record "$name" "FAIL (exit $?, see $name.log)"; tail -n 30 "$LOG_DIR/$name.log"; fi
}

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$LOG_DIR/gpu.txt"

# The directory holding the peer's flash_attn (FlashAttention-3), its library unpacked once.
peer_flash_attn() {
  local work=${TMPDIR:-/tmp}/nano-vllm-peer
  if [ ! -f "$work/flash_attn/_vllm_fa3_C.abi3.so" ]; then
    mkdir -p "$work" && cp -r .gpu/peer/lib/flash_attn "$work/" &&
      python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" \
        "$work/flash_attn/_vllm_fa3_C.abi3.so.xz" "$work/flash_attn/_vllm_fa3_C.abi3.so"
  fi
  echo "$work"
}

if has ops; then
  check cuda_kernels_test "$bin/cuda_kernels_test" --gtest_brief=1
fi
if has golden; then
  check golden_f32_eager env NANOVLLM_TEST_DEVICE=cuda NANOVLLM_TEST_ENFORCE_EAGER=1 \
    "$bin/engine_golden_test" --gtest_brief=1
  check golden_f32_graphs env NANOVLLM_TEST_DEVICE=cuda "$bin/engine_golden_test" --gtest_brief=1
fi
if has sanitizer || has hf || has bench || has timeline || has serve || has peer || has tp || has long ||
  has energy; then
  python3 .gpu/peer/make_qwen3_checkpoint.py "$model" "$PWD/tests/data/qwen3-tokenizer" \
    >"$LOG_DIR/checkpoint.log" 2>&1 || { echo "making $model failed"; cat "$LOG_DIR/checkpoint.log"; }
fi
if has sanitizer; then
  # bf16 with decode graphs, f32 eagerly: every kernel and both launch paths.
  for variant in bfloat16: float32:--enforce-eager; do
    dtype=${variant%%:*} eager=${variant#*:}
    check "memcheck_${dtype}${eager:+_eager}" timeout 150 compute-sanitizer --tool memcheck --error-exitcode 1 \
      "$bin/nanovllm" generate --model $tiny --device cuda --dtype $dtype $eager \
      --num-kvcache-blocks 64 --kvcache-block-size 16 --max-num-seqs 8 --max-tokens 12 \
      --prompt "Hello" --prompt "A longer prompt about paged attention and its block tables." \
      --no-progress --output "$LOG_DIR/memcheck_$dtype.jsonl"
  done
  # One sequence of a Qwen3-0.6B-shaped model: the kernels of one-row decode (the fused
  # linears and MLP), which the tiny model's widths do not take.
  check memcheck_bfloat16_batch1 timeout 300 compute-sanitizer --tool memcheck --error-exitcode 1 \
    "$bin/nanovllm" generate --model "$model" --device cuda --dtype bfloat16 --enforce-eager \
    --num-kvcache-blocks 4 --max-model-len 1024 --max-num-seqs 1 --max-tokens 6 --prompt "Hello" \
    --no-progress --output "$LOG_DIR/memcheck_batch1.jsonl"
fi
if has hf; then
  check hf_compare_bf16 python3 tools/hf_compare.py --model "$model" --nanovllm "$bin/nanovllm" \
    --report "$LOG_DIR/hf_compare.json"
  grep -E '^(prompt|greedy|hf_compare)' "$LOG_DIR/hf_compare_bf16.log"
  # The same prompts one at a time: decode at one row, through the fused linears and MLP.
  check hf_compare_bf16_batch1 python3 tools/hf_compare.py --model "$model" \
    --nanovllm "$bin/nanovllm" --report "$LOG_DIR/hf_compare_batch1.json" -- --max-num-seqs 1
  grep -E '^(prompt|greedy|hf_compare)' "$LOG_DIR/hf_compare_bf16_batch1.log"
fi
gpus=$(nvidia-smi -L | wc -l)
if has tp; then
  # Float32 goldens over the GPUs through NCCL (engine_golden_test runs 2, 4 and 8 ranks where
  # that many GPUs are visible), eagerly and with decode graphs, and bf16 against transformers.
  check golden_tp_f32_eager env NANOVLLM_TEST_DEVICE=cuda NANOVLLM_TEST_ENFORCE_EAGER=1 \
    "$bin/engine_golden_test" --gtest_filter='*TensorParallel*'
  check golden_tp_f32_graphs env NANOVLLM_TEST_DEVICE=cuda "$bin/engine_golden_test" \
    --gtest_filter='*TensorParallel*'
  grep -h 'not run' "$LOG_DIR/golden_tp_f32_eager.log" || true
  for tp in 2 4; do
    [ "$tp" -le "$gpus" ] || continue
    check "hf_compare_bf16_tp$tp" python3 tools/hf_compare.py --model "$model" \
      --nanovllm "$bin/nanovllm" --report "$LOG_DIR/hf_compare_tp$tp.json" -- \
      --tensor-parallel-size "$tp"
    grep -E '^(greedy|hf_compare)' "$LOG_DIR/hf_compare_bf16_tp$tp.log"
    # One sequence at a time: the one-row kernels, the all-reduce adding into the residual.
    check "hf_compare_bf16_batch1_tp$tp" python3 tools/hf_compare.py --model "$model" \
      --nanovllm "$bin/nanovllm" --report "$LOG_DIR/hf_compare_batch1_tp$tp.json" -- \
      --tensor-parallel-size "$tp" --max-num-seqs 1
    grep -E '^(greedy|hf_compare)' "$LOG_DIR/hf_compare_bf16_batch1_tp$tp.log"
  done
fi
if has tp_bench; then
  if [ "$gpus" -ge 2 ]; then
    check allreduce_bench "$bin/allreduce_bench"
    cat "$LOG_DIR/allreduce_bench.log"
  fi
  # bench.py's workload and batch-1 on a larger shape at several ranks, and nano-vllm's.
  shape=${TP_SHAPE:-8b}
  peer_tp=${PEER_TP:-2}
  big=/tmp/qwen3-$shape-random
  python3 .gpu/peer/make_qwen3_shape.py "$shape" "$big" "$PWD/tests/data/qwen3-tokenizer" \
    >"$LOG_DIR/checkpoint_$shape.log" 2>&1 || cat "$LOG_DIR/checkpoint_$shape.log"
  for tp in ${TP_RANKS:-1 2 4}; do
    [ "$tp" -le "$gpus" ] || continue
    check "bench_${shape}_tp$tp" "$bin/nanovllm" bench --model "$big" --tensor-parallel-size "$tp"
    check "bench_batch1_${shape}_tp$tp" "$bin/nanovllm" bench --model "$big" --batch-1 \
      --tensor-parallel-size "$tp"
    for log in "bench_${shape}_tp$tp" "bench_batch1_${shape}_tp$tp"; do
      while read -r line; do record "  nanovllm $log" "$line"; done \
        < <(grep -E '^(Total|batch-1|start-up)' "$LOG_DIR/$log.log")
    done
  done
  work=$(peer_flash_attn)
  (cd .gpu/peer && PYTHONPATH=$work:$PWD/nano-vllm timeout 400 python3 workload.py "$big" 256 100 \
    1024 100 1024 4096 "$peer_tp") >"$LOG_DIR/peer_tp$peer_tp.log" 2>&1
  while read -r line; do record "  peer" "$line"; done \
    < <(grep -E '^nano-vllm' "$LOG_DIR/peer_tp$peer_tp.log")
fi
if has attention; then
  check attention_bench "$bin/attention_bench"
  tail -n 15 "$LOG_DIR/attention_bench.log"
  # The other geometries of the served shapes: Qwen3-8B's, and Qwen2.5-7B's and
  # Qwen3-30B-A3B's 4 kv heads.
  for heads in "32 8" "28 4" "32 4"; do
    check "attention_bench_${heads// /_}" "$bin/attention_bench" $heads
    grep -E 'decode attention:|  B ' "$LOG_DIR/attention_bench_${heads// /_}.log"
  done
  check decode_ops_bench "$bin/decode_ops_bench"
  cat "$LOG_DIR/decode_ops_bench.log"
  check launch_chain_bench "$bin/launch_chain_bench"
  cat "$LOG_DIR/launch_chain_bench.log"
  # Prefill attention on long prompts, and FlashAttention-3 on the same shapes.
  check prefill_attention_bench "$bin/prefill_attention_bench"
  check fa3_attention_bench env PYTHONPATH="$(peer_flash_attn)" python3 tools/fa3_attention_bench.py
  cat "$LOG_DIR/prefill_attention_bench.log" "$LOG_DIR/fa3_attention_bench.log"
fi
if has gemm; then
  check linear_bench "$bin/linear_bench"
  cat "$LOG_DIR/linear_bench.log"
fi
if has moe; then
  check cuda_kernels_test_moe "$bin/cuda_kernels_test" --gtest_brief=1 --gtest_filter='*Moe*'
  check moe_bench "$bin/moe_bench"
  cat "$LOG_DIR/moe_bench.log"
fi
if has long; then
  # Long prompts on the Qwen3-0.6B shape: 32 prompts of 8,000 to 30,000 tokens, prefill alone
  # (1 output token each) and with 256 output tokens each, ours and nano-vllm's on the same
  # checkpoint (../shared/peer/workload.py draws the same prompts).
  work=$(peer_flash_attn)
  for out_len in 1 256; do
    check "bench_long_out$out_len" "$bin/nanovllm" bench --model "$model" --num-seqs 32 \
      --min-input-len 8000 --max-input-len 30000 --min-output-len "$out_len" \
      --max-output-len "$out_len" --max-model-len 32768
    (cd .gpu/peer && PYTHONPATH=$work:$PWD/nano-vllm timeout 400 python3 workload.py "$model" 32 \
      8000 30000 "$out_len" "$out_len" 32768) >"$LOG_DIR/peer_long_out$out_len.log" 2>&1
    while read -r line; do record "  nanovllm long, $out_len out" "$line"; done \
      < <(grep -E '^(Total|start-up)' "$LOG_DIR/bench_long_out$out_len.log")
    while read -r line; do record "  peer long, $out_len out" "$line"; done \
      < <(grep -E '^nano-vllm' "$LOG_DIR/peer_long_out$out_len.log")
  done
fi
if has energy; then
  # What the GPU spends: streaming on constant bytes (the floors' copy) and on random bf16,
  # cool and sustained; then the joules of each engine's timed workload, the engines in turn.
  check bandwidth_bench "$bin/bandwidth_bench"
  cat "$LOG_DIR/bandwidth_bench.log"
  big=/tmp/qwen3-8b-random
  python3 .gpu/peer/make_qwen3_shape.py 8b "$big" "$PWD/tests/data/qwen3-tokenizer" \
    >"$LOG_DIR/checkpoint_8b.log" 2>&1 || cat "$LOG_DIR/checkpoint_8b.log"
  work=$(peer_flash_attn)
  peer=(env PYTHONPATH="$work:$PWD/.gpu/peer/nano-vllm" timeout 400 python3 .gpu/peer/workload.py)
  long=(--num-seqs 32 --min-input-len 8000 --max-input-len 30000 --min-output-len 1
    --max-output-len 1 --max-model-len 32768)
  for ((round = 1; round <= ${ENERGY_ROUNDS:-2}; round++)); do
    for workload in 8b long; do
      for engine in ours peer; do
        case "$workload $engine" in
          "8b ours") command=("$bin/nanovllm" bench --model "$big") ;;
          "8b peer") command=("${peer[@]}" "$big" 256 100 1024 100 1024 4096 1) ;;
          "long ours") command=("$bin/nanovllm" bench --model "$model" "${long[@]}") ;;
          "long peer") command=("${peer[@]}" "$model" 32 8000 30000 1 1 32768) ;;
        esac
        name="energy_${workload}_${engine}_$round"
        check "$name" python3 tools/gpu_energy.py --label "$workload $engine" \
          --json "$LOG_DIR/$name.json" -- "${command[@]}"
        while read -r line; do record "  $name" "$line" && echo "$line"; done \
          < <(grep -E '^energy [^,]*:' "$LOG_DIR/$name.log")
      done
    done
  done
fi
if has families; then
  # The other architectures: each tiny fixture in bf16 against transformers, then bench.py's
  # workload and batch-1 on the released shapes of tests/data/configs with random weights
  # (FAMILY_SHAPES; FAMILY_TP ranks), each with its floor (tools/bench_floor.py, FLOOR_ARGS).
  for fixture in qwen2-tiny llama-tiny qwen3-moe-tiny; do
    check "hf_compare_bf16_$fixture" python3 tools/hf_compare.py --model "tests/data/models/$fixture" \
      --nanovllm "$bin/nanovllm" --report "$LOG_DIR/hf_compare_$fixture.json"
    grep -E '^(greedy|hf_compare)' "$LOG_DIR/hf_compare_bf16_$fixture.log"
  done
  # The copy bandwidth measured on each kind (device notes): 3.0 TB/s on an H100, 4.3 on an H200.
  default_floor=$(grep -q H200 "$LOG_DIR/gpu.txt" && echo "--bandwidth 4.3" || echo "--bandwidth 3.0")
  read -ra floor_args <<<"${FLOOR_ARGS:-$default_floor}"
  for shape in ${FAMILY_SHAPES:-qwen2.5-7b-instruct llama-3.1-8b-instruct qwen3-30b-a3b}; do
    config=tests/data/configs/$shape
    flags=(--model "$config" --load-format dummy --tensor-parallel-size "${FAMILY_TP:-1}")
    check "bench_$shape" "$bin/nanovllm" bench "${flags[@]}"
    check "bench_batch1_$shape" "$bin/nanovllm" bench "${flags[@]}" --batch-1
    seconds=$(grep -m1 -oE '^Total: .*Time: [0-9.]+' "$LOG_DIR/bench_$shape.log" | grep -oE '[0-9.]+$')
    tok_s=$(grep -m1 -oE '^batch-1 decode: .* = [0-9.]+' "$LOG_DIR/bench_batch1_$shape.log" |
      grep -oE '[0-9.]+$')
    python3 tools/bench_floor.py "$config/config.json" --ranks "${FAMILY_TP:-1}" "${floor_args[@]}" \
      ${seconds:+--bench-seconds "$seconds"} ${tok_s:+--batch1-tok-s "$tok_s"} \
      >"$LOG_DIR/floor_$shape.log" 2>&1
    for log in "bench_$shape" "bench_batch1_$shape"; do
      while read -r line; do record "  nanovllm $log" "$line"; done \
        < <(grep -E '^(Total|batch-1|start-up)' "$LOG_DIR/$log.log")
    done
    while read -r line; do record "  floor $shape" "$line"; done < <(grep -E 'measured' "$LOG_DIR/floor_$shape.log")
  done
fi
if has bench; then
  check bench "$bin/nanovllm" bench --model "$model"
  check bench_batch1 "$bin/nanovllm" bench --model "$model" --batch-1
  # The same two with each decode step planned only once the step before has returned.
  check bench_sync "$bin/nanovllm" bench --model "$model" --no-async-scheduling
  check bench_batch1_sync "$bin/nanovllm" bench --model "$model" --batch-1 --no-async-scheduling
  for log in bench bench_batch1 bench_sync bench_batch1_sync; do
    while read -r line; do record "  nanovllm $log" "$line"; done \
      < <(grep -E '^(Total|batch-1|start-up)' "$LOG_DIR/$log.log")
  done
fi
if has timeline; then
  # The batch-1 bench under the timeline build: where the last decode steps' time goes between
  # kernels (tools/timeline_summary.py). The file goes to $OUT too.
  check timeline_batch1 env NANOVLLM_TIMELINE_OUT="$LOG_DIR/timeline_batch1.bin" \
    "$bin/nanovllm_timeline" bench --model "$model" --batch-1
  check timeline_summary python3 tools/timeline_summary.py "$LOG_DIR/timeline_batch1.bin"
  cat "$LOG_DIR/timeline_summary.log"
  if [ -n "${OUT:-}" ] && [ -f "$LOG_DIR/timeline_batch1.bin" ]; then
    cp "$LOG_DIR/timeline_batch1.bin" "$OUT/"
  fi
fi
if has serve; then
  # `nanovllm serve` under guidellm (scripts/serve-bench.sh) at SERVE_RATES requests/s for
  # SERVE_SECONDS each, with SERVE_FLAGS for the server. The machine has no internet: guidellm and the packages its image lacks
  # come as wheels in .gpu/whl (scripts/gpu-pack.sh), installed apart and put on PYTHONPATH for
  # this section alone. The JSON report goes to $OUT too.
  site=/tmp/gpu-checks-site
  if ! compgen -G ".gpu/whl/*.whl" >/dev/null; then
    record serve_bench "FAIL (no wheels in .gpu/whl: scripts/gpu-pack.sh fetches them)"
  elif ! { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$site" .gpu/whl/*.whl && PYTHONPATH="$site" python3 -c 'import guidellm.__main__'; } \
    >"$LOG_DIR/serve_wheels.log" 2>&1; then
    record serve_bench "FAIL (guidellm from .gpu/whl does not import, see serve_wheels.log)"
    tail -n 30 "$LOG_DIR/serve_wheels.log"
  else
    read -ra serve_flags <<<"${SERVE_FLAGS:---device cuda --dtype bfloat16}"
    check serve_bench env PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" \
      RATES="${SERVE_RATES:-10,40,100}" SECONDS_PER_RATE="${SERVE_SECONDS:-20}" \
      NANOVLLM_BIN="$bin/nanovllm" REPORT="$LOG_DIR/serve-bench.json" \
      timeout 420 scripts/serve-bench.sh "$model" "${serve_flags[@]}"
    while read -r line; do record "  serve" "$line"; done \
      < <(grep -E '^rate .* req/s: ' "$LOG_DIR/serve_bench.log")
    if [ -n "${OUT:-}" ] && [ -f "$LOG_DIR/serve-bench.json" ]; then
      cp "$LOG_DIR/serve-bench.json" "$OUT/"
    fi
  fi
fi
if has peer; then
  (cd .gpu/peer && bash run.sh "$model" "$PWD/../../tests/data/qwen3-tokenizer") >"$LOG_DIR/peer.log" 2>&1
  while read -r line; do record "  peer" "$line"; done < <(grep -E '^nano-vllm' "$LOG_DIR/peer.log")
fi
{
  echo
  echo "=== GPU checks ($(head -n1 "$LOG_DIR/gpu.txt")) ==="
  printf '%s\n' "${rows[@]}"
} | tee "$LOG_DIR/summary.txt"
if [ -n "${OUT:-}" ]; then
  cp "$LOG_DIR/summary.txt" "$OUT/gpu-checks.txt"
  tar czf "$OUT/gpu-checks-logs.tar.gz" -C "$LOG_DIR" .
fi

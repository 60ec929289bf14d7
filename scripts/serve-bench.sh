#!/usr/bin/env bash
# The serving benchmark of docs/BENCHMARKS.md: starts `nanovllm serve` on MODEL_DIR, runs
# guidellm against it at constant request rates over synthetic prompts, prints guidellm's tables
# and keeps its JSON report. Runs the same on a GPU machine (the engine picks the device).
#
#   scripts/serve-bench.sh MODEL_DIR [extra `nanovllm serve` flags...]
#
# RATES (requests/s, comma-separated), PROMPT_TOKENS, OUTPUT_TOKENS, SECONDS (per rate) and
# NANOVLLM_BIN override the defaults below. guidellm goes into .venv-bench/ on first use.
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL=${1:?usage: scripts/serve-bench.sh MODEL_DIR [serve flags...]}
shift
RATES=${RATES:-0.5,1,2}
PROMPT_TOKENS=${PROMPT_TOKENS:-128}
OUTPUT_TOKENS=${OUTPUT_TOKENS:-64}
SECONDS_PER_RATE=${SECONDS:-30}
BIN=${NANOVLLM_BIN:-build/apps/nanovllm}
REPORT=${REPORT:-build/serve-bench.json}

if [ ! -x .venv-bench/bin/guidellm ]; then
  python3 -m venv .venv-bench
  .venv-bench/bin/python -m pip install -q -r tools/requirements-bench.txt
fi

LOG=$(mktemp)
"$BIN" serve --model "$MODEL" --port 0 --served-model-name bench "$@" >"$LOG" 2>&1 &
SERVER=$!
trap 'kill -INT $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true; rm -f "$LOG"' EXIT
URL=""
for _ in $(seq 600); do
  URL=$(grep -o 'http://[0-9.]*:[0-9]*' "$LOG" | head -n1 || true)
  [ -n "$URL" ] && break
  kill -0 $SERVER 2>/dev/null || { cat "$LOG"; exit 1; }
  sleep 0.5
done
[ -n "$URL" ] || { echo "the server did not start"; cat "$LOG"; exit 1; }
echo "serving $MODEL at $URL"

# Each rate runs for SECONDS_PER_RATE; guidellm prints TTFT, ITL and request-rate percentiles.
IFS=, read -ra RATE_LIST <<<"$RATES"
for RATE in "${RATE_LIST[@]}"; do
  .venv-bench/bin/guidellm run \
    --backend "kind=openai_http,target=$URL,model=bench" \
    --profile "kind=constant,rate=$RATE" \
    --constraint "kind=max_duration,seconds=$SECONDS_PER_RATE" \
    --tokenizer "kind=huggingface_auto,model=$MODEL" \
    --data "kind=synthetic_text,prompt_tokens=$PROMPT_TOKENS,output_tokens=$OUTPUT_TOKENS" \
    --output "kind=json,path=${REPORT%.json}-rate$RATE.json" \
    --disable-console-interactive
done

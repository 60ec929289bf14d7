#!/usr/bin/env bash
# The serving benchmark of docs/BENCHMARKS.md: starts `nanovllm serve` on MODEL_DIR, runs
# guidellm against it at constant request rates over synthetic prompts, prints guidellm's tables
# and a one-line summary per rate (tools/guidellm_summary.py), and keeps guidellm's JSON report.
# Runs the same on a GPU machine (pass `--device cuda` among the serve flags to insist on it).
#
#   scripts/serve-bench.sh MODEL_DIR [extra `nanovllm serve` flags...]
#
# RATES (requests/s, comma-separated), PROMPT_TOKENS, OUTPUT_TOKENS, SECONDS_PER_RATE,
# NANOVLLM_BIN and REPORT override the defaults below. guidellm is `$PYTHON -m guidellm` when
# that imports it (PYTHON defaults to python3; a machine without internet brings it as wheels on
# PYTHONPATH, see scripts/gpu-checks.sh), else it goes into .venv-bench/ on first use. Nothing
# is downloaded at benchmark time: the tokenizer comes from MODEL_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL=${1:?usage: scripts/serve-bench.sh MODEL_DIR [serve flags...]}
shift
RATES=${RATES:-0.5,1,2}
PROMPT_TOKENS=${PROMPT_TOKENS:-128}
OUTPUT_TOKENS=${OUTPUT_TOKENS:-64}
# Not SECONDS: bash counts seconds in that variable, so it is never unset.
SECONDS_PER_RATE=${SECONDS_PER_RATE:-30}
BIN=${NANOVLLM_BIN:-build/apps/nanovllm}
REPORT=${REPORT:-build/serve-bench.json}
PYTHON=${PYTHON:-python3}

if "$PYTHON" -c 'import guidellm' 2>/dev/null; then
  GUIDELLM=("$PYTHON" -m guidellm)
else
  if [ ! -x .venv-bench/bin/guidellm ]; then
    python3 -m venv .venv-bench
    .venv-bench/bin/python -m pip install -q -r tools/requirements-bench.txt
  fi
  GUIDELLM=(.venv-bench/bin/guidellm)
fi
# The tokenizer is a local directory; never reach for the Hub.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1

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

# One guidellm run, one benchmark per rate of SECONDS_PER_RATE each (guidellm starts up once);
# full request records are kept for a sample of 100 per benchmark to bound the report's size,
# while the latency statistics cover every request.
mkdir -p "$(dirname "$REPORT")"
"${GUIDELLM[@]}" run \
  --backend "kind=openai_http,target=$URL,model=bench" \
  --profile "kind=constant" --override profile.rate "$RATES" \
  --constraint "kind=max_duration,seconds=$SECONDS_PER_RATE" \
  --tokenizer "kind=huggingface_auto,model=$MODEL" \
  --data "kind=synthetic_text,prompt_tokens=$PROMPT_TOKENS,output_tokens=$OUTPUT_TOKENS" \
  --metrics "kind=generative,sample_size=100" \
  --output "kind=json,path=$REPORT" \
  --disable-console-interactive
echo "report: $REPORT"
python3 tools/guidellm_summary.py "$REPORT"

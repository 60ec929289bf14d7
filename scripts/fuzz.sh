#!/usr/bin/env bash
# Runs every libFuzzer target of a NANOVLLM_FUZZ build (AddressSanitizer and
# UndefinedBehaviorSanitizer on) for FUZZ_SECONDS each, starting from its seed corpus in
# tests/fuzz/corpus/<target>, several targets at once. Inputs libFuzzer finds go to a scratch
# corpus, so the repository is left as it was. A crash or timeout fails the run and leaves the
# input under $FUZZ_ARTIFACTS: fix the bug, then add the input to
# tests/fuzz/regressions/<target>/, where the normal tests replay it.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build-sanitize}
FUZZ_SECONDS=${FUZZ_SECONDS:-30}
JOBS=${JOBS:-$(nproc)}
FUZZ_ARTIFACTS=${FUZZ_ARTIFACTS:-$BUILD_DIR/fuzz-artifacts}

binaries=("$BUILD_DIR"/tests/fuzz/*_fuzzer)
if [ ! -x "${binaries[0]}" ]; then
  echo "no fuzz targets in $BUILD_DIR/tests/fuzz (configure with -DNANOVLLM_FUZZ=ON)" >&2
  exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$FUZZ_ARTIFACTS"

# One target: its log in $work/<target>.log, its exit status in $work/<target>.status.
fuzz_one() {
  local binary=$1 target
  target=$(basename "$binary" _fuzzer)
  mkdir -p "$work/$target"
  local options=()
  case $target in
    chat_template) options=(-dict=tests/fuzz/dicts/jinja.dict) ;;
    tokenizer_codec) ;;
    # What clients send: up to 1 MiB, deep enough to nest tens of thousands of levels.
    request_json) options=(-dict=tests/fuzz/dicts/json.dict -max_len=1048576) ;;
    http_request) options=(-dict=tests/fuzz/dicts/http.dict -max_len=1048576) ;;
    *) options=(-dict=tests/fuzz/dicts/json.dict) ;;
  esac
  set +e
  "$binary" -max_total_time="$FUZZ_SECONDS" -timeout=20 -rss_limit_mb=2560 \
    -artifact_prefix="$FUZZ_ARTIFACTS/$target-" "${options[@]}" \
    "$work/$target" "tests/fuzz/corpus/$target" >"$work/$target.log" 2>&1
  echo $? >"$work/$target.status"
}

running=0
for binary in "${binaries[@]}"; do
  fuzz_one "$binary" &
  running=$((running + 1))
  if [ "$running" -ge "$JOBS" ]; then
    wait -n
    running=$((running - 1))
  fi
done
wait

status=0
for binary in "${binaries[@]}"; do
  target=$(basename "$binary" _fuzzer)
  if [ "$(cat "$work/$target.status")" = 0 ]; then
    runs=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$work/$target.log" | tail -1)
    echo "fuzz $target: ${runs:-done}s, no crash"
  else
    status=1
    echo "fuzz $target: FAILED; the input is in $FUZZ_ARTIFACTS/$target-*" >&2
    tail -n 60 "$work/$target.log" >&2
  fi
done
exit $status

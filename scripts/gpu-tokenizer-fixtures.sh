#!/usr/bin/env bash
# One call on the GPU machine (it has tokenizers and transformers; no network) for issue 28's text
# side:
#   1. scripts/make_tokenizer_fixtures.py: trains the byte-level BPE fixtures with `tokenizers`,
#      records tokenizers' and transformers' ids for the multilingual test set, and renders every
#      family chat template with apply_chat_template; copies what it wrote to $OUT/fixtures/
#      (commit it as tests/fixtures/tokenizer_json/ and tests/fixtures/chat_templates/reference.json);
#   2. builds the text tests on the CPU (no CUDA needed) and runs those that compare with the new
#      references (tokenizer.json ones skip where libpcre2-dev is missing: then they run in CI).
# Logs go to $OUT/logs.tgz; a short table is printed last.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
OUT=${OUT:-$ROOT/gpu-tokenizer-out}
BUILD=${GPU_TOKENIZER_BUILD:-$ROOT/build-text}
LOGS=$(mktemp -d)
mkdir -p "$OUT"
[ -d /opt/torch/.venv/bin ] && export PATH="/opt/torch/.venv/bin:$PATH"
export TUNABLEOP_SOURCE_DIR=$ROOT
start=$(date +%s)
stamp() { echo "[$(($(date +%s) - start))s] $*"; }
results=()
record() { results+=("$(printf '%-58s %s' "$1" "$2")"); }

stamp "fixtures"
if python3 scripts/make_tokenizer_fixtures.py >"$LOGS/fixtures.log" 2>&1; then
  mkdir -p "$OUT/fixtures/chat_templates"
  cp -r tests/fixtures/tokenizer_json "$OUT/fixtures/"
  cp tests/fixtures/chat_templates/reference.json "$OUT/fixtures/chat_templates/"
  cat "$LOGS/fixtures.log"
  record "fixtures (scripts/make_tokenizer_fixtures.py)" "made: $OUT/fixtures"
else
  tail -30 "$LOGS/fixtures.log"
  record "fixtures (scripts/make_tokenizer_fixtures.py)" "FAILED (fixtures.log)"
fi

stamp "configure + build (CPU)"
if cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTUNABLEOP_WITH_CUDA=OFF >"$LOGS/configure.log" 2>&1 &&
  ninja -C "$BUILD" test_llm_text >"$LOGS/build.log" 2>&1; then
  grep -E "tunableop: (PCRE2|utf8proc|SentencePiece)" "$LOGS/configure.log"
  stamp "reference tests"
  "$BUILD/tests/llm/text/test_llm_text" --gtest_filter='TokenizerJsonReference.*:ChatTemplate.*:Jinja.*' \
    >"$LOGS/tests.log" 2>&1
  record "C++ against the references" "$(grep -E '^\[  (PASSED|FAILED) ' "$LOGS/tests.log" | tr '\n' ' ')"
  record "  skipped (no PCRE2 here: they run in CI)" "$(grep -c '^\[  SKIPPED \] [A-Z]' "$LOGS/tests.log")"
  grep -E "Failure|Which is|FAILED" "$LOGS/tests.log" | head -20
else
  grep -E "error|Error" "$LOGS/configure.log" "$LOGS/build.log" | head -10
  record "C++ build" "FAILED (configure.log, build.log)"
fi

tar -czf "$OUT/logs.tgz" -C "$LOGS" . 2>/dev/null
stamp "done"
printf '%s\n' "${results[@]}"

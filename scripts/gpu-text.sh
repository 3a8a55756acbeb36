#!/usr/bin/env bash
# One call on a GPU machine for the text side of `tunableop llm` (issue 15):
#   1. builds the Hugging Face text fixture (scripts/make_llm_text_fixture.py: torch +
#      transformers + sentencepiece, CPU, fp32) into tests/fixtures/llm/llama_spm and copies it
#      to $OUT/llama_spm (commit that folder);
#   2. configures for sm_90 and builds the CLI and the text tests;
#   3. runs the text tests (GPU sampling ones included; those needing SentencePiece in C++ skip
#      where libsentencepiece-dev is missing, as on the GPU machine);
#   4. checks the CLI on CUDA with prompts as ids: a seed reproduces, top-k 1 is greedy, graph
#      and eager decode sample alike, the fixture's greedy ids come out in fp32;
#   5. times greedy against sampled generation on Gemma-2B's shape (vocab 256000: the host
#      sampler's cost per token).
# Logs go to $OUT/logs.tgz; a short table is printed last.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
OUT=${OUT:-$ROOT/gpu-text-out}
BUILD=${GPU_TEXT_BUILD:-$ROOT/build}
LOGS=$(mktemp -d)
mkdir -p "$OUT"
[ -d /opt/torch/.venv/bin ] && export PATH="$PATH:/opt/torch/.venv/bin"
export TUNABLEOP_SOURCE_DIR=$ROOT
start=$(date +%s)
stamp() { echo "[$(($(date +%s) - start))s] $*"; }
results=()
record() { results+=("$(printf '%-58s %s' "$1" "$2")"); }

stamp "fixture"
if python3 scripts/make_llm_text_fixture.py --out tests/fixtures/llm >"$LOGS/fixture.log" 2>&1; then
  cp -r tests/fixtures/llm/llama_spm "$OUT/llama_spm"
  record "HF text fixture (tests/fixtures/llm/llama_spm)" "made: $(head -1 "$LOGS/fixture.log" | cut -c1-60)"
else
  tail -20 "$LOGS/fixture.log"
  record "HF text fixture" "FAILED (fixture.log)"
fi

stamp "configure + build"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$LOGS/configure.log" 2>&1 ||
  { tail -30 "$LOGS/configure.log"; echo "gpu-text: configure failed"; exit 1; }
grep -E "tunableop:" "$LOGS/configure.log"
ninja -C "$BUILD" tunableop_cli test_llm_text test_llm_text_cuda test_tools_llm >"$LOGS/build.log" 2>&1 ||
  { grep -E "FAILED|error" "$LOGS/build.log" | head -20; echo "gpu-text: build failed"; exit 1; }
T="$BUILD/tools/tunableop"

stamp "tests"
ctest --test-dir "$BUILD" -R "LlmCudaSampling|TextSession|GenerationLoop|Sampler\.|SpecialTokens|TextStream|Tokenizer\.|LlmCommandText" \
  --timeout 300 --output-on-failure >"$LOGS/ctest.log" 2>&1
record "ctest (text tests, GPU sampling included)" "$(grep -E "tests passed|tests failed" "$LOGS/ctest.log" | tail -1)"
skipped=$(grep -c "\*\*\*Skipped" "$LOGS/ctest.log")
record "  of which skipped (no SentencePiece in C++ here, ...)" "$skipped"
grep -E "^\s*[0-9]+/[0-9]+ Test.*(Failed|Timeout|SEGFAULT)" "$LOGS/ctest.log" | head -10

stamp "CLI on CUDA"
gen() { "$T" llm --device cuda --model builtin:tiny --mode generate --prompt-ids 1,5,17,300 --max-new-tokens 48 \
  --ignore-eos "$@" 2>>"$LOGS/cli.log"; }
check() {  # name, command output A, command output B, want (same|differ)
  if [ -z "$2" ]; then record "$1" "FAILED (no output, cli.log)"
  elif [ "$4" = same ] && [ "$2" = "$3" ]; then record "$1" "PASS"
  elif [ "$4" = differ ] && [ "$2" != "$3" ]; then record "$1" "PASS"
  else record "$1" "FAILED: $2 vs $3"; fi
}
a=$(gen --temperature 0.8 --top-p 0.95 --seed 7); b=$(gen --temperature 0.8 --top-p 0.95 --seed 7)
c=$(gen --temperature 0.8 --top-p 0.95 --seed 8); e=$(gen --temperature 0.8 --top-p 0.95 --seed 7 --no-cuda-graph)
g=$(gen); k=$(gen --top-k 1 --temperature 1.5 --seed 3)
check "cuda bf16: same seed, same ids" "$a" "$b" same
check "cuda bf16: other seed, other ids" "$a" "$c" differ
check "cuda bf16: graph and eager decode sample alike" "$a" "$e" same
check "cuda bf16: top-k 1 equals greedy" "$k" "$g" same
if [ -f tests/fixtures/llm/llama_spm/reference_text.json ]; then
  read -r ids want < <(python3 -c '
import json; c = json.load(open("tests/fixtures/llm/llama_spm/reference_text.json"))["cases"][0]
print(",".join(map(str, c["prompt_ids"])), ",".join(map(str, c["greedy_ids"])))')
  got=$("$T" llm --device cuda --dtype fp32 --model tests/fixtures/llm/llama_spm --mode generate --prompt-ids "$ids" \
    --max-new-tokens 16 --ignore-eos 2>>"$LOGS/cli.log")
  check "cuda fp32: HF fixture greedy ids via the CLI" "$got" "$want" same
fi
if "$T" llm --device cuda --model builtin:tiny --max-new-tokens 16 --iterations 2 >"$LOGS/bench.txt" 2>&1 &&
  grep -q "Tokens/second" "$LOGS/bench.txt"; then
  record "cuda: benchmark path unchanged (runs, prints Tokens/second)" "PASS"
else
  record "cuda: benchmark path" "FAILED (bench.txt)"
fi

stamp "host sampler cost on Gemma-2B's shape"
rate() {
  "$T" llm --device cuda --model builtin:gemma-2b --mode generate --prompt-len 8 --max-new-tokens 256 --ignore-eos \
    "$@" 2>&1 >/dev/null | grep -oE "[0-9.]+ tokens/s" | tail -1
}
rate >/dev/null  # warm-up (device weights, cuBLAS)
record "gemma-2b bf16 decode, greedy (device argmax)" "$(rate)"
record "gemma-2b bf16 decode, sampled T 0.8 top-p 0.95 (host)" "$(rate --temperature 0.8 --top-p 0.95 --seed 1)"
record "gemma-2b bf16 decode, sampled T 0.8 top-k 40 (host)" "$(rate --temperature 0.8 --top-k 40 --seed 1)"

stamp "done"
tar czf "$OUT/logs.tgz" -C "$LOGS" . && rm -rf "$LOGS"
echo
printf '%s\n' "${results[@]}"

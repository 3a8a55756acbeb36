#!/usr/bin/env bash
# One device call for issue 33's GPU findings: builds for sm_90, runs the GPU tests of tuning
# memory (CudaTuningMemory: most of the device held by the test; fewer rotating copies, a problem
# that does not fit tried once, recorded, Default serving it), the interposer's exit-time and
# cases programs, then the run that stalled: llama-2-7b at batch 128 with a paged cache and
# --tune (its prefill attention problem asked cudaMalloc for 69 GB on every call). It must finish
# and say "cannot tune ... here" once per problem that does not fit. Logs under $OUT; a short
# table last.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/gpu-robust-out}
BUILD=${GPU_CHECK_BUILD:-$ROOT/build}
mkdir -p "$OUT"
start=$(date +%s)
stamp() { echo "[$(($(date +%s) - start))s] $*"; }

stamp "build"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$OUT/configure.log" 2>&1 ||
  { tail -20 "$OUT/configure.log"; exit 1; }
ninja -C "$BUILD" -k 0 tunableop_cli test_cuda_gemm test_ops_framework tunableop_preload tunableop_interpose \
  interpose_exit_threads_program interpose_cases_program >"$OUT/build.log" 2>&1 ||
  grep -E "FAILED|error" "$OUT/build.log" | head -20

stamp "tests"
ctest --test-dir "$BUILD" -R 'CudaTuningMemory|TuningMemory|interpose\.(exit_threads|cases)' --timeout 600 \
  --output-on-failure >"$OUT/ctest.log" 2>&1
tests=$(grep -E "tests passed|tests failed" "$OUT/ctest.log" | tail -1)

stamp "llama-2-7b batch 128 --tune"
t0=$(date +%s)
TUNABLEOP_FILENAME="$OUT/robust_results_%d.csv" TUNABLEOP_UNTUNED_FILENAME="$OUT/robust_untuned_%d.csv" \
  timeout 1800 "$BUILD/tools/tunableop" llm --device cuda --model builtin:llama-2-7b --batch 128 --prompt-len 256 \
  --max-new-tokens 256 --kv-cache paged --tune --verbose 1 >"$OUT/llama_b128.txt" 2>&1
rc=$?
took=$(($(date +%s) - t0))
notes=$(grep -c "cannot tune .* here" "$OUT/llama_b128.txt")
distinct=$(grep -o "cannot tune [^ ]* here" "$OUT/llama_b128.txt" | sort -u | wc -l)
failed=$(grep -c "cudaMalloc\|tuning .* failed" "$OUT/llama_b128.txt")
tar czf "$OUT/robust_logs.tgz" -C "$OUT" --exclude='*.tgz' . 2>/dev/null
stamp "done"

echo "== tests: $tests"
grep -E "^\s*[0-9]+/[0-9]+ Test" "$OUT/ctest.log" | sed 's/^ *//'
echo "== llama-2-7b, batch 128, paged, --tune"
printf "%-34s %s\n" "exit code" "$rc" "wall seconds" "$took" "'cannot tune ... here' lines" "$notes" \
  "distinct problems not tuned" "$distinct" "cudaMalloc / failed-tuning lines" "$failed"
grep -E "Tokens/second|TTFT|TPOT" "$OUT/llama_b128.txt" | head -6
echo "(pass: exit code 0, lines = distinct problems (each said once), no cudaMalloc failures)"

#!/usr/bin/env bash
# One device call for the LLM engine: make the Hugging Face fixtures (torch + transformers are
# on the GPU machine, not here), build, run the LLM tests (CPU and GPU) against them, print greedy
# ids of the real-shaped models (to compare builds), then seed Example 2 on the engine (Gemma-2B and Llama-2-7B shapes, bf16, untuned vs tuned alternated,
# TTFT at 2048). Fixtures come back as fixtures.tgz; logs under $OUT.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/gpu-llm-out}
BUILD=${GPU_CHECK_BUILD:-$ROOT/build}
mkdir -p "$OUT"
[ -d /opt/torch/.venv/bin ] && export PATH="$PATH:/opt/torch/.venv/bin"
start=$(date +%s)
stamp() { echo "[$(($(date +%s) - start))s] $*"; }

stamp "fixtures"
PYTHONUNBUFFERED=1 python3 scripts/make_llm_fixtures.py --out tests/fixtures/llm >"$OUT/fixtures.log" 2>&1 ||
  { tail -20 "$OUT/fixtures.log"; echo "gpu-llm: fixture script failed"; }
tar czf "$OUT/fixtures.tgz" tests/fixtures/llm 2>/dev/null

stamp "build"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$OUT/configure.log" 2>&1 ||
  { tail -20 "$OUT/configure.log"; exit 1; }
ninja -C "$BUILD" -k 0 tunableop_cli test_llm test_llm_cuda test_cuda_common >"$OUT/build.log" 2>&1 ||
  grep -E "FAILED|error" "$OUT/build.log" | head -20

stamp "llm tests"
ctest --test-dir "$BUILD" -R 'Llm|HfReference|Fixtures|Safetensors|LlmConfig|CudaCommon' --timeout 300 --output-on-failure \
  >"$OUT/ctest_llm.log" 2>&1
grep -E "tests passed|tests failed|\((Failed|Timeout|SEGFAULT)" "$OUT/ctest_llm.log" | head -20

bin="$BUILD/tools/tunableop"
run() {  # name, timeout, args...
  local name=$1 t=$2
  shift 2
  stamp "llm $name"
  TUNABLEOP_FILENAME="$OUT/llm_results_%d.csv" timeout "$t" "$bin" llm --device cuda "$@" >"$OUT/$name.txt" 2>&1 ||
    echo "gpu-llm: $name exited $? (see $name.txt)"
}
stamp "greedy ids"
# Greedy ids of the real-shaped models (2 layers: seconds), bf16 and fp32, Default GEMMs: the
# same command on another build must print the same ids (a forward-pass refactor must not
# change a token).
for dt in bf16 fp32; do
  for m in gemma-2b llama-2-7b; do
    echo "$m $dt: $(timeout 120 "$bin" llm --device cuda --model builtin:$m --layers 2 --dtype $dt --no-tune \
      --prompt-ids 2,651,6077,17 --max-new-tokens 32 --iterations 1 --warmup 0 --print-ids 2>&1 | tail -1)"
  done
done >"$OUT/greedy_ids.txt"
if [ "${GPU_LLM_BENCH:-1}" != 1 ]; then stamp "bench skipped (GPU_LLM_BENCH=0)"; cat "$OUT/greedy_ids.txt"; exit 0; fi
run gemma_seq256 150 --model builtin:gemma-2b --total-tokens 256 --compare --iterations 3 --warmup 1
run llama_seq256 150 --model builtin:llama-2-7b --total-tokens 256 --compare --iterations 3 --warmup 1
run gemma_ttft2048 60 --model builtin:gemma-2b --prompt-len 2048 --max-new-tokens 1 --compare --iterations 3
run llama_ttft2048 60 --model builtin:llama-2-7b --prompt-len 2048 --max-new-tokens 1 --compare --iterations 3
tar czf "$OUT/llm_logs.tgz" -C "$OUT" --exclude='*.tgz' . 2>/dev/null
stamp "done"
echo "== greedy ids (builtin, 2 layers, untuned)"; cat "$OUT/greedy_ids.txt"
for f in gemma_seq256 llama_seq256 gemma_ttft2048 llama_ttft2048; do
  echo "== $f"; grep -E "Tokens/second|TTFT|TPOT|TunableOp:|Decode|GEMM problems" "$OUT/$f.txt" | head -12
done

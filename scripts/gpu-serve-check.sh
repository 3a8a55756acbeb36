#!/usr/bin/env bash
# One device call that checks the serving engine on the GPU (issue 26): build for sm_90, the GPU
# tests of the engine (the continuous-batch calls against the plain ones, device sampling
# against the host algorithm, the split CUDA device against the CPU engine and the HF
# fixtures), the server's CPU tests, then `tunableop llm --compare` on the real shapes (the split
# must keep the tuned/untuned decode rate: graphs, fused projections, the step variant now
# chosen by the core tuner). Logs under $OUT; a short table last.
#   CHECK_BENCH=0 skips the engine benchmark; CHECK_MODELS ("gemma-2b llama-2-7b").
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/gpu-serve-check-out}
BUILD=${GPU_CHECK_BUILD:-$ROOT/build}
mkdir -p "$OUT"
[ -d /opt/torch/.venv/bin ] && export PATH="$PATH:/opt/torch/.venv/bin"
[ -d "$ROOT/.deps/httplib/lib" ] && export LD_LIBRARY_PATH="$ROOT/.deps/httplib/lib:${LD_LIBRARY_PATH:-}"
start=$(date +%s)
stamp() { echo "[$(($(date +%s) - start))s] $*"; }

stamp "build"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$OUT/configure.log" 2>&1 ||
  { tail -20 "$OUT/configure.log"; exit 1; }
grep -E "^-- tunableop" "$OUT/configure.log" >"$OUT/configure-summary.txt"
ninja -C "$BUILD" -k 0 tunableop_cli test_llm_cuda test_llm_cuda_kernels test_serve test_llm >"$OUT/build.log" 2>&1 ||
  { grep -E "FAILED|error" "$OUT/build.log" | head -20; }

stamp "tests"
(cd "$BUILD" && ctest -R 'test_llm_cuda|LlmCuda|CudaSlots|Runtime|Scheduler|SlotEngine|Sampling' --timeout 600 \
  --output-on-failure) >"$OUT/ctest.log" 2>&1
grep -E "tests passed|tests failed|\((Failed|Timeout|SEGFAULT|Subprocess)" "$OUT/ctest.log" | head -30

bin="$BUILD/tools/tunableop"
if [ "${CHECK_BENCH:-1}" = 1 ]; then
  for m in ${CHECK_MODELS:-gemma-2b llama-2-7b}; do
    stamp "llm --compare $m"
    TUNABLEOP_FILENAME="$OUT/results_%d.csv" timeout 300 "$bin" llm --device cuda --model builtin:$m \
      --total-tokens 256 --compare --iterations 3 --warmup 1 >"$OUT/compare_$m.txt" 2>&1 ||
      echo "gpu-serve-check: $m exited $?"
  done
fi
stamp "done"
echo "== tests"
grep -E "tests passed|tests failed" "$OUT/ctest.log"
for m in ${CHECK_MODELS:-gemma-2b llama-2-7b}; do
  echo "== $m"
  grep -E "Tokens/second|tuned/untuned|In-context|decode step b" "$OUT/compare_$m.txt" 2>/dev/null | head -8
done

#!/usr/bin/env bash
# One call on a GPU machine: configure with CUDA for sm_90, build, run ctest (all tests, the
# GPU-labelled ones included), then the GPU benchmark. Full logs go to $OUT (the device tool's
# result folder; ./gpu-check-out elsewhere); a short table is printed last.
#
#   scripts/gpu-check.sh                    # everything
#   GPU_CHECK_TESTS=gpu scripts/gpu-check.sh   # only GPU tests (faster)
#   GPU_CHECK_TESTS=none GPU_CHECK_BENCH_ONLY=vocab scripts/gpu-check.sh
#   GPU_CHECK_QUICK=1 scripts/gpu-check.sh     # decode shapes + the odd-m vocab ones only
#   GPU_CHECK_QUICK=ordered scripts/gpu-check.sh  # the full llm suite, largest shape last
#
# Knobs (environment): GPU_CHECK_TESTS=all|gpu|none, GPU_CHECK_BENCH=1|0, GPU_CHECK_BENCH_ONLY=<substring
# of shape names>, GPU_CHECK_BENCH_TIMEOUT=<s> (default 420), GPU_CHECK_TEST_TIMEOUT=<s per test>
# (default 300), GPU_CHECK_EXTRA_BENCH="<args>" (one more `tunableop bench` run, logged),
# GPU_CHECK_TARGETS="<ninja targets>" (build only these; default: everything).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/gpu-check-out}
BUILD=${GPU_CHECK_BUILD:-$ROOT/build}
TESTS=${GPU_CHECK_TESTS:-all}
BENCH=${GPU_CHECK_BENCH:-1}
BENCH_ONLY=${GPU_CHECK_BENCH_ONLY:-}
BENCH_TIMEOUT=${GPU_CHECK_BENCH_TIMEOUT:-420}
TEST_TIMEOUT=${GPU_CHECK_TEST_TIMEOUT:-300}
# The device tool returns at most 8 files: logs are packed into logs.tgz at the end; the bench
# table, its CSV and the results file stay beside it.
LOGS="$OUT/logs"
mkdir -p "$LOGS"
# cmake and ninja live in the torch venv on the device machine.
[ -d /opt/torch/.venv/bin ] && export PATH="$PATH:/opt/torch/.venv/bin"
export NCCL_NVLS_ENABLE=0
start=$(date +%s)
stamp() { echo "[$(($(date +%s) - start))s] $*"; }

{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1
  nvcc --version 2>&1 | tail -2
  cmake --version | head -1
} >"$LOGS/machine.txt"
stamp "machine: $(sed -n 2p "$LOGS/machine.txt")"

stamp "configure"
if ! cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$LOGS/configure.log" 2>&1; then
  tail -30 "$LOGS/configure.log"
  echo "gpu-check: configure failed (full log: configure.log)"
  exit 1
fi
grep -E "tunableop:" "$LOGS/configure.log"

stamp "build"
# -k 0: a broken test elsewhere must not stop the library, the CLI and the GPU tests.
# GPU_CHECK_TARGETS (e.g. "tunableop_cli test_cuda_gemm") builds only those.
# shellcheck disable=SC2086
ninja -C "$BUILD" -k 0 ${GPU_CHECK_TARGETS:-} >"$LOGS/build.log" 2>&1
build_rc=$?
if [ $build_rc -ne 0 ]; then
  grep -E "FAILED|error" "$LOGS/build.log" | head -20
  echo "gpu-check: build had failures (rc $build_rc); continuing with what was built"
fi
[ -x "$BUILD/tools/tunableop" ] || { echo "gpu-check: tools/tunableop was not built"; exit 1; }

test_summary="tests: not run"
if [ "$TESTS" != "none" ]; then
  label=()
  [ "$TESTS" = "gpu" ] && label=(-L gpu)
  stamp "ctest ${label[*]}"
  # GPU tests one at a time (they time and size device memory); CPU tests in parallel.
  if [ "$TESTS" = "all" ]; then
    ctest --test-dir "$BUILD" -LE gpu -j "$(nproc)" --timeout "$TEST_TIMEOUT" --output-on-failure >"$LOGS/ctest_cpu.log" 2>&1
    cpu_line=$(grep -E "tests passed|tests failed" "$LOGS/ctest_cpu.log" | tail -1)
  fi
  ctest --test-dir "$BUILD" -L gpu --timeout "$TEST_TIMEOUT" --output-on-failure -V >"$LOGS/ctest_gpu.log" 2>&1
  gpu_line=$(grep -E "tests passed|tests failed" "$LOGS/ctest_gpu.log" | tail -1)
  test_summary="gpu tests: ${gpu_line:-?}${cpu_line:+ | cpu tests: $cpu_line}"
  grep -E "^\s*[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess)" "$LOGS"/ctest_*.log | head -20
fi

if [ "$BENCH" = "1" ]; then
  stamp "bench: seed Example 1 on the GPU (fp32 1024 x 512 x 2048)"
  TUNABLEOP_FILENAME="$LOGS/example1_results%d.csv" timeout 60 "$BUILD/tools/tunableop" bench -m 1024 -n 512 -k 2048 \
    --device cuda >"$LOGS/bench_example1.txt" 2>&1
  stamp "bench: llm suite"
  suite=(--suite llm)
  layers="llama2-7b.qkv:12288:4096 llama2-7b.o:4096:4096 llama2-7b.gate_up:22016:4096 llama2-7b.down:4096:11008
          llama2-7b.lm_head:32000:4096 gemma-2b.qkv:2560:2048 gemma-2b.o:2048:2048 gemma-2b.gate_up:32768:2048
          gemma-2b.down:2048:16384 gemma-2b.lm_head:256000:2048"
  suite_line() { IFS=: read -r name m k <<<"$1"; echo "$name@$2,bf16,T,N,$m,$2,$k"; }
  if [ "${GPU_CHECK_QUICK:-0}" = "1" ]; then
    # Every 1- and 8-token shape of the llm suite, plus the odd-m vocab shapes and one large
    # aligned one: what our own kernels target, in a fraction of the full suite's time.
    {
      for t in 1 8; do for l in $layers; do suite_line "$l" "$t"; done; done
      echo "vocab50257@1,bf16,T,N,50257,1,4096"
      echo "vocab50257@2048,bf16,T,N,50257,2048,4096"
      echo "vocab32001@2048,bf16,T,N,32001,2048,4096"
      echo "gemma-2b.gate_up@2048,bf16,T,N,32768,2048,2048"
    } >"$LOGS/quick_suite.csv"
    suite=(--suite-file "$LOGS/quick_suite.csv")
  elif [ "${GPU_CHECK_QUICK:-0}" = "ordered" ]; then
    # The whole llm suite, cheapest first, so that a time limit cuts only the largest shape
    # (Gemma lm_head at 2048 tokens: a 1 GB output).
    {
      for t in 1 8; do for l in $layers; do suite_line "$l" "$t"; done; done
      echo "vocab50257@1,bf16,T,N,50257,1,4096"
      echo "vocab32001@1,bf16,T,N,32001,1,4096"
      echo "vocab50257@2048,bf16,T,N,50257,2048,4096"
      echo "vocab32001@2048,bf16,T,N,32001,2048,4096"
      for l in $layers; do suite_line "$l" 2048; done
    } >"$LOGS/ordered_suite.csv"
    suite=(--suite-file "$LOGS/ordered_suite.csv")
  fi
  only=()
  [ -n "$BENCH_ONLY" ] && only=(--only "$BENCH_ONLY")
  timeout "$BENCH_TIMEOUT" "$BUILD/tools/tunableop" bench "${suite[@]}" --device cuda "${only[@]}" \
    --csv "$OUT/bench_llm.csv" --results "$OUT/bench_llm_results%d.csv" >"$OUT/bench_llm.md" 2>"$LOGS/bench_llm.log"
  bench_rc=$?
  [ $bench_rc -ne 0 ] && echo "gpu-check: bench exited with $bench_rc (124 = cut at ${BENCH_TIMEOUT}s); see bench_llm.log"
  if [ -n "${GPU_CHECK_EXTRA_BENCH:-}" ]; then
    stamp "bench: extra: $GPU_CHECK_EXTRA_BENCH"
    # shellcheck disable=SC2086
    timeout 120 "$BUILD/tools/tunableop" bench $GPU_CHECK_EXTRA_BENCH --device cuda >"$LOGS/bench_extra.txt" 2>&1
  fi
fi

stamp "done"
tar czf "$OUT/logs.tgz" -C "$LOGS" . && rm -rf "$LOGS"
LOGS_VIEW=$(mktemp -d)
tar xzf "$OUT/logs.tgz" -C "$LOGS_VIEW"
echo
echo "== $test_summary"
grep -hE "Failure$|^Expected|^  Actual|Which is|error: |Value of:" "$LOGS_VIEW"/ctest_gpu.log 2>/dev/null | head -24
[ -f "$LOGS/bench_example1.txt" ] && grep -E "iter/s" "$LOGS/bench_example1.txt"
if [ -s "$OUT/bench_llm.md" ]; then
  cat "$OUT/bench_llm.md"
elif [ -s "$LOGS/bench_llm.log" ]; then
  echo "(bench table not written; per-shape lines so far:)"
  tail -40 "$LOGS/bench_llm.log"
fi

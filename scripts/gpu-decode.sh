#!/usr/bin/env bash
# One device call for issue 13 (decode at the bandwidth limit): build only what it needs for
# sm_90, run the fused-kernel and LLM CUDA tests, then the decode benchmark of the Gemma-2B and
# Llama-2-7B shapes (bf16, 256 tokens) with the copy ceiling measured in the same run and a
# per-kernel breakdown of one decode step: first main's kernels (--fusion off --no-pdl: the
# "before"), then this branch's (fused projections tuned by measurement, PDL), at batch 1 (and 4,
# 16), and last the Hugging Face peer line (transformers, eager and compiled) on the same GPU.
# Logs under $OUT (packed into decode_logs.tgz); a short table is printed last.
#
#   scripts/gpu-decode.sh                  # everything
#   DECODE_HF=0 scripts/gpu-decode.sh      # without the Hugging Face runs
#   DECODE_BATCHES="1 4 16"                # batch sizes of the "after" runs (default 1 4 16)
#   DECODE_TESTS=0                         # skip the tests
#   DECODE_BUDGET=500                      # seconds: later steps are skipped past it (default 500)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/gpu-decode-out}
BUILD=${DECODE_BUILD:-$ROOT/build-decode}
# The device tool returns at most 8 files from $OUT: logs live beside it and are packed into
# $OUT/decode_logs.tgz after every step, so a run cut short still returns what it did.
LOGS=${DECODE_LOGS:-/tmp/gpu-decode-logs}
rm -rf "$LOGS"
mkdir -p "$LOGS" "$OUT"
[ -d /opt/torch/.venv/bin ] && export PATH="$PATH:/opt/torch/.venv/bin"
start=$(date +%s)
BUDGET=${DECODE_BUDGET:-500}
pack() { tar czf "$OUT/decode_logs.tgz" -C "$(dirname "$LOGS")" "$(basename "$LOGS")" 2>/dev/null; }
stamp() {
  pack
  echo "[$(($(date +%s) - start))s] $*"
}
# Seconds left for a step that wants $1 (0: skip it).
left() {
  local rest=$((BUDGET - ($(date +%s) - start) - 5))
  if [ "$rest" -lt 20 ]; then echo 0; elif [ "$rest" -lt "$1" ]; then echo "$rest"; else echo "$1"; fi
}
BATCHES=${DECODE_BATCHES:-1 4 16}

{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem --format=csv 2>&1
  nvcc --version 2>&1 | tail -1
} >"$LOGS/machine.txt"
stamp "machine: $(sed -n 2p "$LOGS/machine.txt")"

stamp "configure + build"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$LOGS/configure.log" 2>&1 ||
  { tail -20 "$LOGS/configure.log"; exit 1; }
targets="tunableop_cli"
[ "${DECODE_TESTS:-1}" = 1 ] && targets="$targets test_llm_cuda test_cuda_fused_linear"
# shellcheck disable=SC2086
ninja -C "$BUILD" -j "$(nproc)" $targets >"$LOGS/build.log" 2>&1 ||
  { grep -E "error|FAILED" "$LOGS/build.log" | head -20; echo "gpu-decode: build failed"; exit 1; }
stamp "built"

if [ "${DECODE_TESTS:-1}" = 1 ]; then
  stamp "tests (fused kernels vs fp64, CUDA engine incl. HF fixtures fused and unfused)"
  TUNABLEOP_SOURCE_DIR="$ROOT" timeout "$(left 90)" "$BUILD/tests/backends/cuda/fused_linear/test_cuda_fused_linear" \
    >"$LOGS/test_fused.log" 2>&1
  echo "test_cuda_fused_linear: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$LOGS/test_fused.log" | tr '\n' ' ')"
  TUNABLEOP_SOURCE_DIR="$ROOT" timeout "$(left 150)" "$BUILD/tests/llm/test_llm_cuda" >"$LOGS/test_llm_cuda.log" 2>&1
  echo "test_llm_cuda: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$LOGS/test_llm_cuda.log" | tr '\n' ' ')"
  grep -E "^\[  FAILED|Failure|error:" "$LOGS/test_fused.log" "$LOGS/test_llm_cuda.log" | head -20
fi

bin="$BUILD/tools/tunableop"
export TUNABLEOP_FILENAME="$OUT/results_%d.csv"  # GEMMs tuned once, shared by the runs
run() {  # name, timeout, args...
  local name=$1 t
  t=$(left "$2")
  shift 2
  if [ "$t" = 0 ]; then echo "gpu-decode: $name skipped (budget)"; return; fi
  stamp "llm $name"
  timeout "$t" "$bin" llm --device cuda --tune "$@" >"$LOGS/$name.txt" 2>&1 ||
    echo "gpu-decode: $name exited $? (see $name.txt)"
}
common=(--total-tokens 256 --iterations 3 --warmup 1 --measure-bandwidth)
for m in gemma-2b llama-2-7b; do
  run "${m}_before_b1" 200 --model builtin:$m "${common[@]}" --fusion off --no-pdl --profile-decode 3
  run "${m}_after_b1" 200 --model builtin:$m "${common[@]}" --profile-decode 3
  for b in $BATCHES; do
    [ "$b" = 1 ] && continue
    run "${m}_after_b$b" 150 --model builtin:$m "${common[@]}" --batch "$b"
  done
done

if [ "${DECODE_HF:-1}" = 1 ]; then
  for m in gemma-2b llama-2-7b; do
    for mode in compiled eager; do
      flag="--warmup 1 --batches 2"
      [ $mode = eager ] && flag="--eager --warmup 1 --batches 1"
      t=$(left 200)
      if [ "$t" = 0 ]; then echo "gpu-decode: hf $m $mode skipped (budget)"; continue; fi
      stamp "hf $m $mode"
      # shellcheck disable=SC2086
      PYTHONUNBUFFERED=1 timeout "$t" python3 bench/interpose/hf_gemma_generate.py --model $m $flag \
        >"$LOGS/hf_${m}_$mode.txt" 2>&1 || echo "gpu-decode: hf $m $mode exited $?"
    done
  done
fi

cp "$OUT"/results_*.csv "$LOGS/" 2>/dev/null
stamp "done"
echo "== decode breakdowns (batch 1; before: main's kernels, after: this branch)"
for m in gemma-2b llama-2-7b; do
  echo "-- $m before"; grep -E "matmul kernels|step as" "$LOGS/${m}_before_b1.txt"
  echo "-- $m after"; sed -n '/Decode step breakdown/,$p' "$LOGS/${m}_after_b1.txt" | head -16
done
echo "== step variants chosen"
grep -h "decode step, batch" "$LOGS"/*_after_b*.txt | cut -c1-400
echo "== decode (tokens/s per sequence and in total; % of the copy ceiling measured in the run)"
for f in "$LOGS"/*_b*.txt; do
  echo "-- $(basename "$f" .txt): $(grep -E 'TPOT' "$f" | head -1 | sed 's/^ *//')"
  grep -E "Copy ceiling" "$f" | sed 's/(device copy, bytes read + written, measured in this run); //'
done
for f in "$LOGS"/hf_*.txt; do
  if [ -f "$f" ]; then echo "-- $(basename "$f" .txt): $(grep -E 'Tokens/second' "$f")"; fi
done
exit 0

#!/usr/bin/env bash
# One call on a GPU machine for the attention kernels (issue 12): configure for sm_90, build only
# the attention tests and the kernel lab, run the tests (GPU ones included; a quick pass under
# compute-sanitizer memcheck and racecheck), then the lab and PyTorch's SDPA on the same shapes.
# Logs and CSVs go to $OUT (./gpu-attention-out elsewhere); the comparison table is printed last.
#
# cuDNN: headers from the PyTorch venv's nvidia/cudnn/include, else from .cudnn-include beside
# this checkout's root (copied there by whoever sends the tree); the library from the venv's
# nvidia/cudnn/lib (TUNABLEOP_CUDNN_LIBRARY). Without either, the cuDNN candidate is skipped.
#
# Knobs: ATTN_SANITIZE=0 skips compute-sanitizer; ATTN_LAB_ONLY=<substring> limits the lab's
# shapes; ATTN_SKIP_TESTS=1 goes straight to the timings.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/gpu-attention-out}
LOGS="$OUT/logs"
BUILD=${ATTN_BUILD:-$ROOT/build-attn}
mkdir -p "$LOGS"
[ -d /opt/torch/.venv/bin ] && export PATH="$PATH:/opt/torch/.venv/bin"
start=$(date +%s)
stamp() { echo "[$(($(date +%s) - start))s] $*"; }
summary=()

{
  date -u +%Y-%m-%dT%H:%MZ
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1
  nvcc --version 2>&1 | tail -1
  cat "$ROOT/.attn-commit" 2>/dev/null || git -C "$ROOT" log --oneline -1 2>/dev/null
} >"$LOGS/machine.txt"
stamp "machine: $(sed -n 3p "$LOGS/machine.txt")"

# cuDNN from the PyTorch wheel.
. "$ROOT/scripts/cudnn-env.sh"
stamp "cuDNN headers: ${cudnn_inc:-none}; library: ${TUNABLEOP_CUDNN_LIBRARY:-none}"

stamp "configure"
if ! cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DTUNABLEOP_WITH_BLIS=OFF -DTUNABLEOP_WITH_ONEDNN=OFF ${cudnn_inc:+-DTUNABLEOP_CUDNN_INCLUDE_DIR=$cudnn_inc} \
  >"$LOGS/configure.log" 2>&1; then
  tail -30 "$LOGS/configure.log"
  echo "gpu-attention: configure failed"
  exit 1
fi
grep -E "tunableop:" "$LOGS/configure.log"

stamp "build"
targets="test_ops_attention test_cpu_attention test_cuda_attention attention_lab"
# shellcheck disable=SC2086
if ! ninja -C "$BUILD" -k 0 $targets >"$LOGS/build.log" 2>&1; then
  grep -E "FAILED|error" "$LOGS/build.log" | head -20
  echo "gpu-attention: build had failures; continuing with what was built"
fi
grep -E "registers|spill" "$LOGS/build.log" | head -5

T="$BUILD/tests"
run_test() {  # name, binary, timeout, [env...]
  local name=$1 bin=$2 limit=$3
  shift 3
  [ -x "$bin" ] || { summary+=("$name: not built"); return; }
  env "$@" timeout "$limit" "$bin" >"$LOGS/$name.log" 2>&1
  local rc=$?
  summary+=("$name: $(grep -E '^\[  (PASSED|FAILED)' "$LOGS/$name.log" | tr '\n' ' ') (rc $rc)")
}
if [ "${ATTN_SKIP_TESTS:-0}" != "1" ]; then
  stamp "tests"
  run_test ops "$T/ops/attention/test_ops_attention" 60
  run_test cpu "$T/backends/cpu/attention/test_cpu_attention" 180
  run_test gpu "$T/backends/cuda/attention/test_cuda_attention" 300
  grep -hE "^note:|^refused:" "$LOGS/gpu.log" | sort -u | head -12
  grep -hE "Failure|error [0-9.e+-]+ >|differ|wrote" "$LOGS/gpu.log" | head -12
  if [ "${ATTN_SANITIZE:-1}" = "1" ] && command -v compute-sanitizer >/dev/null; then
    for tool in memcheck racecheck; do
      only=Attn_Flash_q128_k64_w8_s2,Attn_SplitKv_q64_k64_w4_s2_sp4
      [ "$tool" = memcheck ] && only=$only,Attn_Flash_q64_k64_w4_s2,Attn_Flash_q128_k64_w4_s2,Attn_SplitKv_q64_k64_w4_s3_sp8
      stamp "compute-sanitizer $tool (head dim 128, bf16, $only)"
      env TUNABLEOP_ATTENTION_TEST_QUICK=1 TUNABLEOP_ATTENTION_TEST_ONLY=$only timeout 80 compute-sanitizer --tool "$tool" --error-exitcode 9 \
        "$T/backends/cuda/attention/test_cuda_attention" --gtest_filter='*Bf16*' >"$LOGS/sanitize_$tool.log" 2>&1
      rc=$?
      summary+=("sanitize_$tool: $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED)' "$LOGS/sanitize_$tool.log" |
        tr '\n' ' ') (rc $rc)")
    done
  fi
fi

if [ "${ATTN_NCU:-1}" = "1" ] && command -v ncu >/dev/null && [ -x "$BUILD/bench/attention/attention_lab" ]; then
  # One profile of our first flash kernel on Llama prefill 8192 (Attn_Flash_q128_k64_w4_s2):
  # where its time goes, for the notes. Clocks left as they are (--clock-control none).
  stamp "ncu: first flash kernel on llama2-7b.prefill8192"
  timeout 120 ncu --clock-control none -k regex:flash_fwd_kernel -c 1 --section SpeedOfLight \
    --section ComputeWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats \
    --section InstructionStats "$BUILD/bench/attention/attention_lab" --only llama2-7b.prefill8192 --samples 1 \
    >"$LOGS/ncu_prefill.txt" 2>&1
  summary+=("ncu: rc $? ($(grep -cE '^ +[A-Z]' "$LOGS/ncu_prefill.txt") metric lines)")
fi

stamp "lab"
timeout 240 "$BUILD/bench/attention/attention_lab" ${ATTN_LAB_ONLY:+--only "$ATTN_LAB_ONLY"} --csv "$OUT/lab.csv" \
  >"$OUT/lab.md" 2>"$LOGS/lab.log"
summary+=("lab: rc $?")
stamp "pytorch sdpa"
"$BUILD/bench/attention/attention_lab" --list >"$LOGS/shapes.csv"
if [ -n "${ATTN_LAB_ONLY:-}" ]; then
  { head -1 "$LOGS/shapes.csv"; grep -F "$ATTN_LAB_ONLY" "$LOGS/shapes.csv"; } >"$LOGS/shapes_only.csv"
  mv "$LOGS/shapes_only.csv" "$LOGS/shapes.csv"
fi
timeout 150 python3 bench/attention/sdpa_bench.py "$LOGS/shapes.csv" "$OUT/sdpa.csv" 2>"$LOGS/sdpa.log"
summary+=("sdpa: rc $?")
python3 bench/attention/compare.py "$OUT/lab.csv" "$OUT/sdpa.csv" >"$OUT/table.md" 2>"$LOGS/compare.log"

stamp "done"
tar czf "$OUT/logs.tgz" -C "$LOGS" . && rm -rf "$LOGS"
echo
for s in "${summary[@]}"; do echo "== $s"; done
echo
cat "$OUT/table.md" 2>/dev/null || cat "$OUT/lab.md"

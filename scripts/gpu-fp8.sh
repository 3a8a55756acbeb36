#!/usr/bin/env bash
# One device call for FP8 (issue 29): build for sm_90, run the ScaledGemm GPU tests (every
# candidate against the fp64 reference, a wrong-but-fast candidate rejected, the interposer's
# CUDA program with its FP8 cases, the FP8 descriptor mapping), then measure, same run, same GPU:
#   suite    `tunableop bench --suite llm-fp8`: the 34 llm shapes as ScaledGemm (e4m3, rowwise,
#            bf16 out), tuned vs Default = cuBLASLt's first heuristic answer (torch._scaled_mm's)
#   torch    bench/interpose/scaled_mm_suite.py (torch._scaled_mm, rowwise and tensorwise): plain,
#            under `tunableop run --tune`, and with PYTORCH_TUNABLEOP_ENABLED=1
#   engine   `tunableop llm --dtype fp8` batch-1 decode against bf16 (Llama-2-7B, Gemma-2B
#            shapes), where this build's engine takes --dtype fp8 (skipped, and said, where not)
# Logs go to $OUT/logs.tgz, the tables to $OUT/summary.md (printed last). Every step has a time
# limit and the whole run a budget (~9 minutes); a step that does not fit is skipped and listed:
# run again with GPU_FP8_STEPS naming the rest (the build folder is kept on a warm machine).
#
# Knobs: GPU_FP8_STEPS=build,test,suite,torch,engine (default all)   GPU_FP8_BUDGET_S=540
#        GPU_FP8_BUILD=<dir>
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
OUT=${OUT:-$ROOT/gpu-fp8-out}
BUILD=${GPU_FP8_BUILD:-$ROOT/build}
STEPS=${GPU_FP8_STEPS:-build,test,suite,torch,engine}
BUDGET=${GPU_FP8_BUDGET_S:-540}
LOGS=$(mktemp -d /tmp/gpu-fp8-logs.XXXXXX)
mkdir -p "$OUT"
# The torch venv holds python3 (with torch), cmake and ninja.
[ -d /opt/torch/.venv/bin ] && export PATH="/opt/torch/.venv/bin:$PATH"
PY=$(command -v python3)
BIN="$BUILD/tools/tunableop"
start=$(date +%s)
# shellcheck source=scripts/gpu-budget.sh
source "$ROOT/scripts/gpu-budget.sh"

summary() {
  {
    summary_head gpu-fp8
    summary_tests "worst error / tolerance"
    if [ -f "$LOGS/suite.txt" ]; then
      echo
      echo '## FP8 suite: tuned vs Default (cuBLASLt first heuristic)'
      grep -E "^\||^geomean|^\(\*\)|^# " "$LOGS/suite.txt"
    fi
    for mode in rowwise tensorwise; do
      if [ -f "$LOGS/torch_${mode}_plain.csv" ]; then
        echo
        echo "## torch._scaled_mm ($mode): plain vs tunableop run vs PYTORCH_TUNABLEOP_ENABLED=1"
        files=("$LOGS/torch_${mode}_plain.csv")
        for arm in ours pytorch; do [ -f "$LOGS/torch_${mode}_${arm}.csv" ] && files+=("$LOGS/torch_${mode}_${arm}.csv"); done
        "$PY" bench/interpose/scaled_mm_suite.py --summarize "${files[@]}" 2>&1
        grep -h "tunableop: interpose: cublasLtMatmul" "$LOGS/torch_${mode}_ours.txt" 2>/dev/null | head -2
        echo "PyTorch TunableOp's own ScaledGemm results (what its tuner chose on CUDA):"
        grep "ScaledGemm" "$LOGS/torch_${mode}_pytorch.txt" 2>/dev/null | head -6
      fi
    done
    if [ -f "$LOGS/engine.txt" ]; then
      echo
      echo '## engine, batch-1 decode'
      cat "$LOGS/engine.txt"
    fi
  } >"$OUT/summary.md"
  summary_finish
}
trap summary EXIT

machine_info "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"

if want build; then
  build_targets "$BUILD" tunableop_cli tunableop_preload tunableop_interpose interpose_cublas_program \
    test_cuda_scaled_gemm test_interpose_cuda_mapping test_ops_scaled_gemm
fi
if [ ! -x "$BIN" ]; then
  grep -E "error|FAILED" "$LOGS/build.log" 2>/dev/null | head -20
  echo "gpu-fp8: tunableop was not built; nothing to run"
  exit 1
fi

if want test; then
  timed ctest 60 300 ctest --test-dir "$BUILD" -V --timeout 280 \
    -R 'CudaScaledGemm|MapLtCall|ScaledGemm|Fp8|^interpose\.cublas_program$'
  cp -r "$BUILD/tests/interpose/cublas_program" "$LOGS/cublas_program_runs" 2>/dev/null
fi

if want suite; then
  timed suite 120 300 "$BIN" bench --suite llm-fp8 --device cuda --csv "$LOGS/suite.csv"
fi

if want torch; then
  suite=bench/interpose/scaled_mm_suite.py
  for mode in rowwise tensorwise; do
    timed torch_${mode}_plain 30 90 "$PY" $suite --mode $mode --csv "$LOGS/torch_${mode}_plain.csv"
    timed torch_${mode}_ours 60 180 "$BIN" run --tune -v 1 --results "$LOGS/torch_${mode}_ours_results.csv" -- \
      "$PY" $suite --mode $mode --csv "$LOGS/torch_${mode}_ours.csv"
    timed torch_${mode}_pytorch 40 150 PYTORCH_TUNABLEOP_ENABLED=1 \
      PYTORCH_TUNABLEOP_FILENAME="$LOGS/torch_${mode}_pytorch_results.csv" "$PY" $suite --mode $mode \
      --csv "$LOGS/torch_${mode}_pytorch.csv"
  done
fi

if want engine; then
  if "$BIN" llm --help 2>&1 | grep -q "fp8"; then
    for m in llama-2-7b gemma-2b; do
      for dt in bf16 fp8; do
        timed engine_${m}_${dt} 40 120 "$BIN" llm --device cuda --model builtin:$m --dtype $dt --total-tokens 256 \
          --iterations 3 --warmup 1
        grep -E "Tokens/second|TTFT|TPOT" "$LOGS/engine_${m}_${dt}.txt" 2>/dev/null | sed "s/^/$m $dt: /" >>"$LOGS/engine.txt"
      done
    done
  else
    note "engine: this build's \`tunableop llm\` has no --dtype fp8 (issue 29's engine part not built): skipped"
  fi
fi

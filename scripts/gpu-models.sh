#!/usr/bin/env bash
# One device call for issue 28's model families (Llama-3, Mistral, Qwen2/2.5, Qwen3, Gemma-2),
# H100 or H200. In order, each step skipped once the budget is spent (said in the output):
#   1. fixtures: scripts/make_llm_fixtures.py (torch + transformers 5.x on the GPU machine) makes
#      every Hugging Face fixture, the families' included; they come back as $OUT/fixtures.tgz
#      (commit tests/fixtures/llm from it) and the tests below read them in place;
#   2. build for sm_90 what it runs (the CLI, the LLM and attention test programs), ninja -j16;
#   3. tests: the CPU engine on the families (fp64 reference, fixtures, configs, RoPE), the CUDA
#      engine (fixtures in fp32 exactly and bf16 within tolerance, static and paged; the families
#      against the CPU engine, graph replays), the families' kernels against fp64, and every
#      attention candidate on the sliding-window / softcap shapes against fp64 (bf16, fp16, fp32);
#   4. decode at batch 1 (bf16, random weights, 256 tokens, tuned; the copy ceiling measured in the
#      same process) of llama-2-7b (the reference point), llama-3-8b, qwen2.5-7b, mistral-7b,
#      gemma-2-9b and gemma-2-9b-nocap (softcapping off: its cost), then Mistral past its window
#      (a 4500-token prompt, window 4096).
# The table (decode TPOT, GB/s, % of the copy ceiling, attention chosen; softcapping's cost) is
# printed last and kept as $OUT/summary.md; logs in $OUT/models_logs.tgz (packed after each step).
#
#   bash scripts/gpu-models.sh                        # everything that fits the budget
#   MODELS_STEPS="fixtures build tests" bash ...      # the correctness half
#   MODELS_STEPS="build bench" bash ...               # the speed half (a warm machine keeps ./build-models)
#   MODELS_BENCH="llama-3-8b qwen2.5-7b"              # the models of step 4 (default: all of them)
#   MODELS_BUDGET=570                                 # seconds from the start
#   MODELS_TARGETS=tunableop_cli                      # what step 2 builds (the bench needs only the CLI)
# The whole speed half does not fit one 10-minute call on a cold results file; two do:
#   MODELS_STEPS="build bench" MODELS_BENCH="llama-2-7b llama-3-8b qwen2.5-7b" bash scripts/gpu-models.sh
#   MODELS_STEPS="build bench" MODELS_BENCH="gemma-2-9b gemma-2-9b-nocap mistral-7b" bash scripts/gpu-models.sh
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
OUT=${OUT:-$ROOT/gpu-models-out}
BUILD=${MODELS_BUILD:-$ROOT/build-models}
LOGS=${MODELS_LOGS:-/tmp/gpu-models-logs}
STEPS=${MODELS_STEPS:-fixtures build tests bench}
BUDGET=${MODELS_BUDGET:-570}
rm -rf "$LOGS"
mkdir -p "$LOGS" "$OUT"
[ -d /opt/torch/.venv/bin ] && export PATH="$PATH:/opt/torch/.venv/bin"
start=$(date +%s)
pack() { tar czf "$OUT/models_logs.tgz" -C "$(dirname "$LOGS")" "$(basename "$LOGS")" 2>/dev/null; }
# stamp (packing the logs first) and step_seconds: scripts/gpu-budget.sh.
# shellcheck source=scripts/gpu-budget.sh
source "$ROOT/scripts/gpu-budget.sh"
step() { [[ " $STEPS " == *" $1 "* ]]; }

{
  date -u +%Y-%m-%dT%H:%MZ
  git -C "$ROOT" log --oneline -1 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem --format=csv 2>&1
  nvcc --version 2>&1 | tail -1
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)' 2>&1
} >"$LOGS/machine.txt"
stamp "machine: $(grep -m1 -E 'NVIDIA|H100|H200' "$LOGS/machine.txt" || echo 'no GPU found'); $(tail -1 "$LOGS/machine.txt")"

if step fixtures; then
  stamp "fixtures (scripts/make_llm_fixtures.py)"
  PYTHONUNBUFFERED=1 timeout "$(step_seconds 150)" python3 scripts/make_llm_fixtures.py --out tests/fixtures/llm \
    >"$LOGS/fixtures.log" 2>&1 || echo "gpu-models: the fixture script failed (see fixtures.log)"
  tail -12 "$LOGS/fixtures.log"
  tar czf "$OUT/fixtures.tgz" tests/fixtures/llm 2>/dev/null
fi

if step build; then
  # shellcheck source=scripts/cudnn-env.sh
  . "$ROOT/scripts/cudnn-env.sh"
  stamp "configure + build (sm_90)"
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DTUNABLEOP_WITH_BLIS=OFF \
    -DTUNABLEOP_WITH_ONEDNN=OFF ${cudnn_inc:+-DTUNABLEOP_CUDNN_INCLUDE_DIR=$cudnn_inc} >"$LOGS/configure.log" 2>&1 ||
    { tail -20 "$LOGS/configure.log"; echo "gpu-models: configure failed"; pack; exit 1; }
  secs=$(step_seconds 420)
  [ "$secs" = 0 ] && { echo "gpu-models: no time left to build"; pack; exit 1; }
  # shellcheck disable=SC2086
  timeout "$secs" ninja -C "$BUILD" -j 16 ${MODELS_TARGETS:-tunableop_cli test_llm test_llm_cuda test_llm_cuda_kernels \
    test_cuda_attention} >"$LOGS/build.log" 2>&1 ||
    { grep -E "error|FAILED" "$LOGS/build.log" | head -20; echo "gpu-models: build failed"; pack; exit 1; }
  stamp "built"
fi

# prog, seconds wanted, gtest filter[, env assignments...]
run_test() {
  local prog=$1 want=$2 filter=$3 name secs rc
  shift 3
  name=$(basename "$prog")
  secs=$(step_seconds "$want")
  if [ "$secs" = 0 ]; then echo "gpu-models: $name skipped (budget)"; return; fi
  stamp "test $name ($filter)"
  env TUNABLEOP_SOURCE_DIR="$ROOT" "$@" timeout "$secs" "$BUILD/tests/$prog" --gtest_filter="$filter" \
    >"$LOGS/$name.log" 2>&1
  rc=$?
  echo "$name: exit $rc $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$LOGS/$name.log" | tr '\n' ' ')"
  grep -E "^\[  FAILED|Failure|error [0-9.e+-]+ >|greedy tokens as" "$LOGS/$name.log" | head -24
}
if step tests; then
  run_test llm/test_llm 120 '*Famil*:*HfReference*:LlmConfig*:Rope*:LlmKernels*:LlmEngine*'
  run_test llm/test_llm_cuda 200 'LlmCuda.MatchesTransformersFixtures:LlmCuda.Famil*:LlmCuda.Fp32MatchesCpuEngine'
  run_test llm/test_llm_cuda_kernels 60 '*Family*:*QkNorm*:*AddNormedResidual*:*RopeStore*'
  run_test backends/cuda/attention/test_cuda_attention 150 'FlashAttention.*AllShapes*' \
    TUNABLEOP_ATTENTION_TEST_FEATURES=1
fi

bin="$BUILD/tools/tunableop"
# One results file, kept in the build folder (a warm machine keeps it between calls; $OUT is new
# each call): each problem tuned once. Copied to $OUT at the end.
mkdir -p "$BUILD/results"
export TUNABLEOP_FILENAME="$BUILD/results/results_%d.csv"
bench() {  # name, seconds wanted, args...
  local name=$1 secs
  secs=$(step_seconds "$2")
  shift 2
  if [ "$secs" = 0 ]; then echo "gpu-models: $name skipped (budget)"; return; fi
  stamp "llm $name"
  timeout "$secs" "$bin" llm --device cuda --tune "$@" >"$LOGS/$name.txt" 2>&1 ||
    echo "gpu-models: $name exited $? (see $name.txt)"
}
MODELS=${MODELS_BENCH:-llama-2-7b llama-3-8b qwen2.5-7b mistral-7b gemma-2-9b gemma-2-9b-nocap}
if step bench; then
  # The decode measurement of gpu-decode.sh's "after" runs (fused projections and step variant
  # chosen by measurement, PDL), without the in-context check (it would re-prepare inside the
  # first timed run).
  common=(--total-tokens 256 --iterations 3 --warmup 1 --measure-bandwidth --profile-decode 3 --no-in-context-check)
  # A model's first run tunes its GEMMs and decode attention (the results file is kept, so a
  # later call finds them): 150 s each at most.
  for m in $MODELS; do bench "${m}_after_b1" 150 --model "builtin:$m" "${common[@]}"; done
  if [[ " $MODELS " == *" mistral-7b "* ]]; then
    bench mistral-7b_window 90 --model builtin:mistral-7b --prompt-len 4500 --max-new-tokens 64 --iterations 2 \
      --warmup 1 --measure-bandwidth --no-in-context-check
  fi
fi

cp "$BUILD"/results/results_*.csv "$LOGS/" 2>/dev/null
stamp "done"
if step bench; then
  {
    echo "== decode at batch 1, bf16, 256 tokens (issue 28: >= 85% of the copy ceiling for llama-3-8b and qwen2.5-7b)"
    # shellcheck disable=SC2086
    python3 - "$ROOT/bench/lab" "$LOGS" $MODELS <<'PY'
import os, sys
sys.path.insert(0, sys.argv[1])
from decode_summary import engine_row, fmt  # the same reading of the logs as gpu-decode.sh

logs, models = sys.argv[2], sys.argv[3:]
print("| model | TPOT ms | decode GB/s | copy ceiling GB/s | % of copy ceiling | decode attention | step kept |")
print("|---|---|---|---|---|---|---|")
tpot = {}
for m in models:
    path = os.path.join(logs, f"{m}_after_b1.txt")
    if not os.path.exists(path):
        print(f"| {m} | skipped ||||||")
        continue
    r = engine_row(path)
    if r["error"]:
        print(f"| {m} | failed: {r['error']} ||||||")
        continue
    tpot[m] = r["tpot"]
    pct = 100 * r["gbps"] / r["copy"] if r["gbps"] and r["copy"] else None
    print(f"| {m} | {fmt(r['tpot'], '.3f')} | {fmt(r['gbps'], '.0f')} | {fmt(r['copy'], '.0f')} | {fmt(pct, '.1f')} | "
          f"{r['attn'] or '-'} | {r['step'] or '-'} |")
if "gemma-2-9b" in tpot and "gemma-2-9b-nocap" in tpot:
    cost = 100 * (tpot["gemma-2-9b"] / tpot["gemma-2-9b-nocap"] - 1)
    print(f"Gemma-2-9B softcapping (attention + final logits): {cost:+.2f}% TPOT over the same model without it "
          f"(issue 28: at most 3%)")
w = os.path.join(logs, "mistral-7b_window.txt")
if os.path.exists(w):
    r = engine_row(w)
    print(f"Mistral-7B past its window (4500-token prompt, window 4096): TPOT {fmt(r['tpot'], '.3f')} ms, "
          f"{fmt(r['gbps'], '.0f')} GB/s" + (f" ({r['error']})" if r["error"] else ""))
PY
  } | tee "$OUT/summary.md"
fi
pack
exit 0

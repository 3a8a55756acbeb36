#!/usr/bin/env bash
# One device call for the fp8 engine (issue 29's engine part; docs/llm.md, "FP8"): build for
# sm_90, run the fp8 engine's tests (CPU: the scale rule, the options, fp8 rounding simulated on
# the fixtures; GPU: the quantizing kernels against fp64, the engine against the transformers
# fixtures teacher-forced over 64 positions, real shapes against bf16, the ScaledGemm lines in
# the results file), then measure, same run, same GPU, TunableOp tuning on:
#   decode   batch-1 decode tokens/s of Llama-2-7B and Gemma-2B (builtin, random weights) in
#            bf16, fp8 (lm_head bf16) and fp8-all (lm_head e4m3), with the copy ceiling measured
#            in the run and each run's weight bytes against it
#   ttft     TTFT at a 2048-token prompt, bf16 and fp8
# Logs go to $OUT/logs.tgz, the table to $OUT/summary.md (printed last). Every step has a time
# limit and the whole run a budget (~9 minutes); a step that does not fit is skipped and listed:
# run again with GPU_FP8E_STEPS naming the rest (the build folder is kept on a warm machine).
#
# Knobs: GPU_FP8E_STEPS=build,test,decode,ttft (default all)   GPU_FP8E_BUDGET_S=540
#        GPU_FP8E_BUILD=<dir>   GPU_FP8E_MODELS="llama-2-7b gemma-2b"
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
OUT=${OUT:-$ROOT/gpu-fp8-engine-out}
BUILD=${GPU_FP8E_BUILD:-$ROOT/build}
STEPS=${GPU_FP8E_STEPS:-build,test,decode,ttft}
BUDGET=${GPU_FP8E_BUDGET_S:-540}
MODELS=${GPU_FP8E_MODELS:-llama-2-7b gemma-2b}
LOGS=$(mktemp -d /tmp/gpu-fp8-engine-logs.XXXXXX)
mkdir -p "$OUT"
[ -d /opt/torch/.venv/bin ] && export PATH="/opt/torch/.venv/bin:$PATH"
BIN="$BUILD/tools/tunableop"
start=$(date +%s)
# shellcheck source=scripts/gpu-budget.sh
source "$ROOT/scripts/gpu-budget.sh"

# The table: one row per model and dtype from the runs' JSON (missing runs left blank).
table() {
  /usr/bin/python3 - "$LOGS" "$MODELS" <<'PY'
import sys
sys.path.insert(0, "scripts")
import llm_json
logs, models = sys.argv[1], sys.argv[2].split()

def get(j, key):
    if isinstance(j, dict):
        if key in j:
            return j[key]
        for v in j.values():
            r = get(v, key)
            if r is not None:
                return r
    return None

print("| model | dtype | decode tok/s | x bf16 | weight GB | % of copy ceiling | TTFT(2048) ms | x bf16 |")
print("|---|---|---|---|---|---|---|---|")
for m in models:
    base = {}
    for dt in ("bf16", "fp8", "fp8-all"):
        d, _ = llm_json.load(logs, f"decode_{m}_{dt}", ".txt")
        t, _ = llm_json.load(logs, f"ttft_{m}_{dt}", ".txt")
        tps, ttft = get(d, "decode_tokens_per_s"), get(t, "ttft_ms")
        frac, wb = get(d, "decode_fraction_of_copy"), get(d, "weight_bytes")
        if dt == "bf16":
            base = {"tps": tps, "ttft": ttft}
        f = lambda v, fmt: fmt.format(v) if v else ""
        ratio = lambda a, b: "{:.2f}x".format(a / b) if a and b else ""
        print(f"| {m} | {dt} | {f(tps, '{:.1f}')} | {ratio(tps, base.get('tps'))} | {f(wb and wb / 1e9, '{:.2f}')} "
              f"| {f(frac and 100 * frac, '{:.1f}%')} | {f(ttft, '{:.1f}')} | {ratio(ttft, base.get('ttft'))} |")
PY
}

summary() {
  {
    summary_head gpu-fp8-engine
    summary_tests "positions [0-9]+, min cosine"
    echo
    echo '## batch-1 decode and TTFT(2048), tuned (x bf16: fp8 decode tok/s over bf16; TTFT fp8 over bf16)'
    table
  } >"$OUT/summary.md"
  summary_finish
}
trap summary EXIT

machine_info

if want build; then
  build_targets "$BUILD" tunableop_cli test_llm test_llm_cuda test_llm_cuda_kernels
fi
if [ ! -x "$BIN" ]; then
  grep -E "error|FAILED" "$LOGS/build.log" 2>/dev/null | head -20
  echo "gpu-fp8-engine: tunableop was not built; nothing to run"
  exit 1
fi

if want test; then
  timed ctest 60 240 ctest --test-dir "$BUILD" -V --timeout 220 \
    -R 'LlmCudaFp8|Fp8Scale|EngineDtype|LinearOpScaled|Fp8Accuracy'
fi

# Each model and dtype keeps its own results file: decode tunes its shapes, TTFT adds prefill's.
llm() {  # name need cap args...
  local name=$1 need=$2 cap=$3
  shift 3
  timed "$name" "$need" "$cap" env TUNABLEOP_FILENAME="$LOGS/results_${name#*_}_%d.csv" "$BIN" llm --device cuda \
    --tune --json "$@"
}
if want decode; then
  for m in $MODELS; do
    for dt in bf16 fp8 fp8-all; do
      llm "decode_${m}_${dt}" 40 120 --model builtin:"$m" --dtype "$dt" --total-tokens 256 --iterations 3 \
        --warmup 1 --measure-bandwidth
    done
  done
fi
if want ttft; then
  for m in $MODELS; do
    for dt in bf16 fp8; do
      llm "ttft_${m}_${dt}" 30 90 --model builtin:"$m" --dtype "$dt" --prompt-len 2048 --max-new-tokens 1 \
        --iterations 3
    done
  done
fi

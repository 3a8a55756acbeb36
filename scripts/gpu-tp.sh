#!/usr/bin/env bash
# One call on a two-GPU machine (nvidia-h200-x2) for tensor parallelism and the all-reduce op
# (issue 14): configure for sm_90, build only the CLI and the multi-GPU tests, then
#   1. the tests: CUDA all-reduce candidates (group mode, rank mode under graph replays, every
#      rank on rank 0's decision, the residual epilogue, the LL kernel's epoch wrapping under
#      replays), the tensor-parallel engine (TP=2 greedy tokens == TP=1 on the Hugging Face
#      fixtures in fp32 and on the random-weight models in bf16, 32 steps) and FusedLinear (its
#      fp32 store among the other outputs);
#   2. `tunableop allreduce`: every candidate's time per message size (8K, 64K, 1M, 16M, bf16)
#      and the op's tuned choice, kept in a results file; then the engine's row-parallel form
#      (fp32 partial sums rounded to bf16 and added to the residual: 16K is one decode token);
#   3. Llama-2-7B shape, bf16, batch 1, 256 tokens: tokens/s with TP=1 and TP=2 tuned (untuned
#      too with TP_UNTUNED=1), TP=2 with a decode profile (rank 0's kernels, eager), then TP=2
#      with other step variants forced while time is left.
# Everything must fit in one call of TP_BUDGET_S seconds: each step gets a timeout from what is
# left (a whole run took 106 s on 2 x H200).
# Logs go to $OUT/logs (./gpu-tp-out elsewhere); a short table is printed last.
#
# NCCL: scripts/nccl-env.sh says where it comes from. Without a header the NCCL candidates are
# not built and the table says so.
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0; see docs/parallel.md).
#
# Knobs: TP_BUILD=dir (default ./build-tp), TP_BUDGET_S=seconds for the whole call (default 175).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/gpu-tp-out}
LOGS="$OUT/logs"
BUILD=${TP_BUILD:-$ROOT/build-tp}
budget_s=${TP_BUDGET_S:-175}
# shellcheck source=scripts/gpu-call.sh
source "$ROOT/scripts/gpu-call.sh"
stamp "machine: $gpus GPUs: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | xargs)"

# NCCL header and library.
# shellcheck source=scripts/nccl-env.sh
source "$ROOT/scripts/nccl-env.sh"
stamp "NCCL header: ${nccl_inc:-none}; library: ${TUNABLEOP_NCCL_LIBRARY:-the toolkit's or the loader's}"

stamp "configure"
if ! cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DTUNABLEOP_WITH_BLIS=OFF -DTUNABLEOP_WITH_ONEDNN=OFF -DTUNABLEOP_BUILD_BENCH=OFF \
  "${nccl_cmake[@]}" \
  >"$LOGS/configure.log" 2>&1; then
  tail -30 "$LOGS/configure.log"
  echo "gpu-tp: configure failed"
  exit 1
fi
grep -E "tunableop:" "$LOGS/configure.log"

stamp "build"
targets="tunableop_cli test_cuda_all_reduce test_llm_parallel_cuda test_cuda_fused_linear"
# shellcheck disable=SC2086
if ! timeout "$(budget 95 80)" ninja -C "$BUILD" -j32 -k 0 $targets >"$LOGS/build.log" 2>&1; then
  grep -E "FAILED|error" "$LOGS/build.log" | head -20
  echo "gpu-tp: build failed or ran out of time; continuing with what was built"
fi
stamp "built"

T="$BUILD/tests"
bin="$BUILD/tools/tunableop"
# Most important first (the call is capped at TP_BUDGET_S): the tests of the new kernels and of
# the tokens, the tuned 7B runs, then the all-reduce tables, the FusedLinear test and the other
# step variants while time is left.
run_test all_reduce "$T/backends/cuda/all_reduce/test_cuda_all_reduce" 25 70
run_test tp_engine "$T/llm/test_llm_parallel_cuda" 25 60

if [ -x "$bin" ]; then
  # Llama-2-7B shape: TP=1 then TP=2 (untuned too with TP_UNTUNED=1).
  llm() {  # name, cap, keep, args...
    local name=$1 cap=$2 keep=$3
    shift 3
    local t
    t=$(budget "$cap" "$keep")
    [ "$t" -gt 10 ] || { echo "{}" >"$LOGS/$name.json"; summary+=("$name: no time left"); return; }
    stamp "llm $name (up to ${t}s)"
    TUNABLEOP_FILENAME="$OUT/llm_results_%d.csv" timeout "$t" "$bin" llm --device cuda --model builtin:llama-2-7b \
      --dtype bf16 --mode bench --total-tokens 256 --json --print-ids "$@" >"$LOGS/$name.json" 2>"$LOGS/$name.err"
    local rc=$?
    summary+=("llm $name: rc $rc")
    [ $rc = 0 ] || tail -3 "$LOGS/$name.err"
  }
  if [ "${TP_UNTUNED:-0}" = 1 ]; then
    llm tp1_untuned 15 75 --no-tune --iterations 3 --warmup 1
    llm tp2_untuned 15 60 --no-tune --iterations 3 --warmup 1 --tp 2
  fi
  # Tuning budgets kept small (at most 3 s per problem; the same for TP=1 and TP=2) so that
  # both tuned runs fit in what is left of the call.
  export TUNABLEOP_MAX_TUNING_DURATION_MS=10 TUNABLEOP_MAX_WARMUP_DURATION_MS=5 TUNABLEOP_MAX_PROBLEM_DURATION_MS=3000
  llm tp1_tuned 30 30 --tune --iterations 3 --warmup 1
  llm tp2_tuned 30 8 --tune --iterations 3 --warmup 1 --tp 2 --profile-decode 2

  t=$(budget 10 0)
  stamp "allreduce table, fp32 partial sums into the residual (up to ${t}s)"
  TUNABLEOP_FILENAME="$OUT/allreduce_results%d.csv" timeout "$t" "$bin" allreduce --device cuda --gpus 0,1 \
    --dtype fp32 --residual bf16 --sizes 16K,64K,1M --iterations 100 --rounds 7 --effort 2 --tune \
    >"$LOGS/allreduce_residual.txt" 2>&1
  summary+=("allreduce --residual: rc $?")
  t=$(budget 12 0)
  stamp "allreduce table (up to ${t}s)"
  TUNABLEOP_FILENAME="$OUT/allreduce_results%d.csv" timeout "$t" "$bin" allreduce --device cuda --gpus 0,1 \
    --dtype bf16 --sizes 8K,64K,1M,16M --iterations 100 --rounds 7 --effort 2 --tune >"$LOGS/allreduce.txt" 2>&1
  summary+=("allreduce: rc $?")
  cp "$OUT"/allreduce_results0.csv "$LOGS/" 2>/dev/null
  # The FusedLinear kernel's fp32 store (the row-parallel partial sums) with every other output.
  run_test fused_linear "$T/backends/cuda/fused_linear/test_cuda_fused_linear" 15 0
  # With --tp the whole-step variants are not timed (decode uses fused, PDL early): the same
  # tuned run with other variants forced, while time is left (the tuning is in the results file).
  llm tp2_prefetch2 12 0 --tune --iterations 2 --warmup 1 --tp 2 --step-variant 9
  llm tp2_prefetch1 12 0 --tune --iterations 2 --warmup 1 --tp 2 --step-variant 6
  llm tp2_pdl_late 12 0 --tune --iterations 2 --warmup 1 --tp 2 --step-variant 4
  cp "$OUT"/llm_results_*.csv "$LOGS/" 2>/dev/null
else
  summary+=("tunableop CLI: not built")
fi

tar czf "$OUT/logs.tgz" -C "$OUT" logs 2>/dev/null
stamp "done"
echo
echo "== gpu-tp summary =="
printf '%s\n' "${summary[@]}"
echo
echo "== all-reduce, bf16, 2 GPUs (us per call; group mode, back to back) =="
grep -E "^all-reduce|KiB|MiB|results file" "$LOGS/allreduce.txt" 2>/dev/null | head -60
echo
echo "== the engine's form: fp32 partial sums, rounded to bf16, added to the residual (16 KiB = one token) =="
grep -E "^all-reduce|KiB|MiB" "$LOGS/allreduce_residual.txt" 2>/dev/null | head -40
echo
echo "== Llama-2-7B shape, bf16, batch 1, 256 tokens =="
python3 - "$LOGS" "$ROOT" <<'PY'
import json, os, sys
logs = sys.argv[1]
sys.path.insert(0, os.path.join(sys.argv[2], "scripts"))
from llm_json import load as load_from
def load(name):
    return load_from(logs, name)
print(f"{'run':<14} {'tok/s':>9} {'TPOT ms':>9} {'TTFT ms':>9}  device")
runs = {n: load(n) for n in ("tp1_untuned", "tp2_untuned", "tp1_tuned", "tp2_tuned", "tp2_pdl_late",
                             "tp2_prefetch1", "tp2_prefetch2")}
for n, (j, _) in runs.items():
    if j:
        print(f"{n:<14} {j.get('tokens_per_s', 0):>9.1f} {j.get('tpot_ms', 0):>9.3f} {j.get('ttft_ms', 0):>9.2f}  {j.get('device', '')[:90]}")
    else:
        print(f"{n:<14} {'-':>9}   (no result: see logs/{n}.err)")
for mode in ("untuned", "tuned"):
    one, two = runs["tp1_" + mode], runs["tp2_" + mode]
    if one[0] and two[0] and one[0].get("tokens_per_s"):
        print(f"TP=2 / TP=1 ({mode}): {two[0]['tokens_per_s'] / one[0]['tokens_per_s']:.3f}x (target >= 1.5x)")
    if one[1] and two[1]:
        n = min(32, len(one[1]), len(two[1]))
        same = one[1][:n] == two[1][:n]
        print(f"first {n} greedy ids TP=2 vs TP=1 ({mode}): {'same' if same else 'DIFFERENT'}")
base = runs["tp1_tuned"][0].get("tokens_per_s") if runs["tp1_tuned"][0] else None
for n in ("tp2_pdl_late", "tp2_prefetch1", "tp2_prefetch2"):
    j = runs[n][0]
    if base and j and j.get("tokens_per_s"):
        print(f"{n} / tp1_tuned: {j['tokens_per_s'] / base:.3f}x")
prof = runs["tp2_tuned"][0].get("decode_profile") if runs["tp2_tuned"][0] else None
if prof:
    print(f"TP=2 tuned decode profile (rank 0, eager): step {prof.get('step_us', 0):.0f} us (graph), "
          f"matmul {prof.get('matmul_us', 0):.0f} us, other {prof.get('other_us', 0):.0f} us")
    for k in sorted(prof.get("kernels", []), key=lambda k: -k.get("us", 0))[:14]:
        print(f"  {k.get('label', '')[:48]:<48} {k.get('calls', 0):>5} calls {k.get('us', 0):>9.1f} us")
PY

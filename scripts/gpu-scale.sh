#!/usr/bin/env bash
# One call on a four-GPU machine (nvidia-h100-x4) for issue 30: tensor parallelism in both modes
# (one process driving N GPUs; one process per GPU under mpirun), configure for sm_90, build the
# CLI and the multi-GPU tests, then, most important first:
#   1. tests: the CUDA all-reduce candidates (one process), the one-process TP engine (TP=2 ids
#      == TP=1), and the multi-process runs on 2 GPUs (`mpirun -np 2 tunableop llm --tp 2`: the
#      ids of one GPU with every all-reduce candidate forced in turn, the peer kernels over CUDA
#      IPC, NCCL over MPI; the all-reduce table across processes);
#   2. Llama-2-7B shape, bf16, batch 1, 256 tokens, tuned, device loop: TP=1, then TP=2 and
#      TP=4 in each mode (targets: TP=4 >= 2.8x TP=1, TP=2 >= 1.7x; the two modes' tokens the
#      same and tokens/s within 3%);
#   3. the all-reduce tables, bf16 8 KiB..16 MiB and the engine's fp32-into-residual form, 2 and
#      4 ranks, one process and across processes (targets at 8 KiB: <= 4 us on 2, <= 6 us on 4);
#   4. Llama-2-70B, TP=4, batch 1: tokens/s against the 4 GPUs' aggregate copy ceiling measured
#      in the same process (target >= 80%), and TTFT(2048).
# Logs go to $OUT/logs (./gpu-scale-out elsewhere); a short table is printed last. Capped at
# SCALE_BUDGET_S seconds (default 570: one call of the run tool), each step's timeout from what
# is left.
#
# MPI: scripts/mpi-env.sh finds one (the PATH, HPC-X, or Debian's OpenMPI carried in .mpi/, made
# here by scripts/mpi-carry.sh: run it and name ".mpi" in the call's carry list). Without one the
# multi-process steps are skipped and the table says so. NCCL: scripts/nccl-env.sh. NVLink
# multicast stays off (NCCL_NVLS_ENABLE=0; docs/parallel.md).
#
# Knobs: SCALE_BUILD=dir (default ./build-scale), SCALE_BUDGET_S, SCALE_SKIP_70B=1, SCALE_TESTS=0 (skip
# step 1), SCALE_70B_PROCESSES=1 (the 70B also as 4 processes), SCALE_PROFILE=1 (each kernel of a
# TP=1 and a TP=4 decode step, --profile-decode), SCALE_MAIN=0 (skip steps 2 and 3).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
OUT=${OUT:-$ROOT/gpu-scale-out}
LOGS="$OUT/logs"
BUILD=${SCALE_BUILD:-$ROOT/build-scale}
budget_s=${SCALE_BUDGET_S:-570}
# shellcheck source=scripts/gpu-call.sh
source "$ROOT/scripts/gpu-call.sh"
stamp "machine: $gpus GPUs: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | xargs)"

# shellcheck source=scripts/nccl-env.sh
source "$ROOT/scripts/nccl-env.sh"
# shellcheck source=scripts/mpi-env.sh
source "$ROOT/scripts/mpi-env.sh"
stamp "NCCL header: ${nccl_inc:-none}; library: ${TUNABLEOP_NCCL_LIBRARY:-the toolkit or the loader}"
stamp "MPI: ${MPIRUN:-none} ($mpi_how)"

stamp "configure"
if ! cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DTUNABLEOP_WITH_BLIS=OFF -DTUNABLEOP_WITH_ONEDNN=OFF -DTUNABLEOP_BUILD_BENCH=OFF "${nccl_cmake[@]}" "${mpi_cmake[@]}" \
  >"$LOGS/configure.log" 2>&1; then
  tail -30 "$LOGS/configure.log"
  echo "gpu-scale: configure failed"
  exit 1
fi
grep -E "tunableop:" "$LOGS/configure.log"
grep -q "MPI offline tuning ON" "$LOGS/configure.log" || { [ -n "$MPIRUN" ] && MPIRUN="" mpi_how="CMake found no MPI (see configure.log)"; }

stamp "build"
targets="tunableop_cli test_cuda_all_reduce test_llm_parallel_cuda test_tools_tp_mpi_cuda"
# shellcheck disable=SC2086
if ! timeout "$(budget 200 300)" ninja -C "$BUILD" -j"$(nproc)" -k 0 $targets >"$LOGS/build.log" 2>&1; then
  grep -E "FAILED|error" "$LOGS/build.log" | head -20
  echo "gpu-scale: build failed or ran out of time; continuing with what was built"
fi
stamp "built"

T="$BUILD/tests"
bin="$BUILD/tools/tunableop"
if [ "${SCALE_TESTS:-1}" = 1 ]; then
  run_test all_reduce "$T/backends/cuda/all_reduce/test_cuda_all_reduce" 30 260
  run_test tp_engine "$T/llm/test_llm_parallel_cuda" 30 240
  if [ -n "$MPIRUN" ]; then
    run_test tp_processes "$T/tools/test_tools_tp_mpi_cuda" 60 200
  else
    summary+=("tp_processes: skipped (no MPI: $mpi_how)")
  fi
fi

[ -x "$bin" ] || { echo "gpu-scale: the CLI was not built"; tail -20 "$LOGS/build.log"; exit 1; }
# Tuning budgets kept small (at most 3 s per problem; the same for every run) so that every
# tuned run fits; one results file per GPU, shared by the runs (a mode's second run reuses
# what the first tuned for the same shard shapes).
export TUNABLEOP_MAX_TUNING_DURATION_MS=10 TUNABLEOP_MAX_WARMUP_DURATION_MS=5 TUNABLEOP_MAX_PROBLEM_DURATION_MS=3000
export TUNABLEOP_FILENAME="$OUT/scale_results_%d.csv"
llm() {  # name, cap, keep, np (0: one process), args...
  local name=$1 cap=$2 keep=$3 np=$4
  shift 4
  local t
  t=$(budget "$cap" "$keep")
  [ "$t" -gt 10 ] || { summary+=("llm $name: no time left"); return; }
  if [ "$np" -gt 0 ] && [ -z "$MPIRUN" ]; then summary+=("llm $name: skipped (no MPI)"); return; fi
  stamp "llm $name (up to ${t}s)"
  local launch=()
  [ "$np" -gt 0 ] && launch=("${mpi_prefix[@]}" -np "$np")
  timeout "$t" "${launch[@]}" "$bin" llm --device cuda --dtype bf16 --mode bench --json --print-ids "$@" \
    >"$LOGS/$name.json" 2>"$LOGS/$name.err"
  local rc=$?
  summary+=("llm $name: rc $rc")
  [ $rc = 0 ] || tail -3 "$LOGS/$name.err"
}
seven=(--model builtin:llama-2-7b --total-tokens 256 --tune --iterations 3 --warmup 1 --decode-loop device)
allreduce() {  # name, cap, keep, np (0: one process over --gpus), args...
  local name=$1 cap=$2 keep=$3 np=$4
  shift 4
  local t
  t=$(budget "$cap" "$keep")
  [ "$t" -gt 5 ] || { summary+=("allreduce $name: no time left"); return; }
  if [ "$np" -gt 0 ] && [ -z "$MPIRUN" ]; then summary+=("allreduce $name: skipped (no MPI)"); return; fi
  stamp "allreduce $name (up to ${t}s)"
  local launch=()
  [ "$np" -gt 0 ] && launch=("${mpi_prefix[@]}" -np "$np")
  TUNABLEOP_FILENAME="$OUT/allreduce_results%d.csv" timeout "$t" "${launch[@]}" "$bin" allreduce --device cuda \
    --iterations 100 --rounds 7 --effort 2 --tune "$@" >"$LOGS/allreduce_$name.txt" 2>&1
  summary+=("allreduce $name: rc $?")
}
if [ "${SCALE_MAIN:-1}" = 1 ]; then
  llm tp1 40 200 0 "${seven[@]}"
  llm tp2_threads 40 170 0 "${seven[@]}" --tp 2
  llm tp2_processes 40 150 2 "${seven[@]}" --tp 2
  llm tp4_threads 40 120 0 "${seven[@]}" --tp 4
  llm tp4_processes 40 100 4 "${seven[@]}" --tp 4
  allreduce 4gpu_threads 20 80 0 --gpus 0,1,2,3 --dtype bf16 --sizes 8K,64K,1M,16M
  allreduce 4gpu_processes 25 60 4 --dtype bf16 --sizes 8K,64K,1M,16M
  allreduce 2gpu_threads 15 50 0 --gpus 0,1 --dtype bf16 --sizes 8K,64K,1M,16M
  allreduce 2gpu_processes 20 40 2 --dtype bf16 --sizes 8K,64K,1M,16M
  allreduce 4gpu_residual_threads 12 30 0 --gpus 0,1,2,3 --dtype fp32 --residual bf16 --sizes 16K,32K,1M
fi

if [ "${SCALE_SKIP_70B:-0}" != 1 ]; then
  seventy=(--model builtin:llama-2-70b --tp 4 --tune --decode-loop device)
  llm 70b_tp4 90 20 0 "${seventy[@]}" --total-tokens 256 --iterations 2 --warmup 1 --measure-bandwidth
  llm 70b_tp4_ttft2048 40 0 0 "${seventy[@]}" --prompt-len 2048 --max-new-tokens 1 --iterations 3 --warmup 1
  [ "${SCALE_70B_PROCESSES:-0}" = 1 ] &&
    llm 70b_tp4_processes 90 0 4 "${seventy[@]}" --total-tokens 256 --iterations 2 --warmup 1 --measure-bandwidth
fi
# Where a TP=4 step's time goes (each kernel of 16 eager decode steps, rank 0), against TP=1's.
if [ "${SCALE_PROFILE:-0}" = 1 ]; then
  llm tp1_profile 40 0 0 "${seven[@]}" --profile-decode 16
  llm tp4_profile 40 0 4 "${seven[@]}" --tp 4 --profile-decode 16
fi
cp "$OUT"/scale_results_*.csv "$OUT"/allreduce_results*.csv "$LOGS/" 2>/dev/null

tar czf "$OUT/logs.tgz" -C "$OUT" logs 2>/dev/null
stamp "done"
echo
echo "== gpu-scale summary =="
printf '%s\n' "${summary[@]}"
echo
for f in tp1_profile tp4_profile; do
  [ -s "$LOGS/$f.json" ] || continue
  echo "== $f: each kernel of 16 eager decode steps (rank 0) =="
  python3 -c 'import json,sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        print(json.dumps(json.loads(l).get("extras", {}).get("decode_profile", "no profile in the JSON"))[:4000])' "$LOGS/$f.json"
done
for f in 4gpu_threads 4gpu_processes 2gpu_threads 2gpu_processes 4gpu_residual_threads; do
  echo "== all-reduce $f (us per call) =="
  grep -E "^all-reduce|8 KiB|16 KiB|32 KiB|chosen:" "$LOGS/allreduce_$f.txt" 2>/dev/null | head -24
done
echo
echo "== Llama-2-7B shape, bf16, batch 1, 256 tokens, tuned, device loop =="
python3 - "$LOGS" "$ROOT" <<'PY'
import json, os, sys
logs = sys.argv[1]
sys.path.insert(0, os.path.join(sys.argv[2], "scripts"))
from llm_json import load as load_from
def load(name):
    return load_from(logs, name)
runs = {n: load(n) for n in ("tp1", "tp2_threads", "tp2_processes", "tp4_threads", "tp4_processes")}
base = runs["tp1"][0].get("tokens_per_s")
print(f"{'run':<15} {'tok/s':>9} {'x TP=1':>8} {'TPOT ms':>9} {'TTFT ms':>9}  ids vs TP=1 (first 32)")
for n, (j, ids) in runs.items():
    if not j:
        print(f"{n:<15} {'-':>9}   (no result: logs/{n}.err)")
        continue
    tps = j.get("tokens_per_s", 0)
    k = min(32, len(ids), len(runs["tp1"][1]))
    same = "same" if k and ids[:k] == runs["tp1"][1][:k] else "DIFFERENT" if k else "-"
    print(f"{n:<15} {tps:>9.1f} {tps / base if base else 0:>8.3f} {j.get('tpot_ms', 0):>9.3f} "
          f"{j.get('ttft_ms', 0):>9.2f}  {same}")
for tp in ("tp2", "tp4"):
    a, b = runs[tp + "_threads"], runs[tp + "_processes"]
    if a[0] and b[0] and a[0].get("tokens_per_s"):
        k = min(len(a[1]), len(b[1]))
        print(f"{tp}: processes / threads {b[0]['tokens_per_s'] / a[0]['tokens_per_s']:.3f}x tokens/s; "
              f"ids {'the same' if k and a[1] == b[1] else 'DIFFERENT'} (target: same ids, within 3%)")
print("targets: TP=2 >= 1.7x, TP=4 >= 2.8x TP=1")
for n in ("70b_tp4", "70b_tp4_processes", "70b_tp4_ttft2048"):
    j, _ = load(n)
    if not j:
        print(f"{n}: no result (logs/{n}.err)")
        continue
    x = j.get("extras", {})
    if n != "70b_tp4_ttft2048":
        print(f"Llama-2-70B TP=4 batch 1 ({'processes' if 'processes' in n else 'one process'}, {j.get('decode_loop')} loop): {j.get('tokens_per_s', 0):.1f} tok/s, TPOT {j.get('tpot_ms', 0):.2f} ms, "
              f"decode {j.get('decode_weight_gbps', 0):.0f} GB/s = {100 * x.get('decode_fraction_of_copy', 0):.1f}% "
              f"of the 4 GPUs' copy ceiling {x.get('copy_gbps', 0):.0f} GB/s (target >= 80%)")
    else:
        print(f"Llama-2-70B TP=4 TTFT(2048): {j.get('ttft_ms', 0):.1f} ms")
PY

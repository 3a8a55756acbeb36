#!/usr/bin/env bash
# Issue 32 in one call on an 8-GPU host (nvidia-h100-x8 or nvidia-h200-x8, lent only at times):
# Llama-2-70B shape, bf16, random weights, tuned, TP=4 on GPUs 0-3 and TP=8 on all eight, in the
# same call:
#   1. batch 1: tokens/s (256 tokens, device loop) and TTFT(2048) at TP=4 and TP=8, each against
#      the copy ceiling of its GPUs measured in the same process (targets: TP=8 >= 1.6x TP=4's
#      tokens/s; TP=8 >= 70% of the 8 GPUs' ceiling);
#   2. the all-reduce table for 8 ranks, 8 KiB to 16 MiB, every candidate and the op's choice,
#      one process over 8 GPUs and 8 processes (target: <= 8 us at 8 KiB), and the engine's
#      fp32-into-residual form at 32 KiB (one 70B token);
#   3. under load: `serve --tp 8` (8 processes when MPI is there, else one) and `bench serve`'s
#      synthetic workload at an unlimited rate, then 8 requests/s.
# `--dry-run` prints the plan (every command, in order, with its timeout) and exits: what can be
# checked without the machine. Logs under $OUT/logs (./gpu-tp8-out elsewhere), a short table last.
#
# MPI and NCCL as in scripts/gpu-scale.sh (scripts/mpi-env.sh, scripts/nccl-env.sh; carry .mpi
# from scripts/mpi-carry.sh where the image has no MPI). NVLink multicast stays off.
# Knobs: TP8_BUILD=dir (default ./build-tp8), TP8_BUDGET_S (default 570).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
DRY=0
[ "${1:-}" = "--dry-run" ] && DRY=1
OUT=${OUT:-$ROOT/gpu-tp8-out}
LOGS="$OUT/logs"
BUILD=${TP8_BUILD:-$ROOT/build-tp8}
bin="$BUILD/tools/tunableop"
export TUNABLEOP_MAX_TUNING_DURATION_MS=10 TUNABLEOP_MAX_WARMUP_DURATION_MS=5 TUNABLEOP_MAX_PROBLEM_DURATION_MS=3000
export TUNABLEOP_FILENAME="$OUT/tp8_results_%d.csv"

# step NAME CAP KEEP NP CMD...: one step of the plan; NP > 0 runs CMD under mpirun on NP ranks
# (skipped, and said, without MPI). --dry-run prints it instead.
step() {
  local name=$1 cap=$2 keep=$3 np=$4
  shift 4
  if [ $DRY = 1 ]; then
    printf '%-22s cap %3ss keep %3ss  %s%s\n' "$name" "$cap" "$keep" "$([ "$np" -gt 0 ] && echo "mpirun -np $np ")" "$*"
    return
  fi
  local t
  t=$(budget "$cap" "$keep")
  [ "$t" -gt 10 ] || { summary+=("$name: no time left"); return; }
  if [ "$np" -gt 0 ] && [ -z "$MPIRUN" ]; then summary+=("$name: skipped (no MPI: $mpi_how)"); return; fi
  stamp "$name (up to ${t}s)"
  local launch=()
  [ "$np" -gt 0 ] && launch=("${mpi_prefix[@]}" -np "$np")
  timeout "$t" "${launch[@]}" "$@" >"$LOGS/$name.out" 2>"$LOGS/$name.err"
  local rc=$?
  summary+=("$name: rc $rc")
  [ $rc = 0 ] || tail -3 "$LOGS/$name.err"
}

seventy=(llm --device cuda --dtype bf16 --model builtin:llama-2-70b --mode bench --json --print-ids --tune
  --decode-loop device)
plan() {
  # 1. batch 1, TP=4 on half the GPUs, TP=8 on all of them.
  step tp4_decode 100 380 0 "$bin" "${seventy[@]}" --tp 4 --total-tokens 256 --iterations 2 --warmup 1 --measure-bandwidth
  step tp8_decode 100 280 0 "$bin" "${seventy[@]}" --tp 8 --total-tokens 256 --iterations 2 --warmup 1 --measure-bandwidth
  step tp4_ttft2048 40 240 0 "$bin" "${seventy[@]}" --tp 4 --prompt-len 2048 --max-new-tokens 1 --iterations 3
  step tp8_ttft2048 40 200 0 "$bin" "${seventy[@]}" --tp 8 --prompt-len 2048 --max-new-tokens 1 --iterations 3
  step tp8_decode_processes 100 100 8 "$bin" "${seventy[@]}" --tp 8 --total-tokens 256 --iterations 2 --warmup 1
  # 2. the all-reduce table for 8 ranks.
  local sizes=8K,16K,32K,64K,256K,1M,4M,16M
  step allreduce8_threads 30 70 0 "$bin" allreduce --device cuda --gpus 0,1,2,3,4,5,6,7 --dtype bf16 --sizes $sizes \
    --iterations 100 --rounds 7 --effort 2 --tune
  step allreduce8_processes 40 40 8 "$bin" allreduce --device cuda --dtype bf16 --sizes $sizes --iterations 100 \
    --rounds 7 --effort 2 --tune
  step allreduce8_residual 20 20 0 "$bin" allreduce --device cuda --gpus 0,1,2,3,4,5,6,7 --dtype fp32 --residual bf16 \
    --sizes 32K --iterations 100 --rounds 7 --effort 2 --tune
  # 3. under load: serve --tp 8 and its benchmark (the serve issue's synthetic workload).
  serve_under_load 170
}

# serve --tp 8 in the background (8 processes under MPI, else one), `bench serve` at an unlimited
# rate and at 8 requests/s against it, then SIGTERM to the server (mpirun passes it on).
serve_under_load() {
  local cap=$1 launch=() np=0
  [ -n "$MPIRUN" ] && launch=("${mpi_prefix[@]}" -np 8) np=8
  local serve=("$bin" serve --device cuda --model builtin:llama-2-70b --tp 8 --tune --port 0 --max-seq 2048)
  local inf=("$bin" bench serve --url 'http://127.0.0.1:PORT' --seed 1 --requests 200 --rate inf --json "$LOGS/serve_inf.json")
  local rate8=("$bin" bench serve --url 'http://127.0.0.1:PORT' --seed 1 --requests 100 --rate 8 --json "$LOGS/serve_rate8.json")
  if [ $DRY = 1 ]; then
    printf '%-22s cap %3ss           %s%s &\n' serve_tp8 "$cap" "$([ $np -gt 0 ] && echo "mpirun -np $np ")" "${serve[*]}"
    printf '%-22s                    %s\n' "" "${inf[*]}" "" "${rate8[*]}"
    return
  fi
  local t
  t=$(budget "$cap" 0)
  [ "$t" -gt 60 ] || { summary+=("serve_tp8: no time left"); return; }
  stamp "serve_tp8 (up to ${t}s)"
  local stop=$(($(date +%s) + t))
  "${launch[@]}" "${serve[@]}" >"$LOGS/serve.out" 2>"$LOGS/serve.err" &
  local server=$! port=""
  while [ "$(date +%s)" -lt "$stop" ]; do
    port=$(sed -n 's/^tunableop serve: ready on http:\/\/[^:]*:\([0-9]*\) .*/\1/p' "$LOGS/serve.out")
    [ -n "$port" ] && break
    kill -0 $server 2>/dev/null || break
    sleep 0.5
  done
  if [ -n "$port" ]; then
    for b in inf rate8; do
      local -n cmd=$b
      local left=$((stop - $(date +%s)))
      [ $left -gt 5 ] && timeout $left "${cmd[@]/PORT/$port}" >"$LOGS/serve_$b.txt" 2>&1
    done
    summary+=("serve_tp8: ready on port $port")
  else
    summary+=("serve_tp8: did not get ready (logs/serve.err)")
    tail -5 "$LOGS/serve.err"
  fi
  kill -TERM $server 2>/dev/null
  wait $server
}

if [ $DRY = 1 ]; then
  MPIRUN="mpirun (scripts/mpi-env.sh)" summary=()
  echo "gpu-tp8 plan (issue 32), one call on an 8-GPU host, TP8_BUDGET_S=${TP8_BUDGET_S:-570}:"
  echo "configure for sm_90 (NCCL from scripts/nccl-env.sh, MPI from scripts/mpi-env.sh), build tunableop_cli"
  plan
  echo "then the table: TP=8 / TP=4 tokens/s (target >= 1.6x), each against its GPUs' copy ceiling (TP=8 >= 70%),"
  echo "TTFT(2048) at both, the 8-rank all-reduce at 8 KiB (target <= 8 us) in both modes, serve throughput at TP=8."
  exit 0
fi

budget_s=${TP8_BUDGET_S:-570}
# shellcheck source=scripts/gpu-call.sh
source "$ROOT/scripts/gpu-call.sh"
stamp "machine: $gpus GPUs: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | xargs)"
[ "$gpus" -ge 8 ] || { echo "gpu-tp8: needs 8 GPUs, found $gpus (blocked: ask status for an 8-GPU kind)"; exit 1; }
# shellcheck source=scripts/nccl-env.sh
source "$ROOT/scripts/nccl-env.sh"
# shellcheck source=scripts/mpi-env.sh
source "$ROOT/scripts/mpi-env.sh"
stamp "MPI: ${MPIRUN:-none} ($mpi_how)"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DTUNABLEOP_WITH_BLIS=OFF \
  -DTUNABLEOP_WITH_ONEDNN=OFF -DTUNABLEOP_BUILD_BENCH=OFF "${nccl_cmake[@]}" "${mpi_cmake[@]}" >"$LOGS/configure.log" 2>&1 ||
  { tail -30 "$LOGS/configure.log"; exit 1; }
grep -q "MPI offline tuning ON" "$LOGS/configure.log" || MPIRUN=""
timeout "$(budget 200 360)" ninja -C "$BUILD" -j"$(nproc)" tunableop_cli >"$LOGS/build.log" 2>&1 ||
  { grep -E "FAILED|error" "$LOGS/build.log" | head -20; exit 1; }
stamp "built"
plan
tar czf "$OUT/logs.tgz" -C "$OUT" logs 2>/dev/null
stamp "done"
echo
echo "== gpu-tp8 summary =="
printf '%s\n' "${summary[@]}"
for f in allreduce8_threads allreduce8_processes allreduce8_residual; do
  echo "== $f (us per call) =="
  grep -E "^all-reduce|KiB|MiB|chosen:" "$LOGS/$f.out" 2>/dev/null | head -40
done
python3 - "$LOGS" "$ROOT" <<'PY'
import json, os, sys
logs = sys.argv[1]
sys.path.insert(0, os.path.join(sys.argv[2], "scripts"))
from llm_json import load as load_from
def load(name):
    return load_from(logs, name, ".out")[0]
r = {n: load(n) for n in ("tp4_decode", "tp8_decode", "tp4_ttft2048", "tp8_ttft2048", "tp8_decode_processes")}
for n in ("tp4_decode", "tp8_decode", "tp8_decode_processes"):
    j = r[n]
    x = j.get("extras", {})
    print(f"{n:<22} {j.get('tokens_per_s', 0):8.1f} tok/s  TPOT {j.get('tpot_ms', 0):6.2f} ms  "
          f"{100 * x.get('decode_fraction_of_copy', 0):5.1f}% of {x.get('copy_gbps', 0):.0f} GB/s")
if r["tp4_decode"].get("tokens_per_s") and r["tp8_decode"].get("tokens_per_s"):
    print(f"TP=8 / TP=4: {r['tp8_decode']['tokens_per_s'] / r['tp4_decode']['tokens_per_s']:.3f}x (target >= 1.6x)")
for n in ("tp4_ttft2048", "tp8_ttft2048"):
    print(f"{n:<22} TTFT {r[n].get('ttft_ms', 0):.1f} ms")
for n in ("serve_inf", "serve_rate8"):  # bench serve's --json
    try:
        j = json.load(open(os.path.join(logs, n + ".json")))
        print(f"serve --tp 8 {n}: {j.get('output_tokens_per_s', 0):.0f} output tok/s, "
              f"TTFT p50 {j.get('ttft_ms', {}).get('p50', 0):.1f} ms")
    except Exception:
        print(f"serve --tp 8 {n}: no result")
PY

#!/usr/bin/env bash
# One device call for the hot-path figures of docs/design.md ("The hot path"): configure for
# sm_90, build only what it runs, then
#   1. bench_dispatch: a plan run (target <= 100 ns) and the plain gemm() (<= 300 ns) on the
#      GPU host's CPU, through a no-op candidate (host cost only);
#   2. interpose_serve_bench: the interposer's whole served call (mapping + plan slot + run);
#   3. the interposer's in-process A/B of a served cuBLAS and CBLAS call against the real entry
#      point (target: under 1 us added per served call), as scripts/gpu-interpose.sh's cost step.
# Logs under $OUT (./gpu-hotpath-out elsewhere); a short table last.
#   scripts/gpu-hotpath.sh                  # everything
#   GPU_HOTPATH_BUILD=build scripts/gpu-hotpath.sh   # reuse a configured build folder
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/gpu-hotpath-out}
BUILD=${GPU_HOTPATH_BUILD:-$ROOT/build}
mkdir -p "$OUT"
[ -d /opt/torch/.venv/bin ] && export PATH="$PATH:/opt/torch/.venv/bin"
start=$(date +%s)
stamp() { echo "[$(($(date +%s) - start))s] $*"; }

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$OUT/machine.txt" 2>&1
lscpu | grep -E 'Model name|^CPU\(s\)' >>"$OUT/machine.txt" 2>&1
stamp "machine: $(head -1 "$OUT/machine.txt")"

stamp "configure + build"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$OUT/configure.log" 2>&1 ||
  { tail -20 "$OUT/configure.log"; exit 1; }
ninja -C "$BUILD" bench_dispatch interpose_serve_bench interpose_cublas_ab_bench interpose_cblas_ab_bench \
  tunableop_cli tunableop_preload tunableop_interpose >"$OUT/build.log" 2>&1 ||
  { grep -E 'FAILED|error' "$OUT/build.log" | head -20; exit 1; }

stamp "bench_dispatch"
"$BUILD/bench/bench_dispatch" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
  --benchmark_min_time=0.3 >"$OUT/bench_dispatch.txt" 2>&1
stamp "interpose_serve_bench"
"$BUILD/bench/interpose/interpose_serve_bench" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
  --benchmark_min_time=0.3 >"$OUT/serve_bench.txt" 2>&1

stamp "interposer A/B (cost step of scripts/gpu-interpose.sh)"
OUT="$OUT/interpose" GPU_INTERPOSE_BUILD="$BUILD" GPU_INTERPOSE_STEPS=cost GPU_INTERPOSE_BUDGET_S=240 \
  bash scripts/gpu-interpose.sh >"$OUT/interpose_cost.txt" 2>&1

echo
echo "| figure | median (wall / CPU) | target |"
echo "|---|---|---|"
row() { grep -E "^$1_median" "$OUT/$2" | awk -v n="$3" -v t="$4" '{print "| " n " | " $2 " " $3 " / " $4 " " $5 " | " t " |"}'; }
row "BM_PlanRun" bench_dispatch.txt "plan run" "<= 100 ns"
row "BM_GemmCall" bench_dispatch.txt "gemm()" "<= 300 ns"
row "BM_ServeBlasCallNoop/threads:1" serve_bench.txt "interposer: map + serve (no-op candidate)" "< 1 us"
echo
echo "Interposer A/B (hooked - real, per call):"
grep -E '^\| (cublas|cblas)' "$OUT/interpose_cost.txt" || tail -20 "$OUT/interpose_cost.txt"

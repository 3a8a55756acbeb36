#!/usr/bin/env bash
# Issue 31 on one GPU (run it on nvidia-h100-x1 and on nvidia-h200): does a tuned choice hold where
# it runs? Builds for sm_90, runs the tests, measures how the clock falls under sustained load (what
# TUNABLEOP_SUSTAINED_MIN_CALL_MS and _HEAT_MS are set from), runs the bf16 suite three times from
# an empty results file with sustained timing and the post-decision guard, once more with
# sustained timing off (the A/B), and the engine tuned vs untuned. Logs under $OUT; the table last.
#
# Steps are arguments, run in the order given (no argument: all of them, about 20 minutes):
#   build    configure (sm_90) and build the CLI and the tests below
#   tests    the tuner's fake-clock tests (sustained timing, the guards, a file of another GPU kind)
#            and the GPU ones: NVML's readings, a long problem tuned sustained, the CUDA tuning tests
#   trace    `bench --suite llm --clock-trace 1500`: each shape's Default back to back after 1 s idle;
#            per shape its slowdown under load and when it settled, SM clock, power (trace.md)
#   suite1 suite2 suite3
#            `bench --suite llm` from an empty results file (sustained timing and the guard on)
#   burst    the same with sustained timing off (TUNABLEOP_SUSTAINED_MIN_CALL_MS=1e9): the tuner as
#            on main before issue 31; the guard still on
#   kind     the results file of suite1 with its GPU_NAME changed to the other kind's: `tune` must
#            not serve it (it tunes into an .env- sibling) while the true file is served
#   engine   Llama-2-7B and Gemma-2B shapes, tuned vs untuned in one process (--compare)
# A device call has 10 minutes; the machine keeps ./build between calls while it stays warm, and
# so the logs (in $BUILD/sustained-logs; every call copies them to $OUT). Four calls, each under
# 10 minutes (a suite takes about 2-3 minutes, its timeout is 280 s):
#   bash scripts/gpu-sustained.sh build tests
#   bash scripts/gpu-sustained.sh trace suite1 kind
#   bash scripts/gpu-sustained.sh suite2 suite3
#   bash scripts/gpu-sustained.sh burst engine
# Each call ends with the table of every step run so far on this machine.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
OUT=${OUT:-$ROOT/gpu-sustained-out}
BUILD=${GPU_SUSTAINED_BUILD:-$ROOT/build}
LOGS="$BUILD/sustained-logs"
mkdir -p "$OUT" "$LOGS"
[ -d /opt/torch/.venv/bin ] && export PATH="$PATH:/opt/torch/.venv/bin"
start=$(date +%s)
stamp() { echo "[$(($(date +%s) - start))s] $*"; }
bin="$BUILD/tools/tunableop"
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(build tests trace suite1 suite2 suite3 burst kind engine)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader >"$LOGS/gpu.txt" 2>&1

step_build() {
  stamp "build (sm_90)"
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DTUNABLEOP_BUILD_BENCH=OFF >"$LOGS/configure.log" 2>&1 ||
    { tail -20 "$LOGS/configure.log"; echo "gpu-sustained: configure failed"; exit 1; }
  ninja -C "$BUILD" -k 0 tunableop_cli test_core test_core_results test_cuda_common test_cuda_gemm \
    test_tools_bench_loop >"$LOGS/build.log" 2>&1 ||
    { grep -E "FAILED|error" "$LOGS/build.log" | head -20; echo "gpu-sustained: build failed"; exit 1; }
}

step_tests() {
  stamp "tests"
  # The fake-clock tests (CPU), then the GPU ones: NVML, the sustained path on a real GEMM, the
  # CUDA tuning tests around it.
  ctest --test-dir "$BUILD" --timeout 300 --output-on-failure \
    -R 'TunerSustained|PostDecisionGuard|JudgeChoice|ResultsGpuKind|ResultsStats|InContext|BenchClockTrace|CudaCommon|CudaTuning|CudaRuntime' \
    >"$LOGS/ctest.log" 2>&1
  grep -E "tests passed|tests failed|\((Failed|Timeout|SEGFAULT)" "$LOGS/ctest.log" | head -20
  grep -E "NvmlThatCannot|EventTimerReads|LongProblemsRun" "$LOGS/ctest.log" | grep -E "Passed|Failed|Skipped" |
    sed 's/^ *//' >"$LOGS/tests_gpu.txt"
}

step_trace() {
  stamp "clock trace: every shape's Default under load for 1.5 s after 1 s idle"
  timeout 300 "$bin" bench --suite llm --device cuda --clock-trace 1500 --csv "$LOGS/trace.csv" \
    >"$LOGS/trace.md" 2>"$LOGS/trace.err" || echo "gpu-sustained: trace exited $? (trace.err)"
}

suite() {  # name, extra environment (VAR=value ...)
  local name=$1
  shift
  stamp "suite $name $*"
  rm -f "$LOGS/${name}"_results_*
  env "$@" TUNABLEOP_VERBOSE=2 timeout 280 "$bin" bench --suite llm --device cuda --csv "$LOGS/$name.csv" \
    --results "$LOGS/${name}_results_%d.csv" >"$LOGS/$name.md" 2>"$LOGS/$name.log" ||
    echo "gpu-sustained: suite $name exited $? (see $name.log)"
}

step_kind() {
  # The true file is served (its problems already tuned); the same file claiming the other GPU
  # kind is not: `tune` leaves it alone and tunes into an .env- sibling.
  local file="$LOGS/suite1_results_0.csv"
  [ -s "$file" ] || { echo "gpu-sustained: kind needs suite1 first"; return; }
  stamp "kind: a file of the other GPU kind is not served"
  # Two of the suite's one-token problems (cheap to tune again).
  grep -vE '^Validator' "$file" | grep -E ',tn_[0-9]+_1_[0-9]+,' | head -2 | cut -d, -f1,2 >"$LOGS/kind_untuned.csv"
  local name other
  name=$(grep -E '^Validator,GPU_NAME,' "$file" | cut -d, -f3-)
  case "$name" in *H100*) other="NVIDIA H200" ;; *) other="NVIDIA H100 80GB HBM3" ;; esac
  sed "s/^Validator,GPU_NAME,.*/Validator,GPU_NAME,$other/" "$file" >"$LOGS/kind_other_0.csv"
  {
    echo "file's GPU_NAME: $name; nvidia-smi: $(cut -d, -f1 "$LOGS/gpu.txt")"
    echo "-- the true file:"
    TUNABLEOP_FILENAME="$LOGS/suite1_results_%d.csv" "$bin" tune "$LOGS/kind_untuned.csv" --device cuda 2>&1 | tail -2
    echo "-- the same file claiming $other:"
    TUNABLEOP_FILENAME="$LOGS/kind_other_%d.csv" "$bin" tune "$LOGS/kind_untuned.csv" --device cuda 2>&1 | tail -3
  } >"$LOGS/kind.txt" 2>&1
}

engine() {  # name, model
  stamp "engine $1"
  rm -f "$LOGS/engine_$1"_*.csv*
  TUNABLEOP_FILENAME="$LOGS/engine_$1_%d.csv" timeout 120 "$bin" llm --device cuda --model "builtin:$2" \
    --total-tokens 256 --compare --iterations 3 --warmup 1 >"$LOGS/engine_$1.txt" 2>&1 ||
    echo "gpu-sustained: engine $1 exited $? (see engine_$1.txt)"
}

for s in "${steps[@]}"; do
  case "$s" in
    build) step_build ;;
    tests) step_tests ;;
    trace) step_trace ;;
    suite1 | suite2 | suite3) suite "$s" ;;
    burst) suite burst TUNABLEOP_SUSTAINED_MIN_CALL_MS=1e9 ;;
    kind) step_kind ;;
    engine) engine llama llama-2-7b && engine gemma gemma-2b ;;
    *) echo "gpu-sustained: unknown step '$s' (build tests trace suite1 suite2 suite3 burst kind engine)"; exit 2 ;;
  esac
done
tar czf "$OUT/sustained_logs.tgz" -C "$LOGS" . 2>/dev/null
for f in trace.md suite1.md ctest.log; do [ -f "$LOGS/$f" ] && cp "$LOGS/$f" "$OUT/"; done
stamp "done"

echo "== GPU: $(cat "$LOGS/gpu.txt")"
[ -f "$LOGS/tests_gpu.txt" ] && { echo "== tests"; grep -E "tests passed|tests failed" "$LOGS/ctest.log"; cat "$LOGS/tests_gpu.txt"; }
if [ -f "$LOGS/trace.md" ]; then
  echo "== clock under load (trace.md has every shape): the settings it suggests"
  grep -E "^shapes slowed|^the longest time to settle" "$LOGS/trace.md"
fi
# Per shape Default/tuned as served (after the guard) and, in brackets, as the tuner chose; then
# per run the geomean, shapes below 0.99x, reverts, shapes within 2% of the best single candidate,
# the slowest shape's tuning time and how many shapes were timed sustained.
python3 - "$LOGS" <<'EOF'
import csv, math, os, sys
logs = sys.argv[1]
runs = [r for r in ("suite1", "suite2", "suite3", "burst") if os.path.exists(os.path.join(logs, r + ".csv"))]
if not runs:
    sys.exit(0)
data = {r: {row["shape"]: row for row in csv.DictReader(open(os.path.join(logs, r + ".csv")))} for r in runs}
shapes = list(data[runs[0]].keys())
f = lambda v: float(v) if v not in ("", None) else 0.0
def speed(row, tuner):
    t = f(row["tuner_ms"] if tuner else row["tuned_ms"])
    return f(row["default_ms"]) / t if t > 0 else 0.0
print("== bf16 suite: Default / tuned as served (as the tuner chose), per run; burst = sustained timing off")
print("%-28s" % "shape" + "".join("%-20s" % r for r in runs))
for s in shapes:
    cells = []
    for r in runs:
        row = data[r].get(s)
        cells.append("%.3f (%.3f)%s" % (speed(row, False), speed(row, True), " R" if row and row["reverted"] == "1" else "")
                     if row else "-")
    print("%-28s" % s + "".join("%-20s" % c for c in cells))
def summary(label, fn):
    print("%-28s" % label + "".join("%-20s" % fn(list(data[r].values())) for r in runs))
geo = lambda v: math.exp(sum(math.log(x) for x in v) / len(v)) if v else 0
summary("geomean served", lambda rows: "%.3fx" % geo([speed(x, False) for x in rows if speed(x, False) > 0]))
summary("geomean as tuned", lambda rows: "%.3fx" % geo([speed(x, True) for x in rows if speed(x, True) > 0]))
summary("below 0.99x served", lambda rows: str(sum(1 for x in rows if 0 < speed(x, False) < 0.99)))
summary("below 0.99x as tuned", lambda rows: str(sum(1 for x in rows if 0 < speed(x, True) < 0.99)))
summary("reverted by the guard", lambda rows: str(sum(1 for x in rows if x["reverted"] == "1")))
summary("within 2% of best", lambda rows: "%d of %d" % (sum(1 for x in rows if f(x["best_ms"]) > 0 and f(x["tuned_ms"]) <= 1.02 * f(x["best_ms"])), len(rows)))
summary("max tuning s", lambda rows: "%.2f" % max(f(x["tuning_ms"]) / 1000 for x in rows))
summary("timed sustained", lambda rows: str(sum(1 for x in rows if x["final_rounds"] == "sustained")))
def median_mhz(rows):
    v = sorted(f(x["sm_mhz"]) for x in rows if x["final_rounds"] == "sustained" and f(x["sm_mhz"]) > 0)
    return "%.0f" % v[len(v) // 2] if v else "-"
summary("SM MHz, sustained (median)", median_mhz)
EOF
[ -f "$LOGS/kind.txt" ] && { echo "== a file of the other GPU kind"; cat "$LOGS/kind.txt"; }
for m in llama gemma; do
  [ -f "$LOGS/engine_$m.txt" ] || continue
  echo "== engine $m: tuned / untuned (target: 1.25x or better on the H100)"
  grep -E "^Speedup|In-context check|reverted to Default" "$LOGS/engine_$m.txt" | head -6
done

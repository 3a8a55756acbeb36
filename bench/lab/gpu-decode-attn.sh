#!/usr/bin/env bash
# One device call for issue 12's decode item ("decode attention >= 80% of the KV-bytes floor at
# 4k+ context"): build the CLI, the attention kernel tests and the attention lab for sm_90, run the
# attention tests (every candidate vs fp64, graph replays), then `tunableop bench --suite attention
# --only decode` (the tuned choice per decode shape and its share of the KV-bytes floor), then the
# lab on the decode shapes (every candidate's time, to see what lost and by how much). Each step
# gets what is left of DA_BUDGET seconds (default 400). Logs under $OUT; a short table last.
#
# Knobs: DA_TESTS=0 skips the tests; DA_TIMING=0 the DecodeTiming diagnostic (eager vs graph vs one
# call at a time, tests/backends/cuda/attention/decode_timing_test.cc); DA_LAB="<substring> ..." picks the lab's shapes, one run per
# word ("" none; default "gemma-2b.decode llama2-7b.decode4096"); DA_TEST_FILTER a gtest filter.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/gpu-decode-attn-out}
LOGS="$OUT/logs"
BUILD=${DA_BUILD:-$ROOT/build-dec}
mkdir -p "$LOGS"
start=$(date +%s)
BUDGET=${DA_BUDGET:-400}
stamp() { echo "[$(($(date +%s) - start))s] $*"; }
left() {  # seconds a step wanting $1 may have (0: skip it)
  local rest=$((BUDGET - ($(date +%s) - start) - 5))
  if [ "$rest" -lt 10 ]; then echo 0; elif [ "$rest" -lt "$1" ]; then echo "$rest"; else echo "$1"; fi
}
summary=()
{
  date -u +%Y-%m-%dT%H:%MZ
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1
  git -C "$ROOT" log --oneline -1 2>/dev/null
} >"$LOGS/machine.txt"
stamp "machine: $(sed -n 3p "$LOGS/machine.txt")"
. "$ROOT/scripts/cudnn-env.sh"
stamp "cuDNN headers: ${cudnn_inc:-none}; library: ${TUNABLEOP_CUDNN_LIBRARY:-none}"

cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DTUNABLEOP_WITH_BLIS=OFF \
  -DTUNABLEOP_WITH_ONEDNN=OFF ${cudnn_inc:+-DTUNABLEOP_CUDNN_INCLUDE_DIR=$cudnn_inc} >"$LOGS/configure.log" 2>&1 ||
  { tail -30 "$LOGS/configure.log"; echo "gpu-decode-attn: configure failed"; exit 1; }
targets="tunableop_cli test_cuda_attention"
LAB=${DA_LAB-gemma-2b.decode llama2-7b.decode4096}
[ -n "$LAB" ] && targets="$targets attention_lab"
# shellcheck disable=SC2086
ninja -C "$BUILD" -j 16 -k 0 $targets >"$LOGS/build.log" 2>&1 ||
  { grep -E "FAILED|error" "$LOGS/build.log" | head -20; echo "gpu-decode-attn: build failures"; }
stamp "built"
bin="$BUILD/tools/tunableop"

if [ "${DA_TESTS:-1}" = 1 ]; then
  t=$(left 160)
  if [ "$t" != 0 ]; then
    stamp "test_cuda_attention (${t}s at most)"
    TUNABLEOP_SOURCE_DIR="$ROOT" timeout "$t" "$BUILD/tests/backends/cuda/attention/test_cuda_attention" \
      --gtest_filter="${DA_TEST_FILTER:-*}" >"$LOGS/test_cuda_attention.log" 2>&1
    rc=$?
    summary+=("test_cuda_attention: $(grep -E '^\[  (PASSED|FAILED|SKIPPED)|^\[==========\]' "$LOGS/test_cuda_attention.log" | tr '\n' ' ') (rc $rc)")
    grep -hE "Failure|FAILED  \]|differ|error" "$LOGS/test_cuda_attention.log" | head -12
  else
    summary+=("test_cuda_attention: skipped (budget)")
  fi
fi

if [ "${DA_TIMING:-1}" = 1 ]; then  # where a decode call's time goes: eager vs graph vs one at a time
  t=$(left 60)
  if [ "$t" != 0 ]; then
    stamp "DecodeTiming (${t}s at most)"
    timeout "$t" "$BUILD/tests/backends/cuda/attention/test_cuda_attention" --gtest_also_run_disabled_tests \
      --gtest_filter='DecodeTiming.*' >"$OUT/timing.txt" 2>&1
    summary+=("DecodeTiming: rc $?")
  fi
fi

t=$(left 150)
if [ "$t" != 0 ]; then
  stamp "bench --suite attention --only decode (${t}s at most)"
  timeout "$t" "$bin" bench --suite attention --device cuda --only decode --csv "$OUT/suite.csv" >"$OUT/suite.md" \
    2>"$LOGS/suite.log"
  summary+=("suite (decode shapes): rc $?")
else
  summary+=("suite: skipped (budget)")
fi

n=0
for only in $LAB; do
  t=$(left 90)
  [ "$t" = 0 ] && { summary+=("lab $only: skipped (budget)"); continue; }
  n=$((n + 1))
  stamp "attention_lab --only $only (${t}s at most)"
  timeout "$t" "$BUILD/bench/attention/attention_lab" --only "$only" --samples 5 --csv "$OUT/lab$n.csv" \
    >"$OUT/lab$n.md" 2>"$LOGS/lab$n.log"
  summary+=("lab $only: rc $?")
done
stamp "done"
tar czf "$OUT/logs.tgz" -C "$LOGS" . && rm -rf "$LOGS"
echo
for s in "${summary[@]}"; do echo "== $s"; done
# Per lab shape: the 5 fastest candidates, then the fastest of each family not among them.
for f in "$OUT"/lab*.csv; do
  [ -f "$f" ] || continue
  python3 - "$f" <<'PY'
import csv, re, sys
rows = list(csv.DictReader(open(sys.argv[1])))
by = {}
for r in rows:
    by.setdefault(r["shape"], []).append(r)
for shape, rs in by.items():
    rs.sort(key=lambda r: float(r["ms"]))
    fam = lambda n: re.sub(r"_(q|k|w|s|sp|c|a|f|v)\d+", "", n) + ("_split" if "_sp" in n else "")
    shown, seen = [], set()
    for r in rs:
        f = fam(r["candidate"])
        if len(shown) < 5 or f not in seen:
            shown.append(r)
        seen.add(f)
    print(f"lab {shape}: " + "; ".join(f"{r['candidate']} {float(r['ms'])*1e3:.1f} us ({float(r['pct_copy_bw']):.0f}%)" for r in shown))
PY
done
[ -f "$OUT/timing.txt" ] && grep -E "^timing" "$OUT/timing.txt"
[ -f "$OUT/suite.md" ] && cat "$OUT/suite.md"

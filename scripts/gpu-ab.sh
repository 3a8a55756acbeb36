#!/usr/bin/env bash
# A/B on one GPU machine, one call: builds the CLI of a baseline tree (carried as an ignored
# folder, e.g. `git archive <rev> | tar x -C .baseline`) and of this tree, then runs the same
# `tunableop` commands with each build, alternating A, B, A, B, so that both see the same machine
# state. Prints the lines that matter side by side.
#
#   scripts/gpu-ab.sh .baseline "llm --device cuda --model builtin:gemma-2b --total-tokens 256 --compare" ...
#
# Environment: AB_ROUNDS (default 2), AB_GREP (regex of lines to print; default tokens/TTFT/TPOT
# and bench summaries), AB_IDS=1 also compares greedy ids of the real-shaped models (2 layers).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BASE=${1:?baseline tree}
shift
OUT=${OUT:-$ROOT/gpu-ab-out}
mkdir -p "$OUT"
[ -d /opt/torch/.venv/bin ] && export PATH="$PATH:/opt/torch/.venv/bin"
export NCCL_NVLS_ENABLE=0
start=$(date +%s)
stamp() { echo "[$(($(date +%s) - start))s] $*"; }
build() {  # src, build dir
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DTUNABLEOP_BUILD_TESTS=OFF >"$OUT/configure-$(basename "$2").log" 2>&1 &&
    ninja -C "$2" tunableop_cli >"$OUT/build-$(basename "$2").log" 2>&1
}
stamp "build A (baseline: $BASE) and B (this tree)"
build "$BASE" "$ROOT/build-a" & pa=$!
build "$ROOT" "$ROOT/build-b" & pb=$!
wait $pa || { tail -20 "$OUT/build-build-a.log"; echo "gpu-ab: baseline build failed"; exit 1; }
wait $pb || { tail -20 "$OUT/build-build-b.log"; echo "gpu-ab: build failed"; exit 1; }
A="$ROOT/build-a/tools/tunableop" B="$ROOT/build-b/tools/tunableop"
GREP=${AB_GREP:-'Tokens/second|TTFT|TPOT|geomean|tuned in|^\|'}
if [ "${AB_IDS:-0}" = 1 ]; then
  stamp "greedy ids"
  for dt in bf16 fp32; do for m in gemma-2b llama-2-7b; do
    args=(llm --device cuda --model "builtin:$m" --layers 2 --dtype "$dt" --no-tune --prompt-ids 2,651,6077,17
          --max-new-tokens 32 --iterations 1 --warmup 0 --print-ids)
    ia=$(timeout 120 "$A" "${args[@]}" 2>&1 | tail -1); ib=$(timeout 120 "$B" "${args[@]}" 2>&1 | tail -1)
    [ "$ia" = "$ib" ] && echo "ids $m $dt: SAME" || echo "ids $m $dt: DIFFER: A=$ia B=$ib"
  done; done | tee "$OUT/ids.txt"
fi
n=0
for cmd in "$@"; do
  n=$((n + 1))
  for r in $(seq 1 "${AB_ROUNDS:-2}"); do
    for side in A B; do
      bin=$A; [ $side = B ] && bin=$B
      rm -f "$OUT"/res-$side-$n*.csv*
      stamp "cmd $n round $r $side"
      # shellcheck disable=SC2086
      TUNABLEOP_FILENAME="$OUT/res-$side-$n-%d.csv" timeout 300 "$bin" $cmd >"$OUT/cmd$n-$side-r$r.txt" 2>&1 ||
        echo "gpu-ab: cmd $n $side exited $?"
    done
  done
done
stamp "done"
tar czf "$OUT/ab_logs.tgz" -C "$OUT" --exclude='*.tgz' . 2>/dev/null
n=0
for cmd in "$@"; do
  n=$((n + 1))
  echo "== $cmd"
  for f in "$OUT"/cmd$n-*.txt; do echo "-- $(basename "$f")"; grep -E "$GREP" "$f" | head -40; done
done

#!/usr/bin/env bash
# Multi-GPU offline tuning check: `tunableop tune FILE --gpus all` on every GPU of the machine,
# then each GPU's results file must hold every problem of FILE exactly once (merged), and no
# process may have written another GPU's file. Run after a build (scripts/gpu-check.sh).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/gpu-multi-out}
BUILD=${GPU_CHECK_BUILD:-$ROOT/build}
dir="$OUT/multi"
mkdir -p "$dir"
cat >"$dir/untuned.csv" <<'CSV'
GemmTunableOp_BFloat16_TN,tn_4096_1_4096
GemmTunableOp_BFloat16_TN,tn_2048_1_2048
GemmTunableOp_BFloat16_TN,tn_2560_8_2048
GemmTunableOp_BFloat16_TN,tn_2048_8_16384
GemmTunableOp_BFloat16_TN,tn_4096_128_4096
GemmTunableOp_float_NN,nn_1024_512_2048
CSV
gpus=$(nvidia-smi -L | wc -l)
echo "gpu-multi: $gpus GPUs"
TUNABLEOP_FILENAME="$dir/results%d.csv" "$BUILD/tools/tunableop" tune "$dir/untuned.csv" --gpus all >"$dir/tune.log" 2>&1
echo "gpu-multi: tune exited $?"
tail -5 "$dir/tune.log"
want=$(wc -l <"$dir/untuned.csv")
ok=1
for ((g = 0; g < gpus; ++g)); do
  f="$dir/results$g.csv"
  n=$(grep -vc '^Validator' "$f" 2>/dev/null || echo 0)
  uniq=$(grep -v '^Validator' "$f" 2>/dev/null | cut -d, -f1,2 | sort -u | wc -l)
  echo "gpu-multi: $f: $n result lines, $uniq distinct problems (want $want)"
  [ "$uniq" = "$want" ] && [ "$n" = "$want" ] || ok=0
done
[ $ok = 1 ] && echo "gpu-multi: PASS" || echo "gpu-multi: FAIL"

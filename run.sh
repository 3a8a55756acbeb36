#!/usr/bin/env bash
# Installs dependencies (Debian 12, root), builds, and runs the main job: the seed's Example 1
# on the CPU (tune one GEMM, see the tree log, iter/s untuned vs tuned), "extending tunings" (a
# second shape appends one line to the same results file), an unmodified NumPy program plain and
# under `tunableop run --tune`, and the LLM engine untuned vs tuned.
# Every untuned-vs-tuned figure printed last for a case is measured in one process, the two
# alternating, as medians with their range: two separate runs on a shared machine differ by
# more than tuning changes (a fresh 2-core VM showed tuned at 0.56x that way, Default on both
# sides). Each comparison ends with a line that says what its figures mean.
set -euo pipefail
cd "$(dirname "$0")"
scripts/install-deps.sh
scripts/build.sh
bin=build/tools/tunableop
out=run-output
rm -rf "$out" && mkdir -p "$out"   # a demo directory: every run starts from an empty results file

export TUNABLEOP_ENABLED=1 TUNABLEOP_VERBOSE=2 TUNABLEOP_FILENAME="$out/matmul_result.csv"
echo "== Example 1: torch.matmul of (512 x 2048) @ (2048 x 1024) in fp32 = BLAS nn_1024_512_2048"
"$bin" bench -m 1024 -n 512 -k 2048 --dtype fp32 --iters 200
echo; echo "== $out/matmul_result0.csv"; cat "$out/matmul_result0.csv"

echo; echo "== Extending tunings: a new shape (128, 256, 512) appends one line"
TUNABLEOP_VERBOSE=1 "$bin" bench -m 256 -n 128 -k 512 --dtype fp32 --iters 2000
echo; echo "== $out/matmul_result0.csv"; cat "$out/matmul_result0.csv"

echo; echo "== An unmodified program: NumPy (Debian's python3-numpy, linked to libblas.so.3), plain"
if /usr/bin/python3 -c "import numpy" 2>/dev/null; then
  env -u TUNABLEOP_ENABLED /usr/bin/python3 bench/interpose/numpy_demo.py
  echo; echo "== The same program under \`tunableop run --tune\` (nothing in it changed)"
  "$bin" run --tune --results "$out/numpy_result.csv" -v 1 -- /usr/bin/python3 bench/interpose/numpy_demo.py
  echo; echo "== $out/numpy_result0.csv"; cat "$out/numpy_result0.csv"
else
  echo "(python3-numpy is not installed: skipped)"
fi

if "$bin" llm --help >/dev/null 2>&1; then
  echo; echo "== The LLM engine on its built-in model (CPU): tuned, then untuned and tuned alternately"
  unset TUNABLEOP_VERBOSE
  TUNABLEOP_FILENAME="$out/llm_result.csv" "$bin" llm --tune --compare || true
fi

#!/usr/bin/env bash
# One device call for issue 12, stage 2 (the Attention op in the engine): build for sm_90, run
# the attention kernel tests (every candidate vs fp64, Default's math path included) and the
# engine's GPU tests (flash and paged attention, ragged batches, graphs, HF fixtures), then the
# engine: TTFT at 2048 (Gemma-2B, Llama-2-7B shapes; untuned vs tuned), decode tokens/s with the
# static and the paged cache, KV memory of a ragged batch; then `tunableop bench --suite
# attention` and PyTorch's SDPA on the same shapes. Logs under $OUT; a short table last.
#
# Knobs: A2_TESTS=0 skips the tests; A2_ENGINE="ttft decode ragged" picks the engine runs
# ("" none); A2_PAGES="64 16 256" the paged decode runs; A2_SUITE=0 skips the suite;
# A2_ONLY=<substring> limits the suite's shapes.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/gpu-attention2-out}
LOGS="$OUT/logs"
BUILD=${A2_BUILD:-$ROOT/build-a2}
mkdir -p "$LOGS"
[ -d /opt/torch/.venv/bin ] && export PATH="$PATH:/opt/torch/.venv/bin"
start=$(date +%s)
stamp() { echo "[$(($(date +%s) - start))s] $*"; }
summary=()
{
  date -u +%Y-%m-%dT%H:%MZ
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1
  cat "$ROOT/.attn-commit" 2>/dev/null || git -C "$ROOT" log --oneline -1 2>/dev/null
} >"$LOGS/machine.txt"
stamp "machine: $(sed -n 3p "$LOGS/machine.txt")"

# cuDNN from the PyTorch wheel (headers and library), as scripts/gpu-attention.sh does.
. "$ROOT/scripts/cudnn-env.sh"
stamp "cuDNN headers: ${cudnn_inc:-none}; library: ${TUNABLEOP_CUDNN_LIBRARY:-none}"

stamp "configure + build"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DTUNABLEOP_WITH_BLIS=OFF \
  -DTUNABLEOP_WITH_ONEDNN=OFF ${cudnn_inc:+-DTUNABLEOP_CUDNN_INCLUDE_DIR=$cudnn_inc} >"$LOGS/configure.log" 2>&1 ||
  { tail -30 "$LOGS/configure.log"; echo "gpu-attention2: configure failed"; exit 1; }
ninja -C "$BUILD" -k 0 tunableop_cli test_cuda_attention test_llm_cuda >"$LOGS/build.log" 2>&1 ||
  { grep -E "FAILED|error" "$LOGS/build.log" | head -20; echo "gpu-attention2: build failures"; }
bin="$BUILD/tools/tunableop"

if [ "${A2_TESTS:-1}" = 1 ]; then
  stamp "tests"
  for t in backends/cuda/attention/test_cuda_attention llm/test_llm_cuda; do
    name=$(basename "$t")
    TUNABLEOP_SOURCE_DIR="$ROOT" timeout 240 "$BUILD/tests/$t" >"$LOGS/$name.log" 2>&1
    summary+=("$name: $(grep -E '^\[  (PASSED|FAILED)' "$LOGS/$name.log" | tr '\n' ' ') (rc $?)")
    grep -hE "Failure|error [0-9.e+-]+ >|differ|wrote|FAILED  \]" "$LOGS/$name.log" | head -8
  done
fi

llm() {  # name, timeout, args...
  local name=$1 t=$2
  shift 2
  TUNABLEOP_FILENAME="$OUT/engine_results_%d.csv" timeout "$t" "$bin" llm --device cuda "$@" >"$LOGS/$name.txt" 2>&1 ||
    echo "gpu-attention2: $name exited $? (see logs/$name.txt)"
}
engine=" ${A2_ENGINE-ttft decode ragged} "
if [[ $engine == *" ttft "* ]]; then
  stamp "engine: TTFT(2048), untuned vs tuned"
  llm gemma_ttft 120 --model builtin:gemma-2b --prompt-len 2048 --max-new-tokens 1 --compare --iterations 5
  llm llama_ttft 150 --model builtin:llama-2-7b --prompt-len 2048 --max-new-tokens 1 --compare --iterations 5
fi
if [[ $engine == *" decode "* ]]; then
  stamp "engine: decode tokens/s, static vs paged"
  kvs=("static")
  for p in ${A2_PAGES-64 16 256}; do kvs+=("paged --page-size $p"); done
  for kv in "${kvs[@]}"; do
    tag=$(echo "$kv" | tr -d ' -' | sed 's/pagesize//')
    llm "gemma_decode_$tag" 90 --model builtin:gemma-2b --prompt-len 1024 --max-new-tokens 128 --tune --kv-cache $kv \
      --iterations 3
    llm "llama_decode_$tag" 120 --model builtin:llama-2-7b --prompt-len 1024 --max-new-tokens 128 --tune --kv-cache $kv \
      --iterations 3
  done
fi
if [[ $engine == *" ragged "* ]]; then
  stamp "engine: ragged batch of 8, KV memory static vs paged"
  lens=137,2048,512,1000,64,1536,300,777
  llm ragged_static 120 --model builtin:llama-2-7b --prompt-lens $lens --max-new-tokens 64 --tune --iterations 2
  llm ragged_paged 120 --model builtin:llama-2-7b --prompt-lens $lens --max-new-tokens 64 --tune --iterations 2 \
    --kv-cache paged --page-size 64
fi

if [ "${A2_SUITE:-1}" = 1 ]; then
  stamp "bench --suite attention"
  timeout 300 "$bin" bench --suite attention --device cuda ${A2_ONLY:+--only "$A2_ONLY"} --csv "$OUT/suite.csv" \
    --shapes-csv "$LOGS/shapes.csv" >"$OUT/suite.md" 2>"$LOGS/suite.log"
  summary+=("suite: rc $?")
  stamp "pytorch sdpa"
  timeout 150 python3 bench/attention/sdpa_bench.py "$LOGS/shapes.csv" "$OUT/sdpa.csv" 2>"$LOGS/sdpa.log"
  summary+=("sdpa: rc $?")
fi

if [ -f "$OUT/suite.csv" ]; then
  python3 bench/attention/plot_suite.py "$OUT/suite.csv" "$OUT/sdpa.csv" -o "$OUT/attention_suite.png" \
    --title "Attention op vs PyTorch SDPA, $(sed -n 3p "$LOGS/machine.txt" | cut -d, -f1)" >/dev/null 2>&1
fi
stamp "done"
# What comes back is a handful of files (the device tool returns at most 8): the summary, the
# suite's table and CSVs, the plot, the tuned results file and the logs as one archive.
{
  for s in "${summary[@]}"; do echo "== $s"; done
  for f in gemma_ttft llama_ttft; do
    [ -f "$LOGS/$f.txt" ] && { echo "== $f"; grep -E "^Untuned|^Tuned|TTFT|Prefill GEMMs|Attention problems" "$LOGS/$f.txt"; }
  done
  for f in "$LOGS"/*_decode_*.txt "$LOGS"/ragged_*.txt; do
    [ -f "$f" ] && echo "== $(basename "$f" .txt): $(grep -E "TPOT" "$f" | head -1 | sed 's/^ *//') | $(grep -E "KV cache" "$f" | head -1 | sed 's/^ *//')"
  done
} >"$OUT/summary.txt"
tar czf "$OUT/logs.tgz" -C "$LOGS" . && rm -rf "$LOGS"
rm -f "$OUT"/engine_results_*.csv.stats
echo
cat "$OUT/summary.txt"
[ -f "$OUT/suite.md" ] && cat "$OUT/suite.md"
[ -f "$OUT/sdpa.csv" ] && grep -E "default" "$OUT/sdpa.csv"

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
#
# A2_FAST=1 (issue 12's prefill step, within the 4 minutes of a mid-session request with the
# build): builds the CLI, the engine's GPU tests and (A2_FLASH=1, the default) the attention
# kernel tests; then, in order of importance: Gemma-2B TTFT(2048) untuned vs tuned with the
# per-kernel prefill breakdown (--profile-prefill 3: GEMMs, attention, every other kernel,
# TFLOP/s, host queue time, the TTFT gap); the same for Llama-2-7B; FlashAttention.* (every
# attention candidate vs fp64); the element-wise kernel tests vs fp64; the engine's GPU tests
# that cover prefill (HF fixtures fused and unfused, CUDA vs CPU, profiled prefill); then Gemma
# decode TPOT, Llama with --fusion off (the A/B of prefill's fused residual add + rmsnorm) and
# an nsys trace of one tuned prefill where nsys exists. Steps past A2_BUDGET seconds (default
# 230) are skipped and said so.
#
# A2_PREFILL=1 (with A2_FAST=1; issue 12's prefill lane) runs instead, in order of importance:
# Gemma-2B TTFT(2048) untuned vs tuned (the default: prefill's gate_up through cuDNN's fused
# gate GEMM chosen by measurement, every cuDNN engine configuration timed, the choice stored in
# the results file), the cuDNN gate's kernel tests (every configuration vs fp64) and engine
# tests, Llama-2-7B's TTFT, then for Llama and Gemma the TTFT again reading the choice back from
# the results file (no timing) and with TUNABLEOP_LLM_PREFILL_GATE_CUDNN=off (the side-by-side,
# 10 runs each), Gemma's greedy ids with the gate chosen vs off.
#
# A2_LAST=1 (with A2_PREFILL=1; issue 12): the last layer's MLP on the output rows only (the
# default) vs every row (--last-layer all): Gemma-2B tuned, TTFT read back both ways interleaved
# twice, test_llm_cuda, greedy ids both ways, Llama once, then TTFT at a 128-token prompt with
# prefill graphs (the default) and --no-prefill-graph.
#
# A2_GRAPH=1 (with A2_PREFILL=1; issue 12, prefill CUDA graphs): Gemma-2B tuned, then its TTFT
# read back with prefill graphs (the default) and with --no-prefill-graph, interleaved twice;
# the engine's, its kernels' and the attention op's GPU tests (whole binaries); the same for
# Llama-2-7B once; then the attention suite's decode shapes with the time left.
#
# A2_SDPA=1 (with A2_PREFILL=1; issue 12, cuDNN's attention configurations): Gemma's TTFT runs
# with TUNABLEOP_CUDNN_SDPA_LOG=1 and TUNABLEOP_VERBOSE=2 (cuDNN's configurations for each
# attention problem, each plan built, the tuner's attention timings in the summary), then the
# attention kernel tests of the cuDNN candidates (bf16, every shape vs fp64) before the gate's
# tests (A2_GATE_TESTS=0 skips those and their build).
#
# With A2_FAST=1 A2_PREFILL=1 (session 8; docs/results/attention/stage10-h200.md):
# A2_TARGETS=1: issue 12's targets on the machine of the call (TTFT of both models tuned and
#   read back, then the attention suite with its graph-replay column and PyTorch's SDPA;
#   A2_TARGETS_TTFT=0 runs the suite alone).
# A2_SPLIT=1: Attn_Cudnn_SdpaSplit: the kernel lab (A2_LAB_ONLY, A2_LAB_CANDS), its tests, the
#   TTFT with the 2048-token attention forced split and unsplit (A2_RESULTS_IN=<results file>
#   skips the tuning).
# A2_DECODE=1: decode at 4k+: the attention tests, the lab on Llama 4k and Gemma 16k decode, the
#   suite's decode shapes (A2_LAB_SHAPES: the lab's shapes, A2_LAB_CANDS: its candidates).
# A2_FLOOR=1 (session 10): bench/attention/read_floor (the fastest read of each decode shape's K
#   and V), then the 8k prefills in the suite and in PyTorch's SDPA timed both ways, with the SM
#   clock and power logged.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/gpu-attention2-out}
LOGS="$OUT/logs"
BUILD=${A2_BUILD:-$ROOT/build-a2}
mkdir -p "$LOGS"
[ -d /opt/torch/.venv/bin ] && export PATH="$PATH:/opt/torch/.venv/bin"
start=$(date +%s)
stamp() { echo "[$(($(date +%s) - start))s] $*"; }
summary=()
FAST=${A2_FAST:-0}
BUDGET=${A2_BUDGET:-230}
# Seconds a step wanting $1 may run (0: skip it), within the budget (fast mode; else $1).
left() {
  [ "$FAST" = 1 ] || { echo "$1"; return; }
  local rest=$((BUDGET - ($(date +%s) - start) - 5))
  if [ "$rest" -lt 15 ]; then echo 0; elif [ "$rest" -lt "$1" ]; then echo "$rest"; else echo "$1"; fi
}
{
  date -u +%Y-%m-%dT%H:%MZ
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1
  cat "$ROOT/.attn-commit" 2>/dev/null || git -C "$ROOT" log --oneline -1 2>/dev/null
} >"$LOGS/machine.txt"
stamp "machine: $(sed -n 3p "$LOGS/machine.txt")"

# cuDNN from the PyTorch wheel (headers and library), as bench/lab/gpu-attention.sh does.
. "$ROOT/scripts/cudnn-env.sh"
stamp "cuDNN headers: ${cudnn_inc:-none}; library: ${TUNABLEOP_CUDNN_LIBRARY:-none}"

stamp "configure + build"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DTUNABLEOP_WITH_BLIS=OFF \
  -DTUNABLEOP_WITH_ONEDNN=OFF ${cudnn_inc:+-DTUNABLEOP_CUDNN_INCLUDE_DIR=$cudnn_inc} >"$LOGS/configure.log" 2>&1 ||
  { tail -30 "$LOGS/configure.log"; echo "gpu-attention2: configure failed"; exit 1; }
targets="tunableop_cli test_cuda_attention test_llm_cuda test_llm_cuda_kernels"
[ "$FAST" = 1 ] && targets="tunableop_cli test_llm_cuda test_llm_cuda_kernels"
[ "$FAST" = 1 ] && [ "${A2_FLASH:-1}" = 1 ] && targets="$targets test_cuda_attention"
PREFILL=${A2_PREFILL:-0}
[ "$PREFILL" = 1 ] && targets="tunableop_cli test_llm_cuda test_llm_cuda_kernels"
[ "$PREFILL" = 1 ] && [ "${A2_GATE_TESTS:-1}" = 0 ] && targets="tunableop_cli"
SDPA=${A2_SDPA:-0}
GRAPH=${A2_GRAPH:-0}
[ "$PREFILL" = 1 ] && [ "${A2_LAST:-0}" = 1 ] && targets="tunableop_cli test_llm_cuda test_llm_cuda_kernels"
[ "$PREFILL" = 1 ] && [ "$GRAPH" = 1 ] &&
  targets="tunableop_cli test_llm_cuda test_llm_cuda_kernels test_cuda_attention test_cuda_gemm"
[ "$PREFILL" = 1 ] && [ "$SDPA" = 1 ] && targets="$targets test_cuda_attention"
[ "$PREFILL" = 1 ] && [ "${A2_SPLIT:-0}" = 1 ] && targets="tunableop_cli test_cuda_attention attention_lab"
[ "$PREFILL" = 1 ] && [ "${A2_TARGETS:-0}" = 1 ] && targets="tunableop_cli"
[ "$PREFILL" = 1 ] && [ "${A2_DECODE:-0}" = 1 ] && targets="tunableop_cli test_cuda_attention attention_lab"
[ "$PREFILL" = 1 ] && [ "${A2_FLOOR:-0}" = 1 ] && targets="tunableop_cli read_floor"
# shellcheck disable=SC2086
ninja -C "$BUILD" -j 16 -k 0 $targets >"$LOGS/build.log" 2>&1 ||
  { grep -E "FAILED|error" "$LOGS/build.log" | head -20; echo "gpu-attention2: build failures"; }
stamp "built"
bin="$BUILD/tools/tunableop"

gtest() {  # name (under tests/), seconds wanted, gtest filter
  local secs name
  secs=$(left "$2")
  name=$(basename "$1")
  if [ "$secs" = 0 ]; then summary+=("$name: skipped (budget)"); return; fi
  stamp "test $name"
  TUNABLEOP_SOURCE_DIR="$ROOT" timeout "$secs" "$BUILD/tests/$1" --gtest_filter="${3:-*}" >"$LOGS/$name.log" 2>&1
  local rc=$?
  summary+=("$name: $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$LOGS/$name.log" | tr '\n' ' ') (rc $rc)")
  grep -hE "Failure|error [0-9.e+-]+ >|differ|written|FAILED  \]" "$LOGS/$name.log" | head -8
}

llm() {  # name, timeout, args...
  local name=$1 t
  t=$(left "$2")
  shift 2
  if [ "$t" = 0 ]; then summary+=("$name: skipped (budget)"); return; fi
  stamp "llm $name"
  TUNABLEOP_FILENAME="${A2_RESULTS:-$OUT/engine_results_%d.csv}" timeout "$t" "$bin" llm --device cuda "$@" >"$LOGS/$name.txt" 2>&1 ||
    echo "gpu-attention2: $name exited $? (see logs/$name.txt)"
}
ttft=(--prompt-len 2048 --max-new-tokens 1 --compare --iterations 5 --profile-prefill 3)

suite_decode() {  # seconds wanted: the attention suite's decode shapes (tuned; graph column)
  local t
  t=$(left "$1")
  if [ "$t" = 0 ]; then summary+=("suite (decode shapes): skipped (budget)"); return; fi
  stamp "bench --suite attention --only decode"
  timeout "$t" "$bin" bench --suite attention --device cuda --only decode --csv "$OUT/suite.csv" \
    >"$OUT/suite.md" 2>"$LOGS/suite.log"
  summary+=("suite (decode shapes): rc $?")
}

if [ "$FAST" = 1 ] && [ "$PREFILL" = 1 ] && [ "${A2_DECODE:-0}" = 1 ]; then
  # Decode attention at 4k+ (issue 12): the attention op's tests (every candidate vs fp64), the
  # kernel lab on Llama's 4k and Gemma's 16k decode (event-timed loop, host time, graph replay)
  # for the candidates the suite picks, then the suite's decode shapes (tuned; graph column).
  gtest backends/cuda/attention/test_cuda_attention 220 'FlashAttention.*:Decode*'
  for shape in ${A2_LAB_SHAPES:-llama2-7b.decode4096 gemma-2b.decode16384}; do
    stamp "attention_lab --only $shape"
    timeout "$(left 60)" "$BUILD/bench/attention/attention_lab" --only "$shape" --samples 9 \
      --cands "${A2_LAB_CANDS-SplitKv_q64_k64_w4_s3_sp8,DecodeOneLaunch_w8_sp8,Attn_Cudnn_Sdpa,DecodeCluster_c16_w2_sp16_s2,DecodeCluster_c8_w4_sp16}" \
      >>"$OUT/lab.md" 2>>"$LOGS/lab.log"
  done
  while IFS= read -r l; do summary+=("lab: $l"); done < <(grep -E "^[a-z]|  Attn_" "$LOGS/lab.log" | cut -c1-230)
  suite_decode 150
elif [ "$FAST" = 1 ] && [ "$PREFILL" = 1 ] && [ "${A2_FLOOR:-0}" = 1 ]; then
  # Session 10: (1) bench/attention/read_floor, the fastest a kernel can read each decode shape's
  # K and V from a graph (what bounds the decode target); (2) the 8k prefills' graph column
  # against PyTorch's SDPA timed both ways (sdpa_bench.py's default ~5 ms bursts and
  # SDPA_BENCH_REGIME=suite, the suite's 32+ calls x 10 replays), the SM clock and power logged
  # every 100 ms throughout (clocks.csv; phases.txt marks each step).
  clock_fields=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active
  nvidia-smi --query-gpu=$clock_fields --format=csv,noheader -lms 100 >"$LOGS/clocks.csv" 2>"$LOGS/clocks.err" &
  smi=$!
  sleep 1
  if ! kill -0 "$smi" 2>/dev/null; then
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 100 \
      >"$LOGS/clocks.csv" 2>>"$LOGS/clocks.err" &
    smi=$!
  fi
  phase() { echo "$(date -u +'%Y/%m/%d %H:%M:%S.%3N') $1" >>"$LOGS/phases.txt"; }
  phase read_floor
  stamp "read_floor"
  timeout "$(left 120)" "$BUILD/bench/attention/read_floor" >"$OUT/read_floor.md" 2>"$LOGS/read_floor.log"
  summary+=("read_floor: rc $?")
  phase suite_prefill8192
  stamp "bench --suite attention --only prefill8192"
  timeout "$(left 90)" "$bin" bench --suite attention --device cuda --only prefill8192 --csv "$OUT/suite.csv" \
    --shapes-csv "$LOGS/shapes.csv" >"$OUT/suite.md" 2>"$LOGS/suite.log"
  summary+=("suite: rc $?")
  for regime in burst suite; do
    phase "sdpa_$regime"
    stamp "pytorch sdpa ($regime)"
    SDPA_BENCH_REGIME=$regime timeout "$(left 60)" python3 bench/attention/sdpa_bench.py "$LOGS/shapes.csv" \
      "$OUT/sdpa_$regime.csv" 2>"$LOGS/sdpa_$regime.log"
    summary+=("sdpa ($regime): rc $?")
    while IFS= read -r l; do summary+=("sdpa $regime: $l"); done < <(grep -E "default|cudnn" "$OUT/sdpa_$regime.csv")
  done
  phase end
  kill "$smi" 2>/dev/null
  # Per step: the median and lowest SM clock and the median and highest power while it ran.
  while IFS= read -r l; do summary+=("clocks: $l"); done < <(python3 - "$LOGS/phases.txt" "$LOGS/clocks.csv" <<'PY'
import statistics, sys
from datetime import datetime
fmt = "%Y/%m/%d %H:%M:%S.%f"
phases = [(datetime.strptime(l[:23], fmt), l[24:].strip()) for l in open(sys.argv[1])]
rows = []
for l in open(sys.argv[2]):
    f = [x.strip() for x in l.split(",")]
    try:
        rows.append((datetime.strptime(f[0], fmt), float(f[1].split()[0]), float(f[2].split()[0]), f[4] if len(f) > 4 else ""))
    except (ValueError, IndexError):
        pass
for (t0, name), (t1, _) in zip(phases, phases[1:]):
    r = [x for x in rows if t0 <= x[0] < t1]
    if r:
        clk, pw = [x[1] for x in r], [x[2] for x in r]
        reasons = sorted({x[3] for x in r})
        print(f"{name}: SM clock median {statistics.median(clk):.0f} MHz, min {min(clk):.0f}; power median "
              f"{statistics.median(pw):.0f} W, max {max(pw):.0f}; reasons {' '.join(reasons)[:80]}")
PY
  )
elif [ "$FAST" = 1 ] && [ "$PREFILL" = 1 ] && [ "${A2_TARGETS:-0}" = 1 ]; then
  # Issue 12's targets on the machine of the call (they are stated for the H200): Gemma-2B and
  # Llama-2-7B tuned, TTFT(2048) read back from the results file (10 runs each, twice for
  # Gemma), then the attention suite (prefill: TFLOP/s; decode: % of the KV-bytes floor) and
  # PyTorch's SDPA on the same shapes, with the time left. A2_TARGETS_TTFT=0: the suite alone.
  if [ "${A2_TARGETS_TTFT:-1}" = 1 ]; then
    llm gemma_ttft 80 --model builtin:gemma-2b "${ttft[@]}"
    again=(--prompt-len 2048 --max-new-tokens 1 --compare --iterations 10 --profile-prefill 3 --no-in-context-check)
    llm gemma_ttft_again 25 --model builtin:gemma-2b "${again[@]}"
    llm llama_ttft 110 --model builtin:llama-2-7b "${ttft[@]}"
    llm llama_ttft_again 30 --model builtin:llama-2-7b "${again[@]}"
    llm gemma_ttft_again2 25 --model builtin:gemma-2b "${again[@]}"
  fi
  t=$(left 170)
  if [ "$t" != 0 ]; then
    stamp "bench --suite attention"
    timeout "$t" "$bin" bench --suite attention --device cuda --csv "$OUT/suite.csv" --shapes-csv "$LOGS/shapes.csv" \
      >"$OUT/suite.md" 2>"$LOGS/suite.log"
    summary+=("suite: rc $?")
  fi
  t=$(left 90)
  if [ "$t" != 0 ] && [ -f "$LOGS/shapes.csv" ]; then
    stamp "pytorch sdpa"
    timeout "$t" python3 bench/attention/sdpa_bench.py "$LOGS/shapes.csv" "$OUT/sdpa.csv" 2>"$LOGS/sdpa.log"
    summary+=("sdpa: rc $?")
  fi
  # PyTorch again as the suite's graph column runs (32+ calls a graph, 10 replays back to back: at
  # an 8k prefill the GPU reaches its power cap and the clock drops, session 10), its default and
  # cuDNN only: compare the graph column with this, the tuned (loop) column with the one above.
  t=$(left 60)
  if [ "$t" != 0 ] && [ -f "$LOGS/shapes.csv" ]; then
    stamp "pytorch sdpa (suite regime)"
    SDPA_BENCH_REGIME=suite SDPA_BENCH_BACKENDS=cudnn timeout "$t" python3 bench/attention/sdpa_bench.py \
      "$LOGS/shapes.csv" "$OUT/sdpa_suite.csv" 2>"$LOGS/sdpa_suite.log"
    summary+=("sdpa (suite regime): rc $?")
  fi
elif [ "$FAST" = 1 ] && [ "$PREFILL" = 1 ] && [ "${A2_SPLIT:-0}" = 1 ]; then
  # Attn_Cudnn_SdpaSplit (a long causal prompt as three cuDNN calls side by side + a merge): the
  # kernel lab on the prefill shapes (every cuDNN candidate: the tuner's event-timed loop, host
  # time per call, GPU time replayed from a graph); its kernel tests; then TTFT with the 2048-token
  # prompts' attention forced to the split and to cuDNN's unsplit pick (results files that differ
  # in that line only), interleaved twice, 10 runs each; greedy ids both ways; Llama once.
  # A2_RESULTS_IN=<a tuned results file> skips tuning (else Gemma and Llama are tuned first).
  if [ -n "${A2_LAB_ONLY-prefill}" ]; then
    stamp "attention_lab --only ${A2_LAB_ONLY-prefill}"
    timeout "$(left 120)" "$BUILD/bench/attention/attention_lab" --only "${A2_LAB_ONLY-prefill}" \
      --cands "${A2_LAB_CANDS-Attn_Cudnn_Sdpa}" --csv "$OUT/lab.csv" >"$OUT/lab.md" 2>"$LOGS/lab.log"
    summary+=("attention_lab: rc $?")
    while IFS= read -r l; do summary+=("lab: $l"); done < <(grep -E "^[a-z]|Attn_Cudnn_Sdpa( |Split)" "$LOGS/lab.log" | cut -c1-260)
  fi
  gtest backends/cuda/attention/test_cuda_attention 90 'FlashAttention.*Split*:FlashAttention.LongPrompts*:FlashAttention.Cudnn*'
  if [ -n "${A2_RESULTS_IN:-}" ]; then
    cp "$A2_RESULTS_IN" "$OUT/engine_results_0.csv"
  else
    llm gemma_ttft 80 --model builtin:gemma-2b "${ttft[@]}"
    llm llama_ttft 110 --model builtin:llama-2-7b "${ttft[@]}"
  fi
  # Both files from the tuned one: the 2048-token prompts' attention lines name the split in
  # one and cuDNN's unsplit pick (Attn_Cudnn_Sdpa) in the other.
  sed -E 's/^(AttentionTunableOp[^,]*,b1_q2048_k2048[^,]*),Attn_[A-Za-z0-9_]+,/\1,Attn_Cudnn_SdpaSplit,/' \
    "$OUT/engine_results_0.csv" >"$OUT/split_results_0.csv"
  sed -E 's/^(AttentionTunableOp[^,]*,b1_q2048_k2048[^,]*),Attn_Cudnn_SdpaSplit,/\1,Attn_Cudnn_Sdpa,/' \
    "$OUT/engine_results_0.csv" >"$OUT/unsplit_results_0.csv"
  summary+=("split file: $(grep -hoE '^AttentionTunableOp[^,]*,b1_q2048[^,]*,[^,]*' "$OUT/split_results_0.csv" | tr '\n' ' ')")
  summary+=("unsplit file: $(grep -hoE '^AttentionTunableOp[^,]*,b1_q2048[^,]*,[^,]*' "$OUT/unsplit_results_0.csv" | tr '\n' ' ')")
  again=(--prompt-len 2048 --max-new-tokens 1 --compare --iterations 10 --profile-prefill 3 --no-in-context-check)
  for r in 1 2; do
    A2_RESULTS="$OUT/split_results_%d.csv" llm "gemma_split$r" 25 --model builtin:gemma-2b "${again[@]}"
    A2_RESULTS="$OUT/unsplit_results_%d.csv" llm "gemma_unsplit$r" 25 --model builtin:gemma-2b "${again[@]}"
  done
  ids=(--prompt-len 2048 --max-new-tokens 24 --iterations 1 --warmup 0 --print-ids --no-in-context-check)
  A2_RESULTS="$OUT/split_results_%d.csv" llm gemma_ids_split 25 --model builtin:gemma-2b "${ids[@]}"
  A2_RESULTS="$OUT/unsplit_results_%d.csv" llm gemma_ids_unsplit 25 --model builtin:gemma-2b "${ids[@]}"
  for f in gemma_ids_split gemma_ids_unsplit; do
    [ -f "$LOGS/$f.txt" ] && summary+=("$f: $(grep -E '^[0-9]+(,[0-9]+)+$' "$LOGS/$f.txt" | tail -1)")
  done
  A2_RESULTS="$OUT/split_results_%d.csv" llm llama_split1 30 --model builtin:llama-2-7b "${again[@]}"
  A2_RESULTS="$OUT/unsplit_results_%d.csv" llm llama_unsplit1 30 --model builtin:llama-2-7b "${again[@]}"
elif [ "$FAST" = 1 ] && [ "$PREFILL" = 1 ] && [ "${A2_LAST:-0}" = 1 ]; then
  # The last layer's MLP on the output rows only (the default) vs on every row (--last-layer
  # all): tune once, then TTFT read back both ways, interleaved, 10 runs each; the engine's GPU
  # tests; greedy ids both ways; Llama the same once; then prefill graphs at a short prompt.
  llm gemma_ttft 80 --model builtin:gemma-2b "${ttft[@]}"
  again=(--prompt-len 2048 --max-new-tokens 1 --compare --iterations 10 --profile-prefill 3 --no-in-context-check)
  llm gemma_ttft_again 25 --model builtin:gemma-2b "${again[@]}"
  llm gemma_ttft_all 25 --model builtin:gemma-2b "${again[@]}" --last-layer all
  gtest llm/test_llm_cuda 150
  gtest llm/test_llm_cuda_kernels 40
  llm gemma_ttft_again2 25 --model builtin:gemma-2b "${again[@]}"
  llm gemma_ttft_all2 25 --model builtin:gemma-2b "${again[@]}" --last-layer all
  ids=(--prompt-len 2048 --max-new-tokens 24 --iterations 1 --warmup 0 --print-ids --no-in-context-check)
  llm gemma_ids_outputs 25 --model builtin:gemma-2b "${ids[@]}"
  llm gemma_ids_all 25 --model builtin:gemma-2b "${ids[@]}" --last-layer all
  for f in gemma_ids_outputs gemma_ids_all; do
    [ -f "$LOGS/$f.txt" ] && summary+=("$f: $(grep -E '^[0-9]+(,[0-9]+)+$' "$LOGS/$f.txt" | tail -1)")
  done
  llm llama_ttft 110 --model builtin:llama-2-7b "${ttft[@]}"
  llm llama_ttft_again 30 --model builtin:llama-2-7b "${again[@]}"
  llm llama_ttft_all 30 --model builtin:llama-2-7b "${again[@]}" --last-layer all
  short=(--prompt-len 128 --max-new-tokens 1 --iterations 20 --no-in-context-check)
  for r in 1 2; do
    llm "gemma_short_eager$r" 20 --model builtin:gemma-2b "${short[@]}" --no-prefill-graph
    llm "gemma_short_graph$r" 20 --model builtin:gemma-2b "${short[@]}"
  done
  for f in "$LOGS"/gemma_short_*.txt; do
    [ -f "$f" ] && summary+=("$(basename "$f" .txt): $(grep -E '^ *TTFT' "$f" | tr -s ' ' | tr '\n' ' ')")
  done
elif [ "$FAST" = 1 ] && [ "$PREFILL" = 1 ] && [ "$GRAPH" = 1 ]; then
  # Prefill graphs: tune once, then TTFT read back from the results file with --prefill-graph
  # and without, interleaved, 10 runs each; the GPU tests in between.
  llm gemma_ttft 80 --model builtin:gemma-2b "${ttft[@]}"
  again=(--prompt-len 2048 --max-new-tokens 1 --compare --iterations 10 --profile-prefill 3 --no-in-context-check)
  llm gemma_ttft_again 25 --model builtin:gemma-2b "${again[@]}" --prefill-graph
  llm gemma_ttft_nograph 25 --model builtin:gemma-2b "${again[@]}" --no-prefill-graph
  gtest llm/test_llm_cuda 150
  gtest llm/test_llm_cuda_kernels 60
  gtest backends/cuda/attention/test_cuda_attention 100
  gtest backends/cuda/test_cuda_gemm 20 'CudaScratch.*'
  llm gemma_ttft_again2 25 --model builtin:gemma-2b "${again[@]}" --prefill-graph
  llm gemma_ttft_nograph2 25 --model builtin:gemma-2b "${again[@]}" --no-prefill-graph
  llm llama_ttft 110 --model builtin:llama-2-7b "${ttft[@]}"
  llm llama_ttft_again 30 --model builtin:llama-2-7b "${again[@]}" --prefill-graph
  llm llama_ttft_nograph 30 --model builtin:llama-2-7b "${again[@]}" --no-prefill-graph
  # Then, with what is left, the suite's decode shapes (issue 12's "decode >= 80% of the
  # KV-bytes floor at 4k+", last measured in stage 2).
  suite_decode 120
elif [ "$FAST" = 1 ] && [ "$PREFILL" = 1 ]; then
  if [ "$SDPA" = 1 ]; then
    TUNABLEOP_CUDNN_SDPA_LOG=1 TUNABLEOP_VERBOSE=2 llm gemma_ttft 80 --model builtin:gemma-2b "${ttft[@]}"
    [ -f "$LOGS/gemma_ttft.txt" ] && while IFS= read -r l; do summary+=("gemma sdpa: $l"); done < <(
      grep -E "cuDNN SDPA|Attn_Cudnn|fastest for Attention" "$LOGS/gemma_ttft.txt" | grep -vE "unsupported id=" | cut -c1-400 | head -40)
    cudnn_names=Attn_Cudnn_Sdpa
    for s in a1 a2 a3 f0 f1 v0 v1 v2 v3; do cudnn_names="$cudnn_names,Attn_Cudnn_Sdpa_$s"; done
    TUNABLEOP_CUDNN_SDPA_LOG=1 TUNABLEOP_ATTENTION_TEST_ONLY=$cudnn_names gtest backends/cuda/attention/test_cuda_attention 30 \
      'FlashAttention.Bf16*:FlashAttention.Names*:FlashAttention.Cudnn*'
    [ -f "$LOGS/test_cuda_attention.log" ] && while IFS= read -r l; do summary+=("attention test: $l"); done < <(
      grep -E "^refused|^note|cuDNN SDPA" "$LOGS/test_cuda_attention.log" | grep -E "_q129_|^note" | cut -c1-300 | head -40)
  else
    llm gemma_ttft 80 --model builtin:gemma-2b "${ttft[@]}"
  fi
  if [ "${A2_GATE_TESTS:-1}" = 1 ]; then
    gtest llm/test_llm_cuda_kernels 25 '*CudnnGate*:*AddRmsnorm*'
    gtest llm/test_llm_cuda 60 '*PrefillGate*:*AutoGate*:*MatchesTransformersFixtures*:*AutoFusion*:*ProfiledPrefill*'
  fi
  llm llama_ttft 110 --model builtin:llama-2-7b "${ttft[@]}"
  # The side-by-sides, both ways from the results file above (no tuning), 10 runs each.
  again=(--prompt-len 2048 --max-new-tokens 1 --compare --iterations 10 --profile-prefill 3 --no-in-context-check)
  [ "$SDPA" = 1 ] && llm gemma_ttft_again 25 --model builtin:gemma-2b "${again[@]}"
  llm llama_ttft_again 30 --model builtin:llama-2-7b "${again[@]}"
  TUNABLEOP_LLM_PREFILL_GATE_CUDNN=off llm llama_ttft_gate_off 30 --model builtin:llama-2-7b "${again[@]}"
  [ "$SDPA" = 1 ] || llm gemma_ttft_again 25 --model builtin:gemma-2b "${again[@]}"
  TUNABLEOP_LLM_PREFILL_GATE_CUDNN=off llm gemma_ttft_gate_off 25 --model builtin:gemma-2b "${again[@]}"
  ids=(--prompt-len 2048 --max-new-tokens 24 --iterations 1 --warmup 0 --tune --print-ids --no-in-context-check)
  llm gemma_ids_auto 25 --model builtin:gemma-2b "${ids[@]}"
  TUNABLEOP_LLM_PREFILL_GATE_CUDNN=off llm gemma_ids_off 25 --model builtin:gemma-2b "${ids[@]}"
  for f in gemma_ids_auto gemma_ids_off; do
    [ -f "$LOGS/$f.txt" ] && summary+=("$f: $(grep -E '^[0-9]+(,[0-9]+)+$' "$LOGS/$f.txt" | tail -1)")
  done
elif [ "$FAST" = 1 ]; then
  llm gemma_ttft 80 --model builtin:gemma-2b "${ttft[@]}"
  llm llama_ttft 110 --model builtin:llama-2-7b "${ttft[@]}"
  # Every attention candidate vs fp64 (the fp16 paged-256 failure of 2026-11-23 and its
  # regression shapes: non-causal sequences with fewer keys than queries).
  [ "${A2_FLASH:-1}" = 1 ] && gtest backends/cuda/attention/test_cuda_attention 90 'FlashAttention.*'
  gtest llm/test_llm_cuda_kernels 40
  gtest llm/test_llm_cuda 100 '*MatchesTransformersFixtures*:*Fp32MatchesCpuEngine*:*Bf16IsCloseToFp32*:*ProfiledPrefill*:*PaddingAndBatching*:*PagedCacheEqualsStatic*:*GraphReplay*:*FusedProjectionsMatchUnfused*'
  # Decode with the packed element-wise kernels (stage 2, run 5: TPOT 2.261 ms static).
  llm gemma_decode_static 75 --model builtin:gemma-2b --prompt-len 1024 --max-new-tokens 128 --tune --iterations 3
  llm llama_ttft_unfused 80 --model builtin:llama-2-7b "${ttft[@]}" --fusion off
  nsys_bin=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
  secs=$(left 60)
  if [ -n "$nsys_bin" ] && [ "$secs" != 0 ]; then
    stamp "nsys: one tuned Llama prefill (results file of the runs above)"
    TUNABLEOP_ENABLED=1 TUNABLEOP_TUNING=0 TUNABLEOP_FILENAME="$OUT/engine_results_%d.csv" timeout "$secs" "$nsys_bin" profile -t cuda,nvtx,osrt --stats=true \
      -o "$LOGS/llama_prefill" -f true "$bin" llm --device cuda --model builtin:llama-2-7b --prompt-len 2048 \
      --max-new-tokens 1 --iterations 2 --warmup 1 >"$LOGS/nsys_llama.txt" 2>&1 ||
      echo "gpu-attention2: nsys exited $?"
    rm -f "$LOGS"/llama_prefill.nsys-rep "$LOGS"/llama_prefill.sqlite
  else
    summary+=("nsys: ${nsys_bin:-not found}; ${secs}s left")
  fi
fi

if [ "$FAST" != 1 ] && [ "${A2_TESTS:-1}" = 1 ]; then
  stamp "tests"
  for t in backends/cuda/attention/test_cuda_attention llm/test_llm_cuda llm/test_llm_cuda_kernels; do
    gtest "$t" 240
  done
fi

engine=" ${A2_ENGINE-ttft decode ragged} "
[ "$FAST" = 1 ] && engine=" "
if [[ $engine == *" ttft "* ]]; then
  stamp "engine: TTFT(2048), untuned vs tuned"
  llm gemma_ttft 120 --model builtin:gemma-2b "${ttft[@]}"
  llm llama_ttft 150 --model builtin:llama-2-7b "${ttft[@]}"
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

if [ "$FAST" != 1 ] && [ "${A2_SUITE:-1}" = 1 ]; then
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
  for f in gemma_split1 gemma_unsplit1 gemma_split2 gemma_unsplit2 llama_split1 llama_unsplit1 \
    gemma_ttft gemma_ttft_again gemma_ttft_nograph gemma_ttft_all gemma_ttft_again2 gemma_ttft_nograph2 \
    gemma_ttft_all2 gemma_ttft_gate_off llama_ttft llama_ttft_again llama_ttft_nograph llama_ttft_all \
    llama_ttft_gate_off llama_ttft_unfused; do
    [ -f "$LOGS/$f.txt" ] || continue
    echo "== $f"
    grep -E "^Untuned|^Tuned|TTFT|Prefill GEMMs|Attention problems|In-context" "$LOGS/$f.txt"
    sed -n '/Kernels chosen/,/^[^ ]/p' "$LOGS/$f.txt" | grep -E "Kernels chosen|prefill gate"
    sed -n '/Prefill breakdown/,$p' "$LOGS/$f.txt"
  done
  [ -f "$LOGS/nsys_llama.txt" ] && { echo "== nsys (one tuned Llama prefill run)"; grep -A25 -E "cuda_api_sum|cuda_gpu_kern_sum|cuda_gpu_mem_time_sum" "$LOGS/nsys_llama.txt" | cut -c1-220 | head -90; }
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
[ -f "$OUT/sdpa_suite.csv" ] && grep -E "default" "$OUT/sdpa_suite.csv" | sed "s/^/suite regime: /"
[ -f "$OUT/read_floor.md" ] && cat "$OUT/read_floor.md"

#!/usr/bin/env bash
# The server's load test on one GPU (issue 26), in device calls of at most 10 minutes:
#   SERVE_PHASE=cold  build for sm_90; `tunableop serve` from an empty results file (start-up tuning timed); the first
#                     $SERVE_FIRST requests at 8/s right after it is ready (tuning off the request
#                     path: their TTFT against the warm run's); $SERVE_INF_REQUESTS at unlimited
#                     rate with /metrics sampled (peak KV pages); one request alone (TPOT through
#                     the server); SIGTERM (must exit 0). The results file comes back in $OUT.
#   SERVE_PHASE=all   everything in one call on a cold server (what a short device budget allows):
#                     start-up from an empty results file, the first $SERVE_FIRST requests at 8/s,
#                     $SERVE_INF_REQUESTS at unlimited rate, $SERVE_REQUESTS at 8/s again (steady
#                     state), one request alone, SIGTERM, then HF on $SERVE_HF of the unlimited-rate
#                     requests. Logs are packed into $OUT/serve_logs.tgz after each step.
#   SERVE_PHASE=warm  the same build; `tunableop llm` alone (TPOT at batch 1); the server started
#                     from $SERVE_RESULTS (the cold phase's file, carried back): the rate sweep ($SERVE_RATES, $SERVE_REQUESTS each),
#                     then Hugging Face continuous batching on the first $SERVE_HF requests of the
#                     unlimited-rate workload, in the same call.
# Model: $SERVE_MODEL (builtin:llama-2-7b), bf16, TP=1; $SERVE_ARGS go to `serve` (default
# --max-seq 2048: the workload's longest request, 1024 prompt + 1024 new tokens). cpp-httplib must
# be installed or carried in .deps/httplib (src/serve/CMakeLists.txt). A short table last.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# Logs go to a work folder; $OUT gets few files (a device call brings back at most 8): the packed
# logs (serve_logs.tgz, renewed after each step), the plot and the table.
RESULT_DIR=${OUT:-$ROOT/gpu-serve-out}
OUT=$(mktemp -d /tmp/serve-run.XXXX)
BUILD=${GPU_CHECK_BUILD:-$ROOT/build}
PHASE=${SERVE_PHASE:-cold}
MODEL=${SERVE_MODEL:-builtin:llama-2-7b}
RATES=${SERVE_RATES:-2 4 8 16}
REQUESTS=${SERVE_REQUESTS:-100}
INF_REQUESTS=${SERVE_INF_REQUESTS:-1000}
FIRST=${SERVE_FIRST:-50}
HF=${SERVE_HF:-200}
mkdir -p "$RESULT_DIR"
# cuDNN's fused prefill gate is chosen per prefill size by building every cuDNN configuration
# for it: minutes of start-up for the sizes a server warms, and no server ever meets the same
# prefill size often. The gate stays gemm+gated.
export TUNABLEOP_LLM_PREFILL_GATE_CUDNN=${TUNABLEOP_LLM_PREFILL_GATE_CUDNN:-off}
[ -d /opt/torch/.venv/bin ] && export PATH="$PATH:/opt/torch/.venv/bin"
[ -d "$ROOT/.deps/httplib/lib" ] && export LD_LIBRARY_PATH="$ROOT/.deps/httplib/lib:${LD_LIBRARY_PATH:-}"
start=$(date +%s)
stamp() { echo "[$(($(date +%s) - start))s] $*"; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)

stamp "build"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$OUT/configure.log" 2>&1 ||
  { tail -20 "$OUT/configure.log"; exit 1; }
grep -E "cpp-httplib" "$OUT/configure.log"
ninja -C "$BUILD" tunableop_cli >"$OUT/build.log" 2>&1 || { grep -E "FAILED|error" "$OUT/build.log" | head -20; exit 1; }
bin="$BUILD/tools/tunableop"
results="$OUT/serve_results_%d.csv"
if [ -n "${SERVE_RESULTS:-}" ]; then
  cp "$SERVE_RESULTS" "$OUT/serve_results_0.csv"
  [ -f "$SERVE_RESULTS.stats" ] && cp "$SERVE_RESULTS.stats" "$OUT/serve_results_0.csv.stats"
fi

if [ "$PHASE" = warm ]; then
  # TPOT of `tunableop llm` alone (batch 1, a 256-token prompt), before the server takes the GPU;
  # its own results file, so that the server starts from an empty one.
  stamp "llm alone"
  TUNABLEOP_FILENAME="$OUT/llm_results_%d.csv" timeout 300 "$bin" llm --device cuda --model "$MODEL" --tune \
    --kv-cache paged --prompt-len 256 --max-new-tokens 192 --iterations 3 >"$OUT/llm_alone.txt" 2>&1 ||
    echo "gpu-serve-bench: llm alone exited $?"
fi

stamp "serve $MODEL ($PHASE)"
# shellcheck disable=SC2086
TUNABLEOP_FILENAME="$results" "$bin" serve --device cuda --model "$MODEL" --tune --port 0 \
  ${SERVE_ARGS---max-seq 2048} >"$OUT/serve.out" 2>"$OUT/serve.err" &
server=$!
port=""
for _ in $(seq 1 1000); do  # up to ~8 minutes: weights, warm-up, tuning
  port=$(sed -n 's/^tunableop serve: ready on http:\/\/[^:]*:\([0-9]*\) .*/\1/p' "$OUT/serve.out")
  [ -n "$port" ] && break
  kill -0 $server 2>/dev/null || break
  sleep 0.5
done
if [ -z "$port" ]; then
  echo "gpu-serve-bench: the server did not get ready"; tail -30 "$OUT/serve.err"; kill -9 $server 2>/dev/null; exit 1
fi
stamp "ready: $(head -1 "$OUT/serve.out")"
url="http://127.0.0.1:$port"
metrics_to() {  # FILE: /metrics now
  python3 -c "import urllib.request; print(urllib.request.urlopen('$url/metrics').read().decode())" >"$1" 2>&1
}
bench() {  # name, args...
  local name=$1
  shift
  stamp "bench $name"
  # /metrics before and after: bench/serve/loop_breakdown.py splits the run's loop time.
  metrics_to "$OUT/metrics_before_$name.txt"
  local t0
  t0=$(date +%s.%N)
  timeout "${BENCH_TIMEOUT:-900}" "$bin" bench serve --url "$url" --seed 1 --json "$OUT/$name.json" "$@" >"$OUT/$name.txt" 2>&1 ||
    echo "gpu-serve-bench: $name exited $? (see $name.txt)"
  metrics_to "$OUT/metrics_after_$name.txt"
  python3 bench/serve/loop_breakdown.py "$OUT/metrics_before_$name.txt" "$OUT/metrics_after_$name.txt" \
    --wall "$(python3 -c "import time; print(time.time() - $t0)")" >"$OUT/loop_$name.txt" 2>&1
}
sample_metrics() {  # every 0.5 s into $OUT/$1: peaks of KV pages and requests
  python3 - "$url" >"$OUT/$1" 2>&1 <<'PY' &
import re, sys, time, urllib.request
peak = {"tunableop_kv_pages_used": 0, "tunableop_requests_running": 0, "tunableop_requests_waiting": 0}
t_end = time.time() + 900
while time.time() < t_end:
    try:
        body = urllib.request.urlopen(sys.argv[1] + "/metrics", timeout=5).read().decode()
    except Exception:
        break
    for k in peak:
        m = re.search(r"\n" + k + r" ([0-9.e+]+)\n", body)
        if m: peak[k] = max(peak[k], float(m.group(1)))
    total = float(re.search(r"\ntunableop_kv_pages_total ([0-9.e+]+)\n", body).group(1))
    page = float(re.search(r"\ntunableop_kv_page_size ([0-9.e+]+)\n", body).group(1))
    print(" ".join(f"{k}={v:g}" for k, v in peak.items()), f"kv_pages_total={total:g} page_size={page:g}", flush=True)
    time.sleep(0.5)
PY
  sampler=$!
}

pack() { tar czf "$RESULT_DIR/serve_logs.tgz.tmp" -C "$OUT" . 2>/dev/null && mv "$RESULT_DIR/serve_logs.tgz.tmp" "$RESULT_DIR/serve_logs.tgz"; }
if [ "$PHASE" = cold ] || [ "$PHASE" = all ]; then
  [ "$FIRST" -gt 0 ] && { BENCH_TIMEOUT=60 bench first --requests "$FIRST" --rate 8; pack; }
  sample_metrics metrics_peak.txt
  BENCH_TIMEOUT=150 bench rate_inf --requests "$INF_REQUESTS" --rate inf --save-workload "$OUT/workload_inf.json"
  kill $sampler 2>/dev/null
  pack
  [ "$PHASE" = all ] && { BENCH_TIMEOUT=60 bench rate_8 --requests "$REQUESTS" --rate 8; pack; }
  BENCH_TIMEOUT=40 bench alone --requests 10 --concurrency 1
  pack
else
  for r in $RATES; do bench "rate_$r" --requests "$REQUESTS" --rate "$r"; done
fi
metrics_to "$OUT/metrics_end.txt"

stamp "SIGTERM"
kill -TERM $server
wait $server
echo "serve exit code after SIGTERM: $?" | tee "$OUT/exit_code.txt"

[ "$PHASE" = all ] && SERVE_WORKLOAD="$OUT/workload_inf.json"
if [ "$PHASE" != cold ] && [ "$HF" -gt 0 ] && [ -n "${SERVE_WORKLOAD:-}" ]; then
  stamp "hf continuous batching, $HF requests"
  model=${MODEL#builtin:}
  PYTHONUNBUFFERED=1 timeout "${HF_TIMEOUT:-420}" python3 bench/serve/hf_continuous_batching.py --workload "$SERVE_WORKLOAD" \
    --model "$model" --requests "$HF" >"$OUT/hf.json" 2>"$OUT/hf.err" || { echo "gpu-serve-bench: hf exited $?"; tail -5 "$OUT/hf.err"; }
fi

files=()
for f in first rate_inf $(for r in $RATES; do echo "rate_$r"; done); do [ -f "$OUT/$f.json" ] && files+=("$OUT/$f.json"); done
[ ${#files[@]} -gt 0 ] && { python3 bench/serve/plot_serve.py "${files[@]}" -o "$RESULT_DIR/serve.png" --title "tunableop serve, $MODEL, $gpu" ||
  echo "gpu-serve-bench: plot failed"; }
stamp "done"
echo "== $gpu; $(head -1 "$OUT/serve.out")"
grep -E "warm-up done" "$OUT/serve.err" | head -2
[ -f "$OUT/metrics_peak.txt" ] && echo "== peak (unlimited rate): $(tail -1 "$OUT/metrics_peak.txt")"
for f in "$OUT"/loop_*.txt; do [ -f "$f" ] && echo "== loop, $(basename "$f" .txt | sed 's/^loop_//'): $(cat "$f")"; done
[ -f "$OUT/llm_alone.txt" ] && echo "== llm alone: $(grep -E "TPOT" "$OUT/llm_alone.txt" | head -1)"
[ -s "$OUT/hf.json" ] && echo "== hf: $(cat "$OUT/hf.json")"
printf "%-10s %9s %12s %12s %10s %10s %10s %10s %s\n" run req/s out_tok/s total_tok/s ttft_p50 ttft_p99 tpot_p50 tpot_p99 errors
pack
{
for f in first alone rate_inf $(for r in $RATES; do echo "rate_$r"; done); do
  [ -f "$OUT/$f.json" ] || continue
  python3 - "$OUT/$f.json" "$f" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]:<10} {j['requests_per_s']:9.2f} {j['output_tokens_per_s']:12.1f} {j['total_tokens_per_s']:12.1f} "
      f"{j['ttft_ms']['p50']:10.1f} {j['ttft_ms']['p99']:10.1f} {j['tpot_ms']['p50']:10.2f} {j['tpot_ms']['p99']:10.2f} "
      f"{j['errors'] or '-'}")
PY
done
} | tee "$RESULT_DIR/summary.txt"

#!/usr/bin/env bash
# One device call for the server's load test (issue 26): build for sm_90, start `tunableop serve`
# on builtin:llama-2-7b (bf16, TunableOp tuning into a results file kept under $OUT), load it with
# `tunableop bench serve` (the synthetic workload, seed 1) at several offered rates and at
# unlimited rate, sample /metrics during the unlimited run (peak KV pages in use), time one
# request alone (TPOT through the server), SIGTERM it (must exit 0), plot, print a table.
#   SERVE_MODEL (builtin:llama-2-7b)  SERVE_RATES ("1 2 4 8 16")  SERVE_REQUESTS (200 per rate)
#   SERVE_INF_REQUESTS (1000)  SERVE_ARGS (extra `serve` options, e.g. "--max-running 128")
# cpp-httplib must be installed or carried in .deps/httplib (src/serve/CMakeLists.txt; Debian's
# build also needs the OpenSSL, zlib and Brotli headers it was compiled with).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/gpu-serve-out}
BUILD=${GPU_CHECK_BUILD:-$ROOT/build}
MODEL=${SERVE_MODEL:-builtin:llama-2-7b}
RATES=${SERVE_RATES:-1 2 4 8 16}
REQUESTS=${SERVE_REQUESTS:-200}
INF_REQUESTS=${SERVE_INF_REQUESTS:-1000}
mkdir -p "$OUT"
[ -d "$ROOT/.deps/httplib/lib" ] && export LD_LIBRARY_PATH="$ROOT/.deps/httplib/lib:${LD_LIBRARY_PATH:-}"
start=$(date +%s)
stamp() { echo "[$(($(date +%s) - start))s] $*"; }

stamp "build"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$OUT/configure.log" 2>&1 ||
  { tail -20 "$OUT/configure.log"; exit 1; }
grep -E "cpp-httplib" "$OUT/configure.log"
ninja -C "$BUILD" tunableop_cli >"$OUT/build.log" 2>&1 || { grep -E "FAILED|error" "$OUT/build.log" | head -20; exit 1; }
bin="$BUILD/tools/tunableop"

# TPOT of `tunableop llm` alone (batch 1, the workload's mean lengths), before the server takes the GPU.
stamp "llm alone"
TUNABLEOP_FILENAME="$OUT/serve_results_%d.csv" timeout 900 "$bin" llm --device cuda --model "$MODEL" --tune \
  --kv-cache paged --prompt-len 256 --max-new-tokens 192 --iterations 3 >"$OUT/llm_alone.txt" 2>&1 ||
  echo "gpu-serve-bench: llm alone exited $?"

stamp "serve $MODEL"
# shellcheck disable=SC2086
TUNABLEOP_FILENAME="$OUT/serve_results_%d.csv" "$bin" serve --device cuda --model "$MODEL" --tune --port 0 \
  ${SERVE_ARGS:-} >"$OUT/serve.out" 2>"$OUT/serve.err" &
server=$!
port=""
for _ in $(seq 1 1200); do  # up to 10 minutes: weights, warm-up, tuning
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
bench() {  # name, args...
  local name=$1
  shift
  stamp "bench $name"
  timeout 1800 "$bin" bench serve --url "$url" --seed 1 --json "$OUT/$name.json" "$@" >"$OUT/$name.txt" 2>&1 ||
    echo "gpu-serve-bench: $name exited $? (see $name.txt)"
}
bench alone --requests 20 --concurrency 1
for r in $RATES; do bench "rate_$r" --requests "$REQUESTS" --rate "$r"; done
# The unlimited-rate run, with /metrics sampled every 0.5 s (peak KV pages in use).
python3 - "$url" >"$OUT/metrics_peak.txt" 2>&1 <<'PY' &
import re, sys, time, urllib.request
peak = {"tunableop_kv_pages_used": 0, "tunableop_requests_running": 0, "tunableop_requests_waiting": 0}
total = page = 0
t_end = time.time() + 1800
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
bench rate_inf --requests "$INF_REQUESTS" --rate inf
kill $sampler 2>/dev/null
curl_metrics=$(python3 -c "import urllib.request,sys; print(urllib.request.urlopen('$url/metrics').read().decode())" 2>&1)
echo "$curl_metrics" >"$OUT/metrics_end.txt"

stamp "SIGTERM"
kill -TERM $server
wait $server
rc=$?
echo "serve exit code after SIGTERM: $rc" | tee "$OUT/exit_code.txt"

files=()
for r in $RATES inf; do [ -f "$OUT/rate_$r.json" ] && files+=("$OUT/rate_$r.json"); done
python3 bench/serve/plot_serve.py "${files[@]}" -o "$OUT/serve.png" --title "tunableop serve, $MODEL, $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" ||
  echo "gpu-serve-bench: plot failed (matplotlib?)"
tar czf "$OUT/serve_logs.tgz" -C "$OUT" --exclude='*.tgz' . 2>/dev/null
stamp "done"
echo "== $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); $(head -1 "$OUT/serve.out")"
echo "== peak (unlimited rate): $(tail -1 "$OUT/metrics_peak.txt")"
echo "== llm alone: $(grep -E "TPOT" "$OUT/llm_alone.txt" | head -1)"
printf "%-10s %9s %12s %12s %10s %10s %10s %10s %s\n" run req/s out_tok/s total_tok/s ttft_p50 ttft_p99 tpot_p50 tpot_p99 errors
for f in alone $(for r in $RATES; do echo "rate_$r"; done) rate_inf; do
  [ -f "$OUT/$f.json" ] || { echo "$f: no result"; continue; }
  python3 - "$OUT/$f.json" "$f" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]:<10} {j['requests_per_s']:9.2f} {j['output_tokens_per_s']:12.1f} {j['total_tokens_per_s']:12.1f} "
      f"{j['ttft_ms']['p50']:10.1f} {j['ttft_ms']['p99']:10.1f} {j['tpot_ms']['p50']:10.2f} {j['tpot_ms']['p99']:10.2f} "
      f"{j['errors'] or '-'}")
PY
done

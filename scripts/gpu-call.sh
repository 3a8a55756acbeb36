# shellcheck shell=bash disable=SC2034,SC2154
# Sourced by the multi-GPU scripts (gpu-tp.sh, gpu-scale.sh, gpu-tp8.sh): one device call's
# clock and budget. Expects ROOT, LOGS and budget_s (the whole call's seconds); sets start,
# deadline, summary, gpus (the machine's GPU count); defines stamp and budget; writes
# $LOGS/machine.txt; keeps NVLink multicast off (NCCL_NVLS_ENABLE=0; docs/parallel.md). run_test
# runs a GoogleTest binary within the budget into $LOGS/NAME.log and adds its verdict to summary.
mkdir -p "$LOGS"
[ -d /opt/torch/.venv/bin ] && export PATH="$PATH:/opt/torch/.venv/bin"
start=$(date +%s)
deadline=$((start + budget_s))
stamp() { echo "[$(($(date +%s) - start))s] $*"; }
# Seconds a step may take: at most $1, and never into the $2 seconds kept for later steps.
budget() {
  local left=$((deadline - $(date +%s) - $2))
  [ "$left" -gt "$1" ] && left=$1
  echo $((left > 0 ? left : 0))
}
summary=()
export NCCL_NVLS_ENABLE=0 NCCL_DEBUG=${NCCL_DEBUG:-WARN}
{
  date -u +%Y-%m-%dT%H:%MZ
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
  nvidia-smi topo -m 2>&1
  nvcc --version 2>&1 | tail -1
  git -C "$ROOT" log --oneline -1 2>/dev/null
} >"$LOGS/machine.txt"
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)

# shellcheck disable=SC2317
run_test() {  # name, binary, cap seconds, seconds kept for later
  local name=$1 exe=$2 cap=$3 keep=$4
  [ -x "$exe" ] || { summary+=("$name: not built"); return; }
  local t
  t=$(budget "$cap" "$keep")
  [ "$t" -gt 5 ] || { summary+=("$name: no time left"); return; }
  stamp "test $name (up to ${t}s)"
  TUNABLEOP_SOURCE_DIR="$ROOT" timeout "$t" "$exe" >"$LOGS/$name.log" 2>&1
  local rc=$?
  summary+=("$name: $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$LOGS/$name.log" | tr '\n' ' ') (rc $rc)")
  grep -E "Failure|Skipped|^\[  FAILED|differ" "$LOGS/$name.log" | head -8
}

# Sourced by the gpu-*.sh scripts that run steps inside one time budget (gpu-interpose.sh,
# gpu-fp8.sh, gpu-fp8-engine.sh, gpu-robust.sh, gpu-models.sh, bench/lab/gpu-decode.sh). Expects: start (date +%s at the beginning), BUDGET (seconds), STEPS (a comma
# list), LOGS (a folder). Gives:
#   stamp MSG              MSG with the seconds since start (after `pack`, where the script
#                          defines one: its logs then survive a run cut short)
#   left                   seconds left of the budget
#   step_seconds WANT      seconds a step wanting WANT may run: what is left less 5 s, at most
#                          WANT; 0 (skip the step) when under 15 s would be left
#   want STEP              true when STEP is in STEPS
#   note MSG               appends MSG to $LOGS/steps.txt (the summary's list of steps)
#   timed NAME NEED CAP CMD...
#                          runs CMD (its own environment: PYTORCH_TUNABLEOP_ENABLED,
#                          TUNABLEOP_ENABLED and LD_PRELOAD unset unless CMD sets them with env
#                          syntax) with a time limit of CAP seconds or what is left of the budget,
#                          output in $LOGS/NAME.txt; skipped (and noted) when less than NEED
#                          seconds are left.
#   summary_head TITLE     the summary's first lines: TITLE (the machine), the steps run and skipped
#   summary_tests [REGEX]  its test section from $LOGS/ctest.txt: the counts, failures and REGEX
#   summary_finish         packs $LOGS into $OUT/logs.tgz and prints $OUT/summary.md
#   machine_info [CMD...]  the GPU, CMD's last line and nvcc's into $LOGS/machine.txt, stamped
#   defined_targets BUILD TARGET...
#                          the TARGETs BUILD's configuration defines (ninja refuses a whole list
#                          for one unknown name), on one line
#   build_targets BUILD TARGET...
#                          configures BUILD for sm_90 (Release, Ninja) and builds those of the
#                          targets this configuration defines (ninja refuses a whole list for one
#                          unknown name); logs in $LOGS/configure.log and build.log.
# shellcheck shell=bash disable=SC2154
stamp() {
  if declare -F pack >/dev/null; then pack; fi
  echo "[$(($(date +%s) - start))s] $*"
}
left() { echo $((start + BUDGET - $(date +%s))); }
step_seconds() {
  local rest=$(($(left) - 5))
  if [ "$rest" -lt 15 ]; then echo 0; elif [ "$rest" -lt "$1" ]; then echo "$rest"; else echo "$1"; fi
}
want() { [[ ",$STEPS," == *",$1,"* ]]; }
note() { echo "$*" >>"$LOGS/steps.txt"; }

timed() {
  local name=$1 need=$2 cap=$3
  shift 3
  local l
  l=$(left)
  if [ "$l" -lt "$need" ]; then
    note "$name: skipped (budget: ${l}s left, needs ${need}s)"
    stamp "$name: skipped (time)"
    return 0
  fi
  local t=$((l - 5 < cap ? l - 5 : cap))
  stamp "$name (limit ${t}s)"
  local t0 rc
  t0=$(date +%s)
  timeout "$t" env -u PYTORCH_TUNABLEOP_ENABLED -u TUNABLEOP_ENABLED -u LD_PRELOAD "$@" >"$LOGS/$name.txt" 2>&1
  rc=$?
  note "$name: rc $rc in $(($(date +%s) - t0))s"
  [ $rc -ne 0 ] && stamp "$name: exited $rc (see $name.txt in logs.tgz)"
  return 0
}

summary_head() {
  echo "# $1 ($(head -1 "$LOGS/machine.txt" 2>/dev/null))"
  echo
  echo '## steps'
  sed 's/^/- /' "$LOGS/steps.txt" 2>/dev/null
}

summary_tests() {
  [ -f "$LOGS/ctest.txt" ] || return 0
  echo
  echo '## GPU tests'
  grep -E "tests passed|tests failed|\((Failed|Timeout|SEGFAULT)\)${1:+|$1}" "$LOGS/ctest.txt" | head -40
}

summary_finish() {
  tar czf "$OUT/logs.tgz" -C "$LOGS" . 2>/dev/null
  stamp "done; logs in logs.tgz"
  cat "$OUT/summary.md"
}

machine_info() {
  {
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -2
    [ $# -gt 0 ] && "$@" 2>&1 | tail -1
    nvcc --version 2>&1 | tail -1
  } >"$LOGS/machine.txt"
  stamp "machine: $(head -1 "$LOGS/machine.txt")"
}

defined_targets() {  # BUILD TARGET...: those the configuration in BUILD defines, one line
  local build=$1 t out=()
  shift
  for t in "$@"; do
    ninja -C "$build" -t query "$t" >/dev/null 2>&1 && out+=("$t")
  done
  echo "${out[*]}"
}
build_targets() {
  local build=$1 targets=()
  shift
  stamp "configure + build"
  if ! cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    >"$LOGS/configure.log" 2>&1; then
    note "build: configure failed"
    tail -20 "$LOGS/configure.log"
    return 0
  fi
  read -r -a targets <<<"$(defined_targets "$build" "$@")"
  ninja -C "$build" -k 0 "${targets[@]}" >"$LOGS/build.log" 2>&1
  note "build: rc $? at $(($(date +%s) - start))s (targets: ${targets[*]})"
}

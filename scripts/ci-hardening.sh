#!/usr/bin/env bash
# The hardening jobs of CI (issue 9), each in its own build folder, CPU only:
#   asan   ASan + UBSan build (clang, with the libFuzzer targets) running the whole CPU test suite
#   tsan   TSan build running the concurrency tests (results file, dispatch from many threads)
#   fuzz   every libFuzzer target for FUZZ_SECONDS (default 60) on its committed seed corpus
#   all    the three in order (the default); prints the wall time of each at the end
# Any sanitizer report or fuzz finding fails the job. Needs clang and its runtimes (install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
fuzz_seconds=${FUZZ_SECONDS:-60}
export CC=${CC_SANITIZE:-clang} CXX=${CXX_SANITIZE:-clang++}

# Sanitizer builds: -O1 (fast enough to run the suite, quick to compile), asserts on, no CUDA.
# OpenMP is GCC's libgomp, as in the normal build: OpenBLAS, BLIS and oneDNN use it, and clang's
# own libomp beside it would be a second OpenMP runtime in the process (oneDNN's thread setting
# then lands in the other one; libomp also dies under a file size limit, see docs/hardening.md).
configure() {
  local dir=$1; shift
  local gomp
  gomp=$(gcc -print-file-name=libgomp.so)
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -g1" \
    -DCMAKE_C_FLAGS_RELEASE="-O1 -g1" -DTUNABLEOP_WITH_CUDA=OFF \
    -DOpenMP_C_FLAGS=-fopenmp=libgomp -DOpenMP_CXX_FLAGS=-fopenmp=libgomp -DOpenMP_C_LIB_NAMES=gomp \
    -DOpenMP_CXX_LIB_NAMES=gomp -DOpenMP_gomp_LIBRARY="$gomp" "$@" >"$dir-configure.log" 2>&1 ||
    { cat "$dir-configure.log"; exit 1; }
}

# Reports are errors; a huge allocation is a null the code must handle, as without ASan.
# LeakSanitizer is off for the test suite: its exit-time tracer crashes on the BLAS libraries'
# idle threads here ("Tracer caught signal 11"); the fuzz job runs with leak detection.
export ASAN_OPTIONS=${ASAN_OPTIONS:-allocator_may_return_null=1:detect_leaks=0:halt_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
# One OpenMP / OpenBLAS thread per process: their runtimes are not instrumented (TSan would see
# their synchronisation as races) and the machine has 2 cores anyway.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

job_asan() {
  configure build-asan -DTUNABLEOP_SANITIZE=address,undefined -DTUNABLEOP_BUILD_FUZZERS=ON
  cmake --build build-asan -j "$jobs"
  # install.find_package builds a consumer without the sanitizer flags: it proves nothing here.
  ctest --test-dir build-asan --output-on-failure -j "$jobs" -L cpu -E '^install\.' --timeout 1800
}

job_tsan() {
  configure build-tsan -DTUNABLEOP_SANITIZE=thread
  cmake --build build-tsan -j "$jobs" --target test_core test_core_results test_ops_gemm
  ctest --test-dir build-tsan --output-on-failure -j "$jobs" -R 'Concurren|Threads' --timeout 1800
}

job_fuzz() {
  [ -x build-asan/fuzz/results_file_fuzzer ] || job_asan
  local work
  work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  for corpus in fuzz/corpus/*/; do
    local name
    name=$(basename "$corpus")
    mkdir -p "$work/$name"
    echo "== fuzz $name for ${fuzz_seconds}s"
    # New inputs go to a scratch corpus; the committed seeds are read only. A crash, leak,
    # timeout or sanitizer report exits non-zero and leaves the input under $work.
    ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1 \
      build-asan/fuzz/"${name}"_fuzzer -max_total_time="$fuzz_seconds" -timeout=30 -rss_limit_mb=4096 \
      -print_final_stats=1 -artifact_prefix="$work/$name-" "$work/$name" "$corpus" 2>&1 | tail -n 12 ||
      { echo "fuzz $name: FINDING (input under $work)"; ls -l "$work"; trap - RETURN; return 1; }
  done
}

what=${1:-all}
declare -A took
for j in asan tsan fuzz; do
  if [ "$what" = all ] || [ "$what" = "$j" ]; then
    t0=$(date +%s)
    "job_$j"
    took[$j]=$(($(date +%s) - t0))
  fi
done
for j in asan tsan fuzz; do
  [ -n "${took[$j]:-}" ] && echo "ci-hardening: $j took ${took[$j]}s"
done

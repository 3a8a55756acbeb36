#!/usr/bin/env bash
# The hardening jobs of CI (issue 9), each in its own build folder, CPU only:
#   asan   ASan + UBSan build (gcc) running the whole CPU test suite
#   tsan   TSan build (gcc) running the concurrency tests (results file, dispatch from many threads,
#          the op framework's plans and slot table, the interposer serving from many threads, a
#          program exiting while its threads are inside served calls, the server's channel wake-ups)
#   fuzz   the libFuzzer targets (clang, ASan + UBSan) on their committed seed corpora: a fixed
#          random seed and a fixed number of runs per target (FUZZ_RUNS_SCALE scales them), capped at
#          FUZZ_SECONDS (default 150) each; see "deterministic" below
#   all    the three in order (the default); prints the wall time of each at the end
# Any sanitizer report or fuzz finding fails the job. Needs clang and its runtimes (install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
fuzz_seconds=${FUZZ_SECONDS:-150}
fuzz_scale=${FUZZ_RUNS_SCALE:-1}

# Sanitizer builds: -O1 (fast enough to run the suite, quick to compile), asserts on, no CUDA.
# gcc for the test suite: its sanitizers link their runtime as a shared library, so the
# interposer's preload library (built with them) still loads into uninstrumented programs
# (python3, env) as its tests need; clang links it statically into executables only.
configure() {
  local dir=$1; shift
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -g1" \
    -DCMAKE_C_FLAGS_RELEASE="-O1 -g1" -DTUNABLEOP_WITH_CUDA=OFF "$@" >"$dir-configure.log" 2>&1 ||
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
  CC=gcc CXX=g++ configure build-asan -DTUNABLEOP_SANITIZE=address,undefined
  cmake --build build-asan -j "$jobs"
  # install.find_package builds a consumer without the sanitizer flags: it proves nothing here.
  # The in-context ratio test is a timing test (run alone in the normal suite); under ASan, with
  # our kernels instrumented and the BLAS libraries not, its ratio says nothing.
  ctest --test-dir build-asan --output-on-failure -j "$jobs" -L cpu -E '^install\.|^LlmInContext\.TunedLoses' \
    --timeout 1800
}

job_tsan() {
  CC=gcc CXX=g++ configure build-tsan -DTUNABLEOP_SANITIZE=thread
  # The interposer's exit-time case too (issue 33): a C program that exits while 8 threads are
  # inside served GEMMs, run under the TSan-built preload library and engine.
  cmake --build build-tsan -j "$jobs" --target test_core test_core_results test_ops_gemm test_ops_framework \
    test_interpose tunableop_preload tunableop_interpose interpose_exit_threads_program test_serve_threads
  ctest --test-dir build-tsan --output-on-failure -j "$jobs" -R 'Concurren|Threads|^Channel|^interpose\.exit_threads' \
    --timeout 1800
}

fuzz_targets=(results_file untuned_signature model_loader gemm_params chat_template tokenizer_json openai_request
  model_text)
# Runs per target: about 20-60 s each on the 2-core development VM (ASan + UBSan build;
# 2026-11-23: about 1900, 4300, 2500 and 450 runs/s for the first four; 2026-11-28: about 1300,
# 7000, 17000 and 1600 for the last four). With -seed fixed, libFuzzer's walk over the inputs
# follows the seed, the corpus and the coverage. Coverage also depends on the machine where our
# code branches on it: which ISA kernels the CPU has (capped at AVX2 here, TUNABLEOP_CPU_MAX_ISA),
# and, as CI showed twice, more than that (2026-11-28: CI's gemm_params walk reached a BLIS
# fault at run 7.3k that the walk here never met in 40k). So a CI finding is either a changed
# code or a machine's different walk; both are real defects (docs/hardening.md lists them).
# Before a commit the walk is run here, and gemm_params on more seeds. Longer campaigns:
# docs/hardening.md.
declare -A fuzz_runs=([results_file]=90000 [untuned_signature]=200000 [model_loader]=110000 [gemm_params]=20000
  [chat_template]=60000 [tokenizer_json]=150000 [openai_request]=400000 [model_text]=60000)

job_fuzz() {
  # libFuzzer is clang's. OpenMP stays GCC's libgomp as in the other builds: OpenBLAS, BLIS and
  # oneDNN use it, and clang's libomp beside it would be a second OpenMP runtime in the process.
  local gomp
  gomp=$(gcc -print-file-name=libgomp.so)
  CC=clang CXX=clang++ configure build-fuzz -DTUNABLEOP_SANITIZE=address,undefined -DTUNABLEOP_BUILD_FUZZERS=ON \
    -DTUNABLEOP_BUILD_TESTS=OFF -DTUNABLEOP_BUILD_TOOLS=OFF -DOpenMP_C_FLAGS=-fopenmp=libgomp \
    -DOpenMP_CXX_FLAGS=-fopenmp=libgomp -DOpenMP_C_LIB_NAMES=gomp -DOpenMP_CXX_LIB_NAMES=gomp \
    -DOpenMP_gomp_LIBRARY="$gomp"
  cmake --build build-fuzz -j "$jobs" --target "${fuzz_targets[@]/%/_fuzzer}"
  local work
  work=$(mktemp -d)
  export TUNABLEOP_CPU_MAX_ISA=${TUNABLEOP_CPU_MAX_ISA:-avx2}  # the same walk on every AVX2 machine (above)
  for name in "${fuzz_targets[@]}"; do
    mkdir -p "$work/$name"
    local runs=$((fuzz_runs[$name] * fuzz_scale))
    echo "== fuzz $name: $runs runs, seed 1, at most ${fuzz_seconds}s"
    # New inputs go to a scratch corpus; the committed seeds are read only. A crash, leak,
    # timeout or sanitizer report exits non-zero and leaves the input under $work.
    # Leaks are checked except where the BLAS libraries are loaded (gemm_params): LeakSanitizer's
    # tracer crashes on their threads here, as in the test suite.
    local leaks=1
    [ "$name" = gemm_params ] && leaks=0
    if ! ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=$leaks \
      build-fuzz/fuzz/"${name}"_fuzzer -seed=1 -runs="$runs" -max_total_time="$fuzz_seconds" -timeout=30 -rss_limit_mb=4096 \
      -print_final_stats=1 -artifact_prefix="$work/$name-" "$work/$name" "fuzz/corpus/$name" >"$work/$name.log" 2>&1
    then
      tail -n 60 "$work/$name.log"
      echo "fuzz $name: FINDING (the input is under $work)"
      ls -l "$work"
      return 1
    fi
    grep -E '^stat::(number_of_executed_units|peak_rss_mb)|^Done' "$work/$name.log" || true
  done
  rm -rf "$work"
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
  if [ -n "${took[$j]:-}" ]; then echo "ci-hardening: $j took ${took[$j]}s"; fi
done

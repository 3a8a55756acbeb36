#!/usr/bin/env bash
# Configures and builds into ./build (Release). Extra arguments go to cmake's configure step.
# BUILD_DIR=dir builds elsewhere. ccache is used when installed (a developer convenience; CI
# has none and builds plainly).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
build=${BUILD_DIR:-build}
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" "$@" >"$build-configure.log" 2>&1 ||
  { cat "$build-configure.log"; exit 1; }
grep -E '^-- tunableop' "$build-configure.log" || true
cmake --build "$build" -j "$jobs"

#!/usr/bin/env bash
# Installs the built tree into a temporary prefix and builds consumers with find_package: the
# static and the shared libtunableop (each must find the CPU backend's library) and the engine's.
set -euo pipefail
build_dir=$1 src_dir=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build_dir" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src_dir/tests/install/consumer" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/build" >/dev/null
"$tmp/build/consumer"
"$tmp/build/consumer_shared"
"$tmp/build/consumer_llm"

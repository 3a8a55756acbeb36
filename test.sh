#!/usr/bin/env bash
# Installs dependencies (Debian 12, root), builds everything and runs every test through ctest.
# GPU tests skip themselves when no GPU is present.
set -euo pipefail
cd "$(dirname "$0")"
scripts/install-deps.sh
scripts/build.sh
cd build
ctest --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" --timeout 900

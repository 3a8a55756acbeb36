#!/usr/bin/env bash
# Installs dependencies (Debian 12, root), builds everything and runs every test through ctest.
# GPU tests skip themselves when no GPU is present. Then the hardening jobs (issue 9): the CPU
# suite under ASan + UBSan, the concurrency tests under TSan, each fuzz target for 60 s
# (scripts/ci-hardening.sh; TUNABLEOP_QUICK_TEST=1 skips them for a quick local run).
set -euo pipefail
cd "$(dirname "$0")"
scripts/install-deps.sh
scripts/build.sh
(cd build && ctest --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" --timeout 900)
if [ "${TUNABLEOP_QUICK_TEST:-0}" != 1 ]; then
  scripts/ci-hardening.sh all
fi

#!/usr/bin/env bash
# Installs what the build needs from Debian 12's packages (as root). Quiet when all is there.
# The OpenMP builds of OpenBLAS and BLIS are named explicitly: with them every CPU candidate
# (our kernels, OpenBLAS, BLIS, oneDNN) shares one libgomp thread pool (docs/backends-cpu-libraries.md,
# "One thread world"); the build prefers them over Debian's default pthreads alternative.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config libfmt-dev nlohmann-json3-dev libcli11-dev
      libgtest-dev libgmock-dev libbenchmark-dev libopenblas-dev libopenblas0-openmp libopenblas-openmp-dev libblas3
      libblis-dev libblis4-openmp libblis-openmp-dev libdnnl-dev python3-matplotlib
      libsentencepiece-dev sentencepiece python3-numpy libopenmpi-dev openmpi-bin
      # the server (cpp-httplib), tokenizer.json pre-tokenizers (PCRE2) and normalizers (utf8proc)
      libcpp-httplib-dev libpcre2-dev libutf8proc-dev
      # sanitizer and fuzz jobs (scripts/ci-hardening.sh): clang and its ASan/UBSan/TSan/libFuzzer
      # runtimes (OpenMP stays GCC's libgomp)
      clang libclang-rt-14-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ] && ! command -v sudo >/dev/null; then
  echo "install-deps: need root to install: ${missing[*]}" >&2
  exit 1
fi
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

#!/usr/bin/env bash
# Run here (not on the device machine): downloads Debian's OpenMPI and what it loads into .mpi/
# (ignored by git), for a device machine whose image has no MPI. Name ".mpi" in the run tool's
# carry list; scripts/mpi-env.sh unpacks it there. About 15 MB.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
exclude="$(git rev-parse --git-common-dir)/info/exclude"
grep -qx '/.mpi/' "$exclude" 2>/dev/null || echo /.mpi/ >>"$exclude"
mkdir -p .mpi
cd .mpi
apt-get download openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev libhwloc15 libevent-core-2.1-7 \
  libevent-pthreads-2.1-7 libpmix2 libfabric1 libucx0 libibverbs1 librdmacm1 libnl-3-200 libnl-route-3-200 \
  libpsm2-2 libpsm-infinipath1 libnuma1 libltdl7 libmunge2 libpciaccess0 libxnvctrl0 libevent-2.1-7
ls -la
du -sh .

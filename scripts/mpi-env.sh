# shellcheck shell=bash disable=SC2034
# Sourced by the multi-process GPU scripts (gpu-scale.sh, gpu-tp8.sh): finds an MPI to build
# and launch with (issue 30: `mpirun -np N tunableop llm --tp N`). In order: mpirun on the PATH,
# NVIDIA's HPC-X (/opt/hpcx/ompi), /usr/local/mpi, then Debian's OpenMPI carried in .mpi/ beside
# the checkout's root (made here by scripts/mpi-carry.sh: its .deb files, unpacked into
# /tmp/mpiroot and used in place through OPAL_PREFIX). Sets MPIRUN (empty when none: the
# multi-process steps are skipped and say so), mpi_cmake (the configure flags), mpi_how and
# mpi_prefix (below).
# Expects ROOT.
MPIRUN="" mpi_cmake=() mpi_how="none"
for d in "" /opt/hpcx/ompi /usr/local/mpi; do
  if [ -z "$d" ]; then
    command -v mpirun >/dev/null 2>&1 && MPIRUN=$(command -v mpirun) && mpi_how="PATH"
  elif [ -x "$d/bin/mpirun" ]; then
    MPIRUN="$d/bin/mpirun" mpi_how="$d"
    export PATH="$d/bin:$PATH" LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    mpi_cmake=(-DMPI_HOME="$d")
  fi
  [ -n "$MPIRUN" ] && break
done
if [ -z "$MPIRUN" ] && ls "$ROOT"/.mpi/*.deb >/dev/null 2>&1; then
  R=/tmp/mpiroot
  mkdir -p "$R"
  for f in "$ROOT"/.mpi/*.deb; do dpkg -x "$f" "$R"; done
  L="$R/usr/lib/x86_64-linux-gnu"
  export OPAL_PREFIX="$R/usr" PATH="$R/usr/bin:$PATH"
  export LD_LIBRARY_PATH="$L/openmpi/lib:$L${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  if "$R/usr/bin/mpirun.openmpi" --version >/dev/null 2>&1; then
    MPIRUN="$R/usr/bin/mpirun.openmpi" mpi_how="carried .mpi (Debian OpenMPI in $R)"
    mpi_cmake=(-DMPI_C_COMPILER="$R/usr/bin/mpicc.openmpi" -DMPIEXEC_EXECUTABLE="$MPIRUN"
      -DMPI_C_HEADER_DIR="$L/openmpi/include" -DMPI_C_LIB_NAMES=mpi -DMPI_mpi_LIBRARY="$L/openmpi/lib/libmpi.so")
  else
    mpi_how="carried .mpi does not run here: $("$R/usr/bin/mpirun.openmpi" --version 2>&1 | head -2 | tr '\n' ' ')"
  fi
fi
# As root (the device machines' commands may be), with NVLink multicast kept off in every rank.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
# The launcher's words before `-np N CMD...` (ranks of this host, one GPU each; the settings the
# scripts export passed on to every rank); empty without MPI.
mpi_prefix=()
[ -n "$MPIRUN" ] && mpi_prefix=("$MPIRUN" --allow-run-as-root --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE
  -x TUNABLEOP_FILENAME -x TUNABLEOP_NCCL_LIBRARY -x LD_LIBRARY_PATH -x TUNABLEOP_MAX_TUNING_DURATION_MS
  -x TUNABLEOP_MAX_WARMUP_DURATION_MS -x TUNABLEOP_MAX_PROBLEM_DURATION_MS)

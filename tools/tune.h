// `tunableop tune` pieces shared by the plain command (tune.cc) and its MPI form (tune_mpi.cc):
// the arguments, reading an untuned file, tuning a list of problems on one device, and the
// one-process-per-GPU fan-out.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tunableop/device.h"
#include "tunableop/status.h"

namespace tunableop::cli {

struct TuneArgs {
  std::string file, device = "cpu", gpus;
  int gpu = 0;
  bool gpu_given = false;  // --gpu was on the command line (MPI ranks otherwise pick by local rank)
  bool retune = false;
  bool in_context = false;  // --in-context: after tuning, the in-context check (tunableop/in_context.h)
  int verbose = -1;
  int shard = 0, shards = 1;  // internal: this process tunes lines i with i % shards == shard
  bool fanout_child = false;  // internal: a child of tune_all_gpus (inherits an MPI rank's environment)
  // Test hook (hidden options): the MPI rank `exit_rank` leaves with _exit(3) after tuning
  // `exit_after` problems, as a crashed or killed rank would (tests/tools/tune_mpi_test.cc).
  int exit_rank = -1, exit_after = -1;
};

using Problem = std::pair<std::string, std::string>;  // op signature, params signature

// Problems of an untuned file ("OP,PARAMS" lines; a results file's lines work too, their
// Validator lines are skipped), first occurrence order. Malformed lines are reported with their
// number and counted in `bad`. An error when the file cannot be read (missing, a FIFO, ...).
StatusOr<std::vector<Problem>> read_problems(const std::string& path, int& bad);

// Tunes `problems` on `dev` into the results file the environment names (TUNABLEOP_FILENAME),
// skipping those already there unless --retune; prints progress and a summary line. `bad`
// (malformed lines seen while reading) only feeds the summary and the exit code.
// `exit_after` >= 0: _exit(3) once that many problems are done (the test hook).
int tune_problems(const TuneArgs& a, Device dev, const std::vector<Problem>& problems, int bad, int exit_after = -1);

// One child process per GPU (each `tunableop tune a.file --gpu G --shard S --shards N`), each
// with its own results file; then every GPU's file receives the others' results.
int tune_all_gpus(const TuneArgs& a, const std::vector<int>& gpus);

// The GPUs `--gpus` names on this machine: "all" (empty when there is none) or a comma list of
// ordinals (parse_gpu_list, cli_support.h: an error names an item that is not one).
StatusOr<std::vector<int>> resolve_gpus(const std::string& gpus);

// MPI (tune_mpi.cc): the size of the MPI job this process was launched in, from the
// launcher's environment (OpenMPI, MPICH/PMI, PMIx); 1 when not launched by one.
int mpi_launch_size();
// `mpirun -np N tunableop tune FILE`: ranks split the untuned problems, rank 0 merges.
int tune_mpi(const TuneArgs& a);
// Under an MPI launcher (any -np: it binds each rank to a core by default), CPU tuning runs on
// every CPU the process may use, as a plain process does: the CPU validator and the thread
// candidates of bound ranks ("1 cores") were results no plain process used (issue 33).
void unbind_from_mpi_launcher(const TuneArgs& a);

}  // namespace tunableop::cli

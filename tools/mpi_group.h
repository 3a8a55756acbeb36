// `mpirun -np N tunableop llm|serve --tp N` (issue 30): the launch's processes as ProcessGroups
// (tunableop/process_group.h) over MPI, one tensor-parallel rank each. OpenMPI is optional like
// the offline tuner's (tune_mpi.cc): a build without it says so when launched by mpirun.
#pragma once

#include <memory>
#include <string>

#include "tunableop/process_group.h"
#include "tunableop/status.h"

namespace tunableop::cli {

// What the launcher's environment says before MPI starts: processes in the job (1 when not
// launched by an MPI launcher) and this one's rank.
struct MpiLaunch {
  int size = 1;
  int rank = 0;
};
MpiLaunch mpi_launch();
bool built_with_mpi();

// --tp against the launch (`command`: "llm" or "serve", for the message): ok for one process
// (threads drive the ranks) or when --tp is the number of processes; else why not.
Status check_tp_launch(const char* command, int tp, const MpiLaunch& launch, bool with_mpi);

// MPI for the life of a command: two duplicates of the world, one for the engine's calls and
// one for its all-reduce, each with errors returned (not fatal) and waits that poll with a
// back-off (an idle server's followers do not spin a core).
class MpiSession {
 public:
  static StatusOr<std::unique_ptr<MpiSession>> start();
  virtual ~MpiSession() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int local_rank() const = 0;  // among the processes on this host (the GPU it takes)
  virtual int local_size() const = 0;  // the processes on this host
  virtual ProcessGroup& calls() = 0;
  virtual ProcessGroup& data() = 0;
};

}  // namespace tunableop::cli

// NCCL, opened at run time (dlopen) so that nothing links against it: the types come from
// nccl.h at build time (the CUDA toolkit's, or a pip wheel's nvidia/nccl/include), the library
// from, in order, $TUNABLEOP_NCCL_LIBRARY, "libnccl.so.2" on the loader's path, and the file
// CMake found at configure time (the PyTorch venv's on the GPU machine). Built only when nccl.h
// was found (TUNABLEOP_HAVE_NCCL).
#pragma once

#include <nccl.h>

#include <string>

#include "tunableop/status.h"

namespace tunableop::cuda {

struct NcclLibrary {
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclCommInitAll) comm_init_all = nullptr;
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;    // process mode: rank 0's id, sent to every rank
  decltype(&ncclCommInitRank) comm_init_rank = nullptr;  // process mode: each rank's communicator
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclGroupStart) group_start = nullptr;
  decltype(&ncclGroupEnd) group_end = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  std::string path;     // the file that was opened
  std::string version;  // "2.28.9"
};

// The library, opened once per process; NotFound with every path tried when none opens.
StatusOr<const NcclLibrary*> nccl_library();

// "ncclAllReduce(...): unhandled cuda error (...)"; ok for ncclSuccess.
Status nccl_status(const NcclLibrary& nccl, ncclResult_t r, const char* what);

}  // namespace tunableop::cuda

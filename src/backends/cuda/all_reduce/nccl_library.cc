#include "backends/cuda/all_reduce/nccl_library.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <mutex>
#include <vector>

namespace tunableop::cuda {

namespace {

StatusOr<NcclLibrary> open_library() {
  std::vector<std::string> paths;
  if (const char* env = std::getenv("TUNABLEOP_NCCL_LIBRARY"); env && *env) paths.push_back(env);
  paths.push_back("libnccl.so.2");
#ifdef TUNABLEOP_NCCL_DEFAULT_LIBRARY
  paths.push_back(TUNABLEOP_NCCL_DEFAULT_LIBRARY);
#endif
  std::string tried;
  for (const std::string& path : paths) {
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* why = dlerror();
      tried += fmt::format("{}{} ({})", tried.empty() ? "" : "; ", path, why ? why : "not found");
      continue;
    }
    NcclLibrary lib;
    lib.path = path;
    bool ok = true;
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
      ok = ok && fn != nullptr;
    };
    sym(lib.get_version, "ncclGetVersion");
    sym(lib.comm_init_all, "ncclCommInitAll");
    sym(lib.get_unique_id, "ncclGetUniqueId");
    sym(lib.comm_init_rank, "ncclCommInitRank");
    sym(lib.comm_destroy, "ncclCommDestroy");
    sym(lib.all_reduce, "ncclAllReduce");
    sym(lib.group_start, "ncclGroupStart");
    sym(lib.group_end, "ncclGroupEnd");
    sym(lib.error_string, "ncclGetErrorString");
    if (!ok) {
      tried += fmt::format("{}{} (a symbol is missing)", tried.empty() ? "" : "; ", path);
      dlclose(h);
      continue;
    }
    int v = 0;
    if (lib.get_version(&v) == ncclSuccess) {
      // NCCL >= 2.9 codes versions as major * 10000 + minor * 100 + patch.
      lib.version = fmt::format("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
    }
    return lib;  // the handle stays open for the life of the process
  }
  return Status::not_found("NCCL not found (set TUNABLEOP_NCCL_LIBRARY to libnccl.so.2): tried " + tried);
}

}  // namespace

StatusOr<const NcclLibrary*> nccl_library() {
  static const StatusOr<NcclLibrary> lib = open_library();
  if (!lib.is_ok()) return lib.status();
  return &lib.value();
}

Status nccl_status(const NcclLibrary& nccl, ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return Status::ok();
  return Status::device_error(fmt::format("{}: {} (ncclResult {})", what, nccl.error_string(r), int(r)));
}

}  // namespace tunableop::cuda

// The one list of backend libraries. Order matters: within a device, candidates are tried in
// registration order (Default first), and the tuner prunes against the best found so far.
//
// Built twice (cmake/TunableopLibraries.cmake): the static libtunableop calls each backend
// library's entry point; libtunableop.so opens each backend library at run time (the file
// beside it first, then the loader's search path), so that it never needs CUDA's libraries to
// load, and a backend library that is missing or cannot load (no CUDA driver) is a note, not a
// failure.
#include "backends/register_all.h"

#include "backends/cpu_runtime.h"
#include "tunableop/context.h"

#ifdef TUNABLEOP_BACKENDS_LOADED_AT_RUN_TIME
#include <dlfcn.h>
#include <fmt/format.h>

#include <string>
#else
#include "backends/cpu/register.h"
#ifdef TUNABLEOP_HAVE_CUDA_BACKEND
#include "backends/cuda/register.h"
#endif
#endif

namespace tunableop {

namespace {

#ifdef TUNABLEOP_BACKENDS_LOADED_AT_RUN_TIME
// The folder of the library this code is in ("" when the loader cannot say).
std::string own_folder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&register_all_backends), &info) == 0 || !info.dli_fname) return "";
  std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

// Opens libtunableop_backend_<name>.so and calls its entry point, tunableop_register_backend_<name>.
void load_backend(Registry& r, const std::string& name) {
  const std::string file = fmt::format("libtunableop_backend_{}.so.{}", name, TUNABLEOP_SOVERSION);
  const std::string beside = own_folder() + file;
  void* lib = dlopen(beside.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!lib) lib = dlopen(file.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!lib) {
    const char* why = dlerror();
    r.add_note(fmt::format("{}: backend library {} not loaded ({})", name, file, why ? why : "not found"));
    return;
  }
  using Entry = void (*)(void*);
  auto entry = reinterpret_cast<Entry>(dlsym(lib, ("tunableop_register_backend_" + name).c_str()));
  if (!entry) {
    r.add_note(fmt::format("{}: {} has no entry point tunableop_register_backend_{}", name, file, name));
    return;
  }
  entry(&r);
}
#endif

}  // namespace

void register_all_backends(Registry& r) {
  register_cpu_runtime(r);
#ifdef TUNABLEOP_BACKENDS_LOADED_AT_RUN_TIME
  load_backend(r, "cpu");
#ifdef TUNABLEOP_HAVE_CUDA_BACKEND
  load_backend(r, "cuda");
#endif
#else
  register_backend_cpu(r);
#ifdef TUNABLEOP_HAVE_CUDA_BACKEND
  register_cuda(r);
#endif
#endif
}

Context::Context(Device device, Config config) : Context(device, std::move(config), register_all_backends) {}

Context& default_context() {
  static Context ctx;
  return ctx;
}

}  // namespace tunableop

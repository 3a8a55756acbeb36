#include "backends/cpu/shared/dynamic_library.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <climits>
#include <cstdlib>

namespace tunableop::cpu_shared {

// gcc says so with __SANITIZE_*__, clang (14) only through __has_feature.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TUNABLEOP_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TUNABLEOP_SANITIZED 1
#endif
#endif

int DynamicLibrary::open_flags() {
#if defined(TUNABLEOP_SANITIZED)  // RTLD_DEEPBIND bypasses the sanitizers' interceptors
  return RTLD_NOW | RTLD_LOCAL;
#else
  return RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND;
#endif
}

StatusOr<DynamicLibrary> DynamicLibrary::open(std::string name, std::string path) {
  dlerror();
  void* handle = dlopen(path.c_str(), open_flags());
  if (handle == nullptr) {
    const char* err = dlerror();
    return Status::not_found(fmt::format("cannot load {}: {}", path, err ? err : "unknown dlopen error"));
  }
  return DynamicLibrary(std::move(name), std::move(path), handle);
}

void* DynamicLibrary::find(const char* symbol) const {
  dlerror();
  return dlsym(handle_, symbol);
}

Status DynamicLibrary::missing(const char* symbol) const {
  return Status::not_found(fmt::format("{} has no symbol {} (is it {}?)", path_, symbol, name_));
}

std::string DynamicLibrary::symbol_file(const char* symbol) const {
  void* addr = dlsym(handle_, symbol);
  Dl_info info{};
  if (addr == nullptr || dladdr(addr, &info) == 0 || info.dli_fname == nullptr) return "";
  char resolved[PATH_MAX];
  return realpath(info.dli_fname, resolved) ? std::string(resolved) : std::string(info.dli_fname);
}

void DynamicLibrary::close() {
  if (handle_ != nullptr) dlclose(handle_);
  handle_ = nullptr;
}

}  // namespace tunableop::cpu_shared

// Loading a CPU library at run time through its own dlopen handle, for the CPU BLAS providers
// (openblas/, blis/, onednn/). A utility folder, not a backend: it names no library itself.
//
// OpenBLAS and BLIS export the same symbols (cblas_sgemm, sgemm_), so each provider reaches its
// library only through pointers taken from that library's own handle, opened with
// RTLD_LOCAL | RTLD_DEEPBIND so that it resolves its own symbols (and its own libgomp) first.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tunableop/status.h"

namespace tunableop::cpu_shared {

// One library opened with dlopen: the name that messages use ("OpenBLAS"), the path it was
// opened from and the handle. Copies share the handle; nothing closes it but close().
class DynamicLibrary {
 public:
  // dlopen(path, open_flags()); not_found "cannot load PATH: <dlerror>" when that fails.
  static StatusOr<DynamicLibrary> open(std::string name, std::string path);
  // RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND. DEEPBIND makes the library resolve its own symbols
  // inside itself first, even when the process already exports identically named ones (another
  // BLAS, a program linked against -lblas). Sanitizer runtimes refuse DEEPBIND, so those builds
  // go without it and rely on RTLD_LOCAL alone.
  static int open_flags();

  const std::string& name() const { return name_; }
  const std::string& path() const { return path_; }
  void* handle() const { return handle_; }

  // Sets `fn` to `symbol` as seen through this handle; not_found "PATH has no symbol SYMBOL
  // (is it NAME?)" when there is none.
  template <class Fn>
  Status bind(const char* symbol, Fn& fn) const {
    fn = reinterpret_cast<Fn>(find(symbol));
    return fn == nullptr ? missing(symbol) : Status::ok();
  }
  // The same for an optional entry point: `fn` is null when the handle has no such symbol.
  template <class Fn>
  void bind_optional(const char* symbol, Fn& fn) const {
    fn = reinterpret_cast<Fn>(find(symbol));
  }
  // The real file (symlinks resolved, so the answer names the variant: openblas-pthread/...)
  // defining `symbol` as seen through this handle; "" when the handle has no such symbol.
  // Proves which library a call lands in.
  std::string symbol_file(const char* symbol) const;
  // dlclose: only for a library none of whose code has run (it failed to bind).
  void close();

 private:
  DynamicLibrary(std::string name, std::string path, void* handle)
      : name_(std::move(name)), path_(std::move(path)), handle_(handle) {}
  void* find(const char* symbol) const;
  Status missing(const char* symbol) const;

  std::string name_;
  std::string path_;
  void* handle_ = nullptr;
};

// Opens `path` as library `name` and returns the object already made for that loaded file, or
// makes one with `make(library)` (a StatusOr<std::shared_ptr<T>>; it binds the symbols). One
// object per loaded file and type, keyed by the dlopen handle (the same file opened under two
// names gives the same handle), because a library's thread setting is process-wide state that
// one object must guard. When `make` fails the library is closed again (nothing of it ran).
// Objects are never destroyed nor libraries closed: they keep worker threads, thread and memory
// pools and JIT-compiled kernels for the life of the process.
template <class T, class Make>
StatusOr<std::shared_ptr<T>> open_cached(const std::string& name, const std::string& path, Make make) {
  static std::mutex mu;
  static auto* cache = new std::map<void*, std::shared_ptr<T>>();
  std::lock_guard lock(mu);
  StatusOr<DynamicLibrary> library = DynamicLibrary::open(name, path);
  if (!library.is_ok()) return library.status();
  auto it = cache->find(library->handle());
  if (it != cache->end()) return it->second;
  StatusOr<std::shared_ptr<T>> made = make(*library);
  if (!made.is_ok()) {
    library->close();
    return made;
  }
  cache->emplace(library->handle(), *made);
  return made;
}

// The first of `paths` that T::open opens; the error lists every attempt.
template <class T>
StatusOr<std::shared_ptr<T>> open_first(const std::string& name, const std::vector<std::string>& paths) {
  std::string tried;
  for (const auto& path : paths) {
    auto lib = T::open(path);
    if (lib.is_ok()) return lib;
    tried += (tried.empty() ? "" : "; ") + lib.status().message();
  }
  return Status::not_found(tried.empty() ? "no " + name + " path to try" : tried);
}

}  // namespace tunableop::cpu_shared

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
#include <utility>
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

// Base of a provider's library class T (CRTP), which declares `static constexpr const char*
// kName` (the name messages use), a constructor from the DynamicLibrary and `Status
// bind_symbols()`; those may be private when T befriends LoadedLibrary<T>.
template <class T>
class LoadedLibrary {
 public:
  // Opens the library at `path` or returns the object already made for that loaded file: one
  // per file, keyed by the dlopen handle (the same file opened under two names gives the same
  // handle), because a library's thread setting is process-wide state that one object must
  // guard. A file that does not bind (not this library) is closed again: nothing of it ran.
  // Objects are never destroyed nor libraries closed: they keep worker threads, thread and
  // memory pools and JIT-compiled kernels for the life of the process.
  static StatusOr<std::shared_ptr<T>> open(const std::string& path) {
    static std::mutex mu;
    static auto* cache = new std::map<void*, std::shared_ptr<T>>();
    std::lock_guard lock(mu);
    StatusOr<DynamicLibrary> library = DynamicLibrary::open(T::kName, path);
    if (!library.is_ok()) return library.status();
    auto it = cache->find(library->handle());
    if (it != cache->end()) return it->second;
    std::shared_ptr<T> lib(new T(*library));
    Status st = lib->bind_symbols();
    if (!st.is_ok()) {
      library->close();
      return st;
    }
    cache->emplace(library->handle(), lib);
    return lib;
  }
  // The first of `paths` that opens; the error lists every attempt.
  static StatusOr<std::shared_ptr<T>> open_first(const std::vector<std::string>& paths) {
    std::string tried;
    for (const auto& path : paths) {
      auto lib = open(path);
      if (lib.is_ok()) return lib;
      tried += (tried.empty() ? "" : "; ") + lib.status().message();
    }
    return Status::not_found(tried.empty() ? "no " + std::string(T::kName) + " path to try" : tried);
  }

  const std::string& path() const { return library_.path(); }
  // The real file (symlinks resolved) defining `symbol` as seen through this handle; "" when
  // the handle has no such symbol. Proves which library a call lands in.
  std::string symbol_file(const char* symbol) const { return library_.symbol_file(symbol); }

  LoadedLibrary(const LoadedLibrary&) = delete;
  LoadedLibrary& operator=(const LoadedLibrary&) = delete;

 protected:
  explicit LoadedLibrary(DynamicLibrary library) : library_(std::move(library)) {}
  ~LoadedLibrary() = default;
  const DynamicLibrary& library() const { return library_; }

 private:
  DynamicLibrary library_;
};

}  // namespace tunableop::cpu_shared

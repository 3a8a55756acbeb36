#include "interpose/real_symbols.h"

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "interpose/preload_state.h"

namespace tunableop::interpose::preload {

namespace {

std::atomic<const void*> g_engine_base{nullptr};
std::atomic<void*> g_library_handles[3] = {};

const void* self_base() {
  static std::atomic<const void*> base{nullptr};
  const void* b = base.load(std::memory_order_acquire);
  if (b == nullptr) {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&self_base), &info) != 0) b = info.dli_fbase;
    base.store(b, std::memory_order_release);
  }
  return b;
}

// The names of every loaded object, in load order (malloc'd, so that the preload library needs
// nothing beyond libc). dlopen must not be called from inside dl_iterate_phdr's callback, which
// holds the loader's list lock; the names are collected first.
struct ObjectNames {
  char** names = nullptr;
  size_t count = 0, capacity = 0;
  ~ObjectNames() {
    for (size_t i = 0; i < count; ++i) std::free(names[i]);
    std::free(names);
  }
};

int collect_name(struct dl_phdr_info* info, size_t, void* data) {
  auto* out = static_cast<ObjectNames*>(data);
  const char* name = info->dlpi_name;
  if (name == nullptr || name[0] == '\0' || std::strstr(name, "linux-vdso") != nullptr) return 0;
  if (out->count == out->capacity) {
    size_t cap = out->capacity ? out->capacity * 2 : 64;
    auto* grown = static_cast<char**>(std::realloc(out->names, cap * sizeof(char*)));
    if (grown == nullptr) return 1;
    out->names = grown;
    out->capacity = cap;
  }
  char* copy = strdup(name);
  if (copy != nullptr) out->names[out->count++] = copy;
  return 0;
}

// Asks every loaded object, through its own handle, for `name`; returns the first definition
// that is not ours, and keeps that object's handle open (pinned) in *handle when asked.
void* search_loaded_objects(const char* name, void** handle) {
  ObjectNames objs;
  dl_iterate_phdr(collect_name, &objs);
  for (size_t i = 0; i < objs.count; ++i) {
    void* h = dlopen(objs.names[i], RTLD_NOLOAD | RTLD_LAZY);
    if (h == nullptr) continue;
    void* p = dlsym(h, name);
    if (p != nullptr && !is_ours(p)) {
      if (handle != nullptr) *handle = h;  // pinned: the pointer we hand out must stay valid
      return p;
    }
    dlclose(h);
  }
  return nullptr;
}

const char* anchor_of(Library lib) { return lib == Library::kCublasLt ? "cublasLtCreate" : "cublasCreate_v2"; }

// The handle of the object that defines the library's anchor function (cuBLAS, cuBLASLt).
void* library_handle(Library lib) {
  auto& slot = g_library_handles[static_cast<int>(lib)];
  void* h = slot.load(std::memory_order_acquire);
  if (h != nullptr) return h;
  const char* anchor = anchor_of(lib);
  void* p = dlsym(RTLD_DEFAULT, anchor);
  if (p != nullptr && !is_ours(p)) {
    Dl_info info{};
    if (dladdr(p, &info) != 0 && info.dli_fname != nullptr && info.dli_fname[0] != '\0')
      h = dlopen(info.dli_fname, RTLD_NOLOAD | RTLD_LAZY);
  }
  if (h == nullptr) search_loaded_objects(anchor, &h);
  if (h == nullptr) return nullptr;
  void* expected = nullptr;
  if (!slot.compare_exchange_strong(expected, h)) {
    dlclose(h);  // another thread pinned the same object first
    return expected;
  }
  return h;
}

}  // namespace

bool is_ours(const void* addr) {
  Dl_info info{};
  if (addr == nullptr || dladdr(addr, &info) == 0) return false;
  return info.dli_fbase == self_base() || info.dli_fbase == g_engine_base.load(std::memory_order_acquire);
}

void set_engine_address(const void* any_function_in_engine) {
  Dl_info info{};
  if (dladdr(any_function_in_engine, &info) != 0) g_engine_base.store(info.dli_fbase, std::memory_order_release);
}

const char* preload_path() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&preload_path), &info) == 0) return nullptr;
  return info.dli_fname;
}

void* find_program_symbol(Library lib, const char* name) {
  if (lib == Library::kBlas) {
    // BLAS entry points may live in different objects (libcblas + libblas): each on its own.
    void* p = dlsym(RTLD_NEXT, name);
    if (p != nullptr && !is_ours(p)) return p;
    void* h = nullptr;
    return search_loaded_objects(name, &h);
  }
  void* h = library_handle(lib);
  if (h == nullptr) return nullptr;
  void* p = dlsym(h, name);
  return p != nullptr && !is_ours(p) ? p : nullptr;
}

void* find_engine_symbol(Library lib, const char* name) {
  EngineRef e = engine();
  if (e.api != nullptr && e.api->own_symbol != nullptr) {
    void* p = e.api->own_symbol(lib, name);
    if (p != nullptr && !is_ours(p)) return p;
  }
  return find_program_symbol(lib, name);
}

void report_missing_symbol(const char* name) {
  char line[256];
  int n = std::snprintf(line, sizeof(line),
                        "tunableop: interpose: no library in this process defines %s; the call cannot be made\n", name);
  if (n > 0) (void)!write(2, line, size_t(n) < sizeof(line) ? size_t(n) : sizeof(line) - 1);
}

}  // namespace tunableop::interpose::preload

#include "interpose/preload_state.h"

#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "interpose/handle_workspaces.h"

namespace tunableop::interpose::preload {

namespace {

// initial-exec: the preload library is loaded at start-up, so its TLS is static and reading it
// costs one instruction, with no call into the loader on the hot path.
__attribute__((tls_model("initial-exec"))) thread_local Guard t_guard = Guard::kNone;

// -1 unknown (read on first use: a hook can run before our constructor), 0 off, 1 on.
std::atomic<int> g_enabled{-1};
std::atomic<int> g_verbose{-1};

enum EngineState : int { kNotLoaded, kLoading, kLoaded, kFailed, kForked };
std::atomic<int> g_engine_state{kNotLoaded};
std::atomic<const EngineApi*> g_engine{nullptr};
pthread_mutex_t g_engine_mu = PTHREAD_MUTEX_INITIALIZER;

constexpr int kApis = static_cast<int>(Api::kCount);
constexpr int kReasons = static_cast<int>(Reason::kCount);
std::atomic<unsigned long long> g_counts[kApis][kReasons];

void say(const char* text) {
  size_t n = std::strlen(text);
  while (n > 0) {
    ssize_t w = write(2, text, n);
    if (w <= 0) return;
    text += w;
    n -= size_t(w);
  }
}

bool truthy(const char* v) {
  if (v == nullptr) return false;
  char low[8] = {};
  for (size_t i = 0; i + 1 < sizeof(low) && v[i]; ++i) low[i] = char(std::tolower(static_cast<unsigned char>(v[i])));
  return !std::strcmp(low, "1") || !std::strcmp(low, "true") || !std::strcmp(low, "on") || !std::strcmp(low, "yes");
}

// TUNABLEOP_<name> wins over PYTORCH_TUNABLEOP_<name>, as in Config.
const char* setting(const char* name) {
  char var[64];
  std::snprintf(var, sizeof(var), "TUNABLEOP_%s", name);
  if (const char* v = std::getenv(var)) return v;
  std::snprintf(var, sizeof(var), "PYTORCH_TUNABLEOP_%s", name);
  return std::getenv(var);
}

int read_verbose() {
  const char* v = setting("VERBOSE");
  return v ? std::atoi(v) : 0;
}

void* engine_real_symbol(Library lib, const char* name) { return find_program_symbol(lib, name); }

const PreloadApi g_preload_api = {kAbiVersion, &engine_real_symbol};

void load_engine_locked() {
  char path[4096];
  if (const char* env = std::getenv("TUNABLEOP_INTERPOSE_ENGINE")) {
    std::snprintf(path, sizeof(path), "%s", env);
  } else {
    const char* self = preload_path();
    const char* slash = self ? std::strrchr(self, '/') : nullptr;
    int dir = slash ? int(slash - self) : 1;
    std::snprintf(path, sizeof(path), "%.*s/libtunableop_interpose.so", dir, slash ? self : ".");
  }
  // Calls the engine's libraries make while they load go straight through.
  ScopedGuard g(Guard::kForwarding);
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  const EngineApi* api = nullptr;
  char why[4600];
  if (h == nullptr) {
    const char* err = dlerror();
    std::snprintf(why, sizeof(why), "cannot load %s: %s", path, err ? err : "unknown error");
  } else if (auto entry = reinterpret_cast<EngineEntry>(dlsym(h, kEngineEntryName)); entry == nullptr) {
    std::snprintf(why, sizeof(why), "%s has no %s", path, kEngineEntryName);
  } else {
    set_engine_address(reinterpret_cast<const void*>(entry));
    api = entry(&g_preload_api);
    if (api == nullptr) std::snprintf(why, sizeof(why), "%s was built for another interface version", path);
  }
  if (api == nullptr) {
    char line[4800];
    std::snprintf(line, sizeof(line), "tunableop: interpose: %s; every call goes to the libraries untouched\n", why);
    say(line);
    g_engine_state.store(kFailed, std::memory_order_release);
    return;
  }
  g_engine.store(api, std::memory_order_release);
  g_engine_state.store(kLoaded, std::memory_order_release);
  register_exit_drain();
}

// fork(): only the forking thread lives on in the child. Locks other threads held stay locked,
// CUDA cannot be used again, and GNU OpenMP's thread pool hangs the first parallel region (as it
// does after fork in any program). So a child of a process whose engine had started passes every
// call through; a child of one that never started it starts its own.
void after_fork_in_child() {
  pthread_mutex_init(&g_engine_mu, nullptr);
  int s = g_engine_state.load();
  if (s == kLoaded || s == kLoading) g_engine_state.store(kForked);
  for (auto& per_api : g_counts)
    for (auto& c : per_api) c.store(0, std::memory_order_relaxed);
  handle_workspaces::clear_all();
  exit_drain_after_fork();
}

__attribute__((constructor)) void preload_init() {
  pthread_atfork(nullptr, nullptr, after_fork_in_child);
  (void)enabled();
}

void append(char* buf, size_t cap, size_t* len, const char* fmt, unsigned long long a, const char* s = nullptr) {
  if (*len >= cap) return;
  int n = s ? std::snprintf(buf + *len, cap - *len, fmt, s, a) : std::snprintf(buf + *len, cap - *len, fmt, a);
  if (n > 0) *len += size_t(n);
}

// TUNABLEOP_VERBOSE >= 1: what happened to the calls, printed at exit. Only counters are read
// and only write(2) is called: it is safe while other libraries (CUDA) are being torn down. No
// results are written here: they were written as they were found.
__attribute__((destructor)) void preload_summary() {
  int verbose = g_verbose.load();
  if (verbose < 0) verbose = read_verbose();
  if (verbose < 1) return;
  if (!enabled()) {
    say("tunableop: interpose: off (TUNABLEOP_ENABLED not set): every call went to the libraries untouched\n");
    return;
  }
  unsigned long long total = 0, served = 0, library = 0;
  char buf[8192];
  for (int a = 0; a < kApis; ++a) {
    unsigned long long calls = 0;
    for (int r = 0; r < kReasons; ++r) calls += g_counts[a][r].load();
    if (calls == 0) continue;
    unsigned long long s = g_counts[a][int(Reason::kServed)].load();
    unsigned long long d = g_counts[a][int(Reason::kLibraryDefault)].load();
    total += calls;
    served += s;
    library += d;
    size_t len = 0;
    append(buf, sizeof(buf), &len, "tunableop: interpose: %s:", 0, api_name(Api(a)));
    append(buf, sizeof(buf), &len, " calls %llu,", calls);
    append(buf, sizeof(buf), &len, " served %llu,", s);
    append(buf, sizeof(buf), &len, " library default %llu,", d);
    append(buf, sizeof(buf), &len, " passed through %llu", calls - s - d);
    const char* sep = " (";
    for (int r = int(Reason::kLibraryDefault) + 1; r < kReasons; ++r) {
      unsigned long long c = g_counts[a][r].load();
      if (c == 0) continue;
      append(buf, sizeof(buf), &len, sep, 0);
      append(buf, sizeof(buf), &len, "%s: %llu", c, reason_text(Reason(r)));
      sep = "; ";
    }
    if (sep[0] == ';') append(buf, sizeof(buf), &len, ")", 0);
    append(buf, sizeof(buf), &len, "\n", 0);
    buf[sizeof(buf) - 1] = '\0';
    say(buf);
  }
  if (total == 0) return;  // a process that made no GEMM call (a shell, a compiler) says nothing
  char line[512];
  auto pct = [&](unsigned long long x) { return total ? 100.0 * double(x) / double(total) : 0.0; };
  std::snprintf(line, sizeof(line),
                "tunableop: interpose: total: calls %llu, served %llu (%.1f%%), library default %llu (%.1f%%), "
                "passed through %llu (%.1f%%)\n",
                total, served, pct(served), library, pct(library), total - served - library,
                pct(total - served - library));
  say(line);
}

}  // namespace

Guard current_guard() { return t_guard; }

ScopedGuard::ScopedGuard(Guard g) : saved_(t_guard) { t_guard = g; }
ScopedGuard::~ScopedGuard() { t_guard = saved_; }

bool enabled() {
  int e = g_enabled.load(std::memory_order_relaxed);
  if (e < 0) {
    e = truthy(setting("ENABLED")) ? 1 : 0;
    g_enabled.store(e, std::memory_order_relaxed);
    g_verbose.store(read_verbose(), std::memory_order_relaxed);
  }
  return e == 1;
}

EngineRef engine() {
  int s = g_engine_state.load(std::memory_order_acquire);
  if (s == kNotLoaded || s == kLoading) {
    pthread_mutex_lock(&g_engine_mu);
    if (g_engine_state.load() == kNotLoaded) {
      g_engine_state.store(kLoading);
      load_engine_locked();
    }
    pthread_mutex_unlock(&g_engine_mu);
    s = g_engine_state.load(std::memory_order_acquire);
  }
  if (s == kLoaded) return {g_engine.load(std::memory_order_acquire), Reason::kServed};
  return {nullptr, s == kForked ? Reason::kForkedChild : Reason::kEngineUnavailable};
}

void count(Api api, Reason reason) {
  g_counts[static_cast<int>(api)][static_cast<int>(reason)].fetch_add(1, std::memory_order_relaxed);
}

void set_enabled(bool on) {
  (void)enabled();  // settings read first, so that a later first read cannot undo this
  g_enabled.store(on ? 1 : 0, std::memory_order_relaxed);
}

unsigned long long calls(Api api, Reason reason) {
  return g_counts[static_cast<int>(api)][static_cast<int>(reason)].load(std::memory_order_relaxed);
}

}  // namespace tunableop::interpose::preload

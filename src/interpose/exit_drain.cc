// Process exit while other threads are inside served calls (issue 33, finding 1).
//
// exit() runs the static destructors of every library, ours and those our candidates come from
// (oneDNN frees its JIT-generated GEMM kernels, OpenBLAS its buffers), while the program's other
// threads keep running. A thread inside a served call then executes unmapped code: SIGSEGV in a
// program that exits 0 natively (its own BLAS has no such teardown). So exit first stops serving:
// from the moment it begins, hooked calls go to the program's library (Reason::kExiting), and exit
// waits until the engine calls already in flight have returned, before any destructor runs.
//
// Where exit begins: exit() itself (hooked here; a thread calling exit(0) mid-run) and the return
// from main (__libc_start_main is hooked to wrap main, since its call of exit() is internal to
// libc and cannot be interposed). An atexit handler registered when the engine loads is the last
// resort for anything else (its handler runs before those of the libraries loaded before it).
// All of it is libc only (this is the preload library) and costs nothing until the process exits,
// beyond two atomic increments around each engine call.
#include <dlfcn.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>

#include "interpose/preload_state.h"

namespace tunableop::interpose::preload {

namespace {

std::atomic<long> g_in_engine{0};    // engine calls in flight, every thread
std::atomic<bool> g_exiting{false};  // set once: no engine call starts after it
// This thread's engine calls in flight (an exit from inside one must not wait for itself).
__attribute__((tls_model("initial-exec"))) thread_local long t_depth = 0;

// Long enough for any served call (a tuning is bounded by MAX_PROBLEM_DURATION_MS); after it the
// exit goes on and says so, rather than hang a program that is leaving.
constexpr long kGiveUpMs = 120000;

void say(const char* text) {
  size_t n = 0;
  while (text[n]) ++n;
  while (n > 0) {
    ssize_t w = write(2, text, n);
    if (w <= 0) return;
    text += w;
    n -= size_t(w);
  }
}

// Every caller waits (two threads may call exit at once; neither may run destructors early).
void begin_exit() {
  g_exiting.store(true);  // seq_cst, as enter_engine's increment and load: one of the two sees the other
  const long own = t_depth;
  const timespec step = {0, 200 * 1000};  // 0.2 ms
  for (long waited_us = 0; g_in_engine.load() > own; waited_us += 200) {
    if (waited_us >= kGiveUpMs * 1000) {
      say("tunableop: interpose: calls in other threads did not return within 120 s of exit; exiting anyway\n");
      return;
    }
    nanosleep(&step, nullptr);
  }
}

void exit_handler() { begin_exit(); }

using MainFn = int (*)(int, char**, char**);
MainFn g_program_main = nullptr;

int main_then_drain(int argc, char** argv, char** envp) {
  const int status = g_program_main(argc, argv, envp);
  begin_exit();
  return status;
}

}  // namespace

bool enter_engine() {
  g_in_engine.fetch_add(1);
  if (g_exiting.load()) {
    g_in_engine.fetch_sub(1);
    return false;
  }
  ++t_depth;
  return true;
}

void leave_engine() {
  --t_depth;
  g_in_engine.fetch_sub(1);
}

void exit_drain_after_fork() { g_in_engine.store(t_depth); }

void register_exit_drain() { (void)std::atexit(exit_handler); }

}  // namespace tunableop::interpose::preload

#define TUNABLEOP_HOOK extern "C" __attribute__((visibility("default")))

TUNABLEOP_HOOK __attribute__((noreturn)) void exit(int status) noexcept {
  tunableop::interpose::preload::begin_exit();
  static std::atomic<void*> real{nullptr};  // constant-initialised: no guard, no C++ runtime
  void* fn = real.load(std::memory_order_acquire);
  if (fn == nullptr) {
    fn = dlsym(RTLD_NEXT, "exit");
    real.store(fn, std::memory_order_release);
  }
  if (fn != nullptr) reinterpret_cast<void (*)(int)>(fn)(status);
  _exit(status);  // no libc exit found (cannot happen in a dynamically linked program)
}

using StartMain = int (*)(int (*)(int, char**, char**), int, char**, void (*)(), void (*)(), void (*)(), void*);

// The program's entry calls this once, before main; main is wrapped so that its return drains.
TUNABLEOP_HOOK int __libc_start_main(int (*main)(int, char**, char**), int argc, char** argv, void (*init)(),
                                     void (*fini)(), void (*rtld_fini)(), void* stack_end) {
  auto real = reinterpret_cast<StartMain>(dlsym(RTLD_NEXT, "__libc_start_main"));
  if (real == nullptr) _exit(127);
  tunableop::interpose::preload::g_program_main = main;
  return real(tunableop::interpose::preload::main_then_drain, argc, argv, init, fini, rtld_fini, stack_end);
}

// The preload library's process state: settings read once at load, the thread-local guard that
// decides where a hooked call goes, the engine (loaded on first use), the call counters and the
// summary printed at exit. Everything here is plain data or atomics: no static object has a
// constructor or destructor that could run in the wrong order at load, exit or after fork.
#pragma once

#include <type_traits>

#include "interpose/abi.h"
#include "interpose/real_symbols.h"

namespace tunableop::interpose::preload {

// Who is making a hooked call on this thread.
enum class Guard : uint8_t {
  kNone,        // the program: intercept (when enabled)
  kEngine,      // our engine (candidates, tuning): go to the engine's own libraries
  kForwarding,  // a library we forwarded a call to (its internal calls): go straight through
};

Guard current_guard();

class ScopedGuard {
 public:
  explicit ScopedGuard(Guard g);
  ~ScopedGuard();
  ScopedGuard(const ScopedGuard&) = delete;
  ScopedGuard& operator=(const ScopedGuard&) = delete;

 private:
  Guard saved_;
};

// TUNABLEOP_ENABLED (or PYTORCH_TUNABLEOP_ENABLED): off means every hook is a plain forward.
bool enabled();
// Turns interception on or off for every thread from now on (benchmarks: one process timing the
// program's own calls against ours, see introspect.cc).
void set_enabled(bool on);

// The engine, loaded on the first call; null with the reason when it cannot be used.
struct EngineRef {
  const EngineApi* api = nullptr;
  Reason why_not = Reason::kEngineUnavailable;
};
EngineRef engine();

// Around every engine call (exit_drain.cc): false once the process has begun to exit, and the
// call then goes to the program's library. exit() waits for the engine calls in flight, so that
// no thread still runs a library's code when that library's static destructors unmap it.
bool enter_engine();
void leave_engine();
// In a forked child: only the forking thread's engine calls exist.
void exit_drain_after_fork();
// Called once the engine is loaded: the last-resort drain as an atexit handler (for exits that
// bypass the exit() and main() hooks; it runs before the handlers of objects loaded earlier).
void register_exit_drain();

void count(Api api, Reason reason);
// The calls counted so far for (api, reason).
unsigned long long calls(Api api, Reason reason);

enum class Route { kIntercept, kStraight, kEngineOwn };
inline Route route() {
  switch (current_guard()) {
    case Guard::kEngine: return Route::kEngineOwn;
    case Guard::kForwarding: return Route::kStraight;
    case Guard::kNone: break;
  }
  return enabled() ? Route::kIntercept : Route::kStraight;
}

// Asks the engine about one call (the engine guard set while it runs) and counts the outcome.
template <class Ask>
Outcome ask_engine(Api api, Ask&& ask) {
  Outcome o;
  if (!enter_engine()) {
    o.reason = Reason::kExiting;
    count(api, o.reason);
    return o;
  }
  EngineRef e = engine();
  if (e.api == nullptr) {
    o.reason = e.why_not;
  } else {
    ScopedGuard g(Guard::kEngine);
    o = ask(*e.api);
  }
  leave_engine();
  count(api, o.reason);
  return o;
}

// The body every hook shares: intercept (served -> return), else call the real function with the
// caller's arguments untouched. `missing` is what a cuBLAS hook returns when no real library can
// be found (never for a call that bound to us in a working program; it must not crash either).
template <int missing, class Fn, class Ask, class... Args>
auto run_hook(RealFunction<Fn>& real, Api api, Ask&& ask, Args... args) {
  using R = decltype(std::declval<Fn>()(args...));
  Route r = route();
  if (r == Route::kIntercept) {
    Outcome o = ask_engine(api, ask);
    if (o.served()) {
      if constexpr (std::is_void_v<R>)
        return;
      else
        return static_cast<R>(o.status);
    }
  }
  Fn fn = r == Route::kEngineOwn ? real.engine_own() : real.program();
  if (fn == nullptr) {
    real.report_missing();
    if constexpr (std::is_void_v<R>)
      return;
    else
      return static_cast<R>(missing);
  }
  if (r == Route::kEngineOwn) return fn(args...);
  ScopedGuard g(Guard::kForwarding);
  return fn(args...);
}

}  // namespace tunableop::interpose::preload

// What the preload library tells a program that asks (bench/interpose/ab_bench.h): the real
// function behind a hook, found exactly as the hooks find it, and the call counters; and a switch
// that turns interception off and on again (bench/interpose/linear_suite.py --ab times PyTorch's
// own calls against ours in one process). A program that does not know about us never calls
// these.
#include "interpose/abi.h"
#include "interpose/preload_state.h"
#include "interpose/real_symbols.h"

using tunableop::interpose::Api;
using tunableop::interpose::Library;
using tunableop::interpose::Reason;

extern "C" __attribute__((visibility("default"))) void* tunableop_interpose_real_symbol(int library, const char* name) {
  if (name == nullptr || library < 0 || library > static_cast<int>(Library::kCublasLt)) return nullptr;
  return tunableop::interpose::preload::find_program_symbol(static_cast<Library>(library), name);
}

extern "C" __attribute__((visibility("default"))) unsigned long long tunableop_interpose_calls(int api, int reason) {
  if (api < 0 || api >= static_cast<int>(Api::kCount) || reason < 0 || reason >= static_cast<int>(Reason::kCount))
    return 0;
  return tunableop::interpose::preload::calls(static_cast<Api>(api), static_cast<Reason>(reason));
}

// 0: every hook forwards untouched from now on (as with TUNABLEOP_ENABLED=0); 1: intercept again.
extern "C" __attribute__((visibility("default"))) void tunableop_interpose_set_enabled(int on) {
  tunableop::interpose::preload::set_enabled(on != 0);
}

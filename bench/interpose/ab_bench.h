// In-process A/B of the interposer's host cost: one process, run under the preload library,
// times the program's real entry point (found exactly as the hooks find it, through the preload
// library's tunableop_interpose_real_symbol) against the hooked one (the ordinary call, which
// binds to the hook), in interleaved blocks: round r times a block of calls of one arm, then a
// block of the other, the order swapped every round, so both arms meet the same machine state.
// Separate processes differ by microseconds from each other (clocks, allocation, placement);
// within one process and one round they do not, so the paired difference per round is the
// interposer's cost. Header-only: the CPU and the CUDA benchmark share it.
#pragma once

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "interpose/abi.h"

namespace tunableop::interpose::ab {

// The preload library's queries, when this process runs under it (null otherwise: then "real"
// and "hooked" are the same function and the difference is the method's own noise floor).
struct Preload {
  RealSymbolQuery real_symbol = nullptr;
  CallCountQuery calls = nullptr;
  SetEnabledSwitch set_enabled = nullptr;
  static Preload find() {
    Preload p;
    p.real_symbol = reinterpret_cast<RealSymbolQuery>(dlsym(RTLD_DEFAULT, kRealSymbolQueryName));
    p.calls = reinterpret_cast<CallCountQuery>(dlsym(RTLD_DEFAULT, kCallCountQueryName));
    p.set_enabled = reinterpret_cast<SetEnabledSwitch>(dlsym(RTLD_DEFAULT, kSetEnabledSwitchName));
    return p;
  }
  bool present() const { return real_symbol != nullptr && calls != nullptr; }
  // The real definition of `name`, or `fallback` (the program's own binding) without the preload.
  template <class Fn>
  Fn real(Library lib, const char* name, Fn fallback) const {
    if (real_symbol == nullptr) return fallback;
    return reinterpret_cast<Fn>(real_symbol(static_cast<int>(lib), name));
  }
  // Calls of `api` so far, per outcome: served, library default (tuned), passed through (other).
  struct Counts {
    unsigned long long served = 0, library = 0, passed = 0;
    unsigned long long total() const { return served + library + passed; }
  };
  Counts counts(Api api) const {
    Counts c;
    if (calls == nullptr) return c;
    for (int r = 0; r < static_cast<int>(Reason::kCount); ++r) {
      unsigned long long n = calls(static_cast<int>(api), r);
      if (r == static_cast<int>(Reason::kServed))
        c.served += n;
      else if (r == static_cast<int>(Reason::kLibraryDefault))
        c.library += n;
      else
        c.passed += n;
    }
    return c;
  }
};

struct Result {
  double real_ns = 0, hooked_ns = 0;  // medians over rounds of ns per call
  double diff_ns = 0;                 // median over rounds of (hooked - real), ns per call
  double diff_p25 = 0, diff_p75 = 0;  // its quartiles
  int rounds = 0, block = 0;
};

inline double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double pos = q * double(v.size() - 1);
  size_t lo = size_t(pos);
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
}

// `rounds` rounds of one block of `block` calls per arm. before_round() runs first in each round
// (the GPU benchmark holds its stream there, so that only host time is on the clock) and
// after_round() last (it waits for the GPU), both outside the clock.
template <class Real, class Hooked, class Before, class After>
Result interleave(int rounds, int block, Real&& real, Hooked&& hooked, Before&& before_round, After&& after_round) {
  using clock = std::chrono::steady_clock;
  std::vector<double> r_ns, h_ns, d_ns;
  auto time_block = [&](auto& call) {
    auto t0 = clock::now();
    for (int i = 0; i < block; ++i) call();
    auto t1 = clock::now();
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / block;
  };
  for (int r = 0; r < rounds; ++r) {
    before_round();
    double a, b;
    if (r % 2 == 0) {
      a = time_block(real);
      b = time_block(hooked);
    } else {
      b = time_block(hooked);
      a = time_block(real);
    }
    after_round();
    r_ns.push_back(a);
    h_ns.push_back(b);
    d_ns.push_back(b - a);
  }
  Result res;
  res.real_ns = quantile(r_ns, 0.5);
  res.hooked_ns = quantile(h_ns, 0.5);
  res.diff_ns = quantile(d_ns, 0.5);
  res.diff_p25 = quantile(d_ns, 0.25);
  res.diff_p75 = quantile(d_ns, 0.75);
  res.rounds = rounds;
  res.block = block;
  return res;
}

inline void print_header(const char* mode) {
  std::printf(
      "A/B host time per call, one process (%s): real = the library's entry point as the hooks reach it,\n"
      "hooked = the program's ordinary call; medians over interleaved rounds\n\n",
      mode);
  std::printf(
      "| entry point | mode | real ns | hooked ns | hooked - real ns (median of paired rounds) | "
      "quartiles | rounds x block | hooked calls: served / library default / passed |\n"
      "|---|---|---|---|---|---|---|---|\n");
}

// One table row; the counts are those of the hooked arm's calls (the real arm never reaches the
// hooks: its counts would show here as extra calls).
inline void print_row(const char* entry, const char* mode, const Result& r, const Preload::Counts& c) {
  std::printf("| %s | %s | %.1f | %.1f | %+.1f | [%+.1f, %+.1f] | %d x %d | %llu / %llu / %llu |\n", entry, mode,
              r.real_ns, r.hooked_ns, r.diff_ns, r.diff_p25, r.diff_p75, r.rounds, r.block, c.served, c.library,
              c.passed);
  std::fflush(stdout);
}

inline Preload::Counts minus(const Preload::Counts& after, const Preload::Counts& before) {
  return {after.served - before.served, after.library - before.library, after.passed - before.passed};
}

}  // namespace tunableop::interpose::ab

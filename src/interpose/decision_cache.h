// Per device: what was decided for each problem, so that a repeated call costs one hash lookup
// (no signature strings, no results store, no candidate resolution). Decisions are final once
// made (results only change when this process tunes) and never removed, so a pointer to one stays
// valid. The framework's plan handles (ctx.plan(params)) will make this unnecessary.
#pragma once

#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <unordered_map>

#include "tunableop/gemm.h"

namespace tunableop::interpose {

struct ProblemKey {
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0, batch = 1, stride_a = 0, stride_b = 0, stride_c = 0;
  uint8_t dtype = 0, transa = 0, transb = 0, tf32 = 0, act = 0;
  bool operator==(const ProblemKey&) const = default;

  // `p` with its defaults filled in; strides only count for batches (as in the signatures).
  static ProblemKey of(const GemmParams& p, int act = 0) {
    ProblemKey k;
    k.m = p.m;
    k.n = p.n;
    k.k = p.k;
    k.lda = p.lda;
    k.ldb = p.ldb;
    k.ldc = p.ldc;
    k.batch = p.batch;
    if (p.batch > 1) {
      k.stride_a = p.stride_a;
      k.stride_b = p.stride_b;
      k.stride_c = p.stride_c;
    }
    k.dtype = uint8_t(p.dtype);
    k.transa = uint8_t(p.transa);
    k.transb = uint8_t(p.transb);
    k.tf32 = p.allow_tf32;
    k.act = uint8_t(act);
    return k;
  }
};

struct ProblemKeyHash {
  size_t operator()(const ProblemKey& k) const {
    uint64_t h = 0x9E3779B97F4A7C15ull;
    auto mix = [&](uint64_t v) { h = (h ^ v) * 0xff51afd7ed558ccdull, h ^= h >> 32; };
    for (int64_t v : {k.m, k.n, k.k, k.lda, k.ldb, k.ldc, k.batch, k.stride_a, k.stride_b, k.stride_c})
      mix(uint64_t(v));
    mix(uint64_t(k.dtype) | uint64_t(k.transa) << 8 | uint64_t(k.transb) << 16 | uint64_t(k.tf32) << 24 |
        uint64_t(k.act) << 32);
    return size_t(h);
  }
};

template <class Candidate>
struct Decision {
  enum class Kind : uint8_t {
    kRun,           // run `candidate` (tuned winner; our own Default kernel on the CPU)
    kLibrary,       // tuned: the program's library call is the fastest; pass it through
    kNotTuned,      // no result and tuning off
    kTuningFailed,  // tuning could not run: the library's call for the rest of the process
  };
  Kind kind = Kind::kNotTuned;
  std::shared_ptr<const Candidate> candidate;
  size_t workspace = 0;  // bytes the candidate needs (its workspace_bytes)
};

template <class Candidate>
class DecisionCache {
 public:
  const Decision<Candidate>* find(const ProblemKey& k) const {
    std::shared_lock lock(mu_);
    auto it = map_.find(k);
    return it == map_.end() ? nullptr : &it->second;
  }
  // Keeps the first decision made for a key (another thread may have decided meanwhile).
  const Decision<Candidate>* insert(const ProblemKey& k, Decision<Candidate> d) {
    std::unique_lock lock(mu_);
    return &map_.try_emplace(k, std::move(d)).first->second;
  }

 private:
  mutable std::shared_mutex mu_;
  std::unordered_map<ProblemKey, Decision<Candidate>, ProblemKeyHash> map_;
};

}  // namespace tunableop::interpose

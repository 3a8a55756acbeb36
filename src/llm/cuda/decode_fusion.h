// Which kernels each projection of a decode step runs (issue 13): the FusedLinear op (one
// kernel; its shape tuned by TunableOp and kept in the results file) or the unfused composition
// (rmsnorm kernel, tuned GEMM, element-wise kernel), chosen by timing both on the device the
// first time the projection runs; and how the whole step is built (StepVariant).
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "llm/config.h"
#include "llm/device_kernels.h"
#include "tunableop/fused_linear.h"
#include "tunableop/status.h"

namespace tunableop::llm::cuda {

// A decode projection as a FusedLinear problem: its input (plain or RMSNorm, with or without the
// family's +1) and its output (store, residual add, argmax or the family's gated activation).
FusedLinearParams fused_linear_params(const Projection& p, const ModelConfig& c, DType dtype);

struct FusionCandidate {
  std::string name;  // "unfused", "fused FusedLinear_r2_sk1"
  bool fused = false;
  double us = 0;  // median time measured (0: not timed)
};

struct FusionChoice {
  FusionCandidate best;
  std::vector<FusionCandidate> timed;  // fastest first
};

// How a whole decode step is built: its projections fused (each site's choice) or all unfused,
// programmatic dependent launch off / early / late, and whether the qkv kernel prefetches the
// next weights into the L2 while RoPE and attention leave the memory idle. Their effects depend
// on each other and on the neighbouring kernels, so the engine captures one graph per variant
// and times whole steps (with TunableOp on).
// Projection sites as bits of StepVariant::fuse_on / fuse_off.
inline constexpr unsigned kSiteQkv = 1, kSiteO = 2, kSiteGateUp = 4, kSiteDown = 8, kSiteLmHead = 16;
// The bit of a projection named `name` ("qkv", "o", "gate_up", "down", "lm_head"; 0 otherwise).
unsigned site_bit(const char* name);

struct StepVariant {
  bool fused = true;
  int pdl = 1;  // 0 off, 1 early trigger, 2 late trigger (FusedLinearOperands::pdl)
  // 0 none; 1 o's weights (by a fused qkv kernel); 2 also 16 MB of gate_up's (the same) and the
  // next step's first qkv (by lm_head); 3 only the last. An unfused qkv prefetches nothing: with
  // qkv unfused (Gemma-2B's isolated choice) 2 does what 3 does.
  int prefetch = 0;
  // Every site whose fused kernel ran when timed takes it, also where the unfused composition
  // was faster alone: in a graph with PDL one kernel less (the residual add after o and down)
  // may be worth more than the GEMM's lead measured in isolation.
  bool every_site = false;
  // RoPE and the KV-cache write in the qkv projection's epilogue (FusedLinearRope): qkv runs
  // fused wherever its fused kernel ran, also where the unfused composition was faster alone,
  // and rope_kv's kernel is gone (one kernel less per layer).
  bool rope = false;
  // qkv runs fused as with `rope`, RoPE in rope_kv's kernel: what the fused qkv costs or saves in
  // the step, apart from RoPE's move (a variant to compare, rarely the fastest).
  bool qkv_fused = false;
  // Sites (kSite* bits) forced fused (where their fused kernel ran) or unfused (with kAuto
  // fusion only; kOn keeps every site fused), whatever their isolated timing chose: the isolated
  // times of gate_up, down and lm_head are near ties that flip from run to run (and shapes
  // differ run to run), while the step's graph replay tells which way pays there.
  unsigned fuse_on = 0, fuse_off = 0;
  // With `rope`: the qkv kernel's shape (FusedLinearRope::rows, k_split; 0: the tuned kStore
  // shape's). Gemma-2B's 2560 qkv rows make 160 blocks of the tuned r2 sk1 on 132 SMs; more k
  // split, more blocks.
  int rope_rows = 0, rope_k_split = 0;
  // The sites (kSite* bits) run fused with this shape (FusedLinearOperands::rows, k_split), not
  // their tuned one: the op's isolated tuning picks among near ties (down: r2 sk2 in one run,
  // r1 sk4 and r1 sk2 in the next two, each then slower than cuBLAS + the residual kernel).
  unsigned shape_sites = 0;
  int shape_rows = 0, shape_k_split = 0;
  std::string name() const;
};

// The variants worth timing: unfused with and without PDL, fused with every PDL mode and prefetch,
// then fused at every site (PDL and prefetch 2), then fused + prefetch 2 with RoPE in the qkv
// epilogue (PDL early, late; the every-site variants with it were ~100 us slower on the H100's
// Gemma-2B, as without it), then fused + PDL early + prefetch 2 with qkv fused, RoPE apart, then
// with PDL early: RoPE in qkv with prefetch 0, 1, 3, qkv fused with prefetch 3, fused with
// prefetch 3, and every site with RoPE in qkv and prefetch 1, 3; --step-variant indexes this list
// (sm_90: 9 = fused, PDL early, L2 prefetch 2; 11 = the same at every site; 13 = with RoPE in
// qkv; 15 = with qkv fused; 16 = RoPE in qkv, no prefetch, the one the H100 runs kept most;
// 18 = RoPE in qkv, L2 prefetch 3; 22 = the same at every site), then
// fused, PDL early, RoPE in qkv with gate_up, down, lm_head, gate_up and down forced fused (23-26)
// and gate_up, down, lm_head forced unfused (27-29), then RoPE in qkv with the qkv shapes r2 sk2,
// r2 sk4 (30, 31), then RoPE in qkv with down fused in the shapes r2 sk2, r1 sk4 (32, 33).
std::vector<StepVariant> step_variants(bool pdl_capable);

class DecodeFusion {
 public:
  // The choice for a site ("qkv bf16 2560x2048 n1"), or null before it is made.
  const FusionChoice* find(const std::string& site) const;
  const FusionChoice& set(const std::string& site, FusionChoice choice);
  // One line per site: the choice and the runner-up times; then the step variants timed.
  std::string report() const;
  // `retimed`: the variants timed again in the second pass (their times are that pass's; "*").
  void set_step(int64_t batch, const std::vector<std::pair<StepVariant, double>>& timed, size_t best,
                const std::vector<bool>& retimed = {});

  // Times each of `runs` (each queues one candidate on `stream`) `reps` times, the candidates
  // interleaved, each run after a read of `flush_bytes` of `flush` that evicts the L2 (decode
  // streams the weights from memory, never from cache); median microseconds per candidate.
  static Status time_candidates(const std::vector<std::function<Status()>>& runs, int reps, const void* flush,
                                int64_t flush_bytes, float* sink, cudaStream_t stream, std::vector<double>* us);

 private:
  std::vector<std::pair<std::string, FusionChoice>> sites_;  // first-seen order
  std::vector<std::string> steps_;                           // one line per batch size
};

}  // namespace tunableop::llm::cuda

#include "llm/cuda/decode_fusion.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <string_view>
#include <utility>

#include "cuda_common/cuda_check.h"
#include "cuda_common/event_timer.h"
#include "llm/cuda/kernels.h"

namespace tunableop::llm::cuda {

FusedLinearParams fused_linear_params(const Projection& p, const ModelConfig& c, DType dtype) {
  using E = Projection::Epilogue;
  FusedLinearParams f;
  f.dtype = dtype;
  f.out = p.out;
  f.in = p.in;
  f.tokens = p.rows;
  f.input = !p.norm ? FusedInput::kPlain : c.norm_adds_one() ? FusedInput::kRmsNormPlusOne : FusedInput::kRmsNorm;
  f.eps = c.rms_norm_eps;
  f.output = p.epilogue == E::kStore                 ? FusedOutput::kStore
             : p.epilogue == E::kAddResidual         ? FusedOutput::kAddResidual
             : p.epilogue == E::kArgmax              ? FusedOutput::kArgmax
             : c.activation == Activation::kSilu     ? FusedOutput::kGatedSilu
             : c.activation == Activation::kGeluTanh ? FusedOutput::kGatedGeluTanh
                                                     : FusedOutput::kGatedGeluErf;
  return f;
}

namespace {
constexpr const char* kSiteNames[] = {"qkv", "o", "gate_up", "down", "lm_head"};
}  // namespace

unsigned site_bit(const char* name) {
  for (unsigned i = 0; i < std::size(kSiteNames); ++i) {
    if (std::string_view(name) == kSiteNames[i]) return 1u << i;
  }
  return 0;
}

std::string StepVariant::name() const {
  static const char* const kPdl[] = {"no PDL", "PDL early", "PDL late"};
  std::string sites;
  for (unsigned i = 0; i < std::size(kSiteNames); ++i) {
    if (fuse_on & (1u << i)) sites += fmt::format(", {} fused", kSiteNames[i]);
  }
  for (unsigned i = 0; i < std::size(kSiteNames); ++i) {
    if (fuse_off & (1u << i)) sites += fmt::format(", {} unfused", kSiteNames[i]);
  }
  for (unsigned i = 0; i < std::size(kSiteNames); ++i) {
    if (shape_sites & (1u << i)) sites += fmt::format(", {} r{} sk{}", kSiteNames[i], shape_rows, shape_k_split);
  }
  return fmt::format("{}, {}{}{}{}{}", fused ? (every_site ? "fused at every site" : "fused") : "unfused",
                     kPdl[pdl < 0 || pdl > 2 ? 0 : pdl], prefetch ? fmt::format(", L2 prefetch {}", prefetch) : "",
                     rope        ? ", RoPE in qkv"
                     : qkv_fused ? ", qkv fused"
                                 : "",
                     rope && rope_rows ? fmt::format(", qkv r{} sk{}", rope_rows, rope_k_split) : "", sites);
}

std::vector<StepVariant> step_variants(bool pdl_capable) {
  std::vector<StepVariant> v;
  for (int pdl = 0; pdl <= (pdl_capable ? 1 : 0); ++pdl) v.push_back({false, pdl, 0});
  for (int prefetch = 0; prefetch <= 2; ++prefetch) {
    for (int pdl = 0; pdl <= (pdl_capable ? 2 : 0); ++pdl) v.push_back({true, pdl, prefetch});
  }
  for (int pdl = (pdl_capable ? 1 : 0); pdl <= (pdl_capable ? 2 : 0); ++pdl) v.push_back({true, pdl, 2, true});
  for (int pdl = (pdl_capable ? 1 : 0); pdl <= (pdl_capable ? 2 : 0); ++pdl) v.push_back({true, pdl, 2, false, true});
  const int early = pdl_capable ? 1 : 0;
  v.push_back({true, early, 2, false, false, true});
  // Prefetch 1 and 2 first ran in the qkv kernel with qkv fused: which of them pays with it.
  for (int prefetch : {0, 1, 3}) v.push_back({true, early, prefetch, false, true});
  v.push_back({true, early, 3, false, false, true});
  v.push_back({true, early, 3});
  // Every site (gate_up's fused kernel: no norm or activation kernel) with RoPE in qkv, without
  // the gate_up prefetch that ran in every earlier every-site variant.
  for (int prefetch : {1, 3}) v.push_back({true, early, prefetch, true, true});
  // Per site, both ways, around the RoPE variant (kept by the H100 run of 17:32).
  for (unsigned on : {kSiteGateUp, kSiteDown, kSiteLmHead, kSiteGateUp | kSiteDown}) {
    StepVariant r{true, early, 0, false, true};
    r.fuse_on = on;
    v.push_back(r);
  }
  for (unsigned off : {kSiteGateUp, kSiteDown, kSiteLmHead}) {
    StepVariant r{true, early, 0, false, true};
    r.fuse_off = off;
    v.push_back(r);
  }
  for (auto [rows, split] : {std::pair{2, 2}, std::pair{2, 4}}) {
    StepVariant r{true, early, 0, false, true};
    r.rope_rows = rows, r.rope_k_split = split;
    v.push_back(r);
  }
  // Down fused in two shapes (H100, 18:05: r2 sk1, r4 sk1 and r1 sk8 were 40-160 us slower on
  // both models; r2 sk2 and r1 sk4 +43-47 us on Gemma-2B, +7-29 us on Llama-2-7B).
  for (auto [rows, split] : {std::pair{2, 2}, std::pair{1, 4}}) {
    StepVariant r{true, early, 0, false, true};
    r.shape_sites = kSiteDown;
    r.shape_rows = rows, r.shape_k_split = split;
    v.push_back(r);
  }
  return v;
}

void DecodeFusion::set_step(int64_t batch, const std::vector<std::pair<StepVariant, double>>& timed, size_t best,
                            const std::vector<bool>& retimed) {
  auto mark = [&retimed](size_t i) { return i < retimed.size() && retimed[i] ? "*" : ""; };
  std::string s = fmt::format("decode step, batch {}: {} ({:.1f} us{};", batch, timed[best].first.name(),
                              timed[best].second, mark(best));
  for (size_t i = 0; i < timed.size(); ++i) {
    if (i != best) s += fmt::format(" {} {:.1f}{};", timed[i].first.name(), timed[i].second, mark(i));
  }
  s.back() = ')';
  steps_.push_back(std::move(s));
}

const FusionChoice* DecodeFusion::find(const std::string& site) const {
  for (const auto& [name, choice] : sites_) {
    if (name == site) return &choice;
  }
  return nullptr;
}

const FusionChoice& DecodeFusion::set(const std::string& site, FusionChoice choice) {
  for (auto& [name, c] : sites_) {
    if (name == site) return c = std::move(choice);
  }
  sites_.emplace_back(site, std::move(choice));
  return sites_.back().second;
}

std::string DecodeFusion::report() const {
  std::string s;
  for (const auto& [name, c] : sites_) {
    s += fmt::format("{}: {}", name, c.best.name);
    if (!c.timed.empty()) {
      s += " (";
      for (size_t i = 0; i < c.timed.size() && i < 4; ++i) {
        s += fmt::format("{}{} {:.1f} us", i ? ", " : "", c.timed[i].name, c.timed[i].us);
      }
      for (const auto& t : c.timed) {
        if (!t.fused && &t - c.timed.data() >= 4) s += fmt::format(", unfused {:.1f} us", t.us);
      }
      s += ")";
    }
    s += "\n";
  }
  for (const auto& line : steps_) s += line + "\n";
  return s;
}

Status DecodeFusion::time_candidates(const std::vector<std::function<Status()>>& runs, int reps, const void* flush,
                                     int64_t flush_bytes, float* sink, cudaStream_t stream, std::vector<double>* us) {
  auto flush_l2 = [&]() -> Status {
    TUNABLEOP_CUDA_TRY(touch(flush, flush_bytes, sink, stream));
    return Status::ok();
  };
  auto t = ::tunableop::cuda::time_interleaved_us(runs, reps, flush_l2, stream);
  if (!t.is_ok()) return t.status();
  *us = std::move(*t);
  return Status::ok();
}

}  // namespace tunableop::llm::cuda

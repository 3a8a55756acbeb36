#include "backends/cpu/kernels/register.h"

#include <set>
#include <string>
#include <vector>

#include "backends/cpu/kernels/blocked_gemm.h"
#include "backends/cpu/kernels/driver_common.h"
#include "backends/cpu/kernels/skinny_gemm.h"
#include "tunableop/gemm.h"

namespace tunableop {

namespace {

using cpu_kernels::BlockedConfig;
using cpu_kernels::Isa;
using cpu_kernels::SkinnyConfig;

// Default sends products this narrow to the skinny path, where the blocked kernel's packing of
// A costs as much as the product itself (crossovers measured as in skinny_gemm.h).
bool default_goes_skinny(const GemmParams& p) {
  const char ta = p.transa == 't' ? 'T' : p.transa;
  return p.n <= (ta == 'T' ? 32 : 8) && !p.widens();  // a wider C: the blocked path only
}

struct Blocking {
  int64_t mc, nc, kc;
  int min_effort;  // for the variants with 1 thread or all threads; half the cores adds 1
};

// Block sizes worth trying per ISA, the default first. Sized for the usual caches: an mr x kc
// A sliver plus a kc x nr B sliver within L1 (48 KiB), the mc x kc A block within about half
// of L2 (1-2 MiB), the kc x nc B panel within a share of L3.
std::vector<Blocking> blockings(Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return {{192, 2048, 384, 0}, {96, 2048, 256, 1}, {384, 4096, 512, 1}, {64, 1024, 128, 2}};
    case Isa::kAvx2: return {{192, 2048, 256, 2}, {96, 1024, 192, 2}};
    case Isa::kPortable: return {{64, 1024, 256, 2}};
  }
  return {};
}

Status all_dtypes(const GemmParams&) { return Status::ok(); }
size_t no_workspace(const GemmParams&) { return 0; }

std::string blocked_name(Isa isa, const Blocking& b, int threads) {
  return "Gemm_Blocked_" + std::string(cpu_kernels::isa_name(isa)) + "_mc" + std::to_string(b.mc) + "_nc" +
         std::to_string(b.nc) + "_kc" + std::to_string(b.kc) + "_t" + std::to_string(threads);
}

GemmCandidate make_candidate(std::string name, int min_effort) {
  GemmCandidate c;
  c.name = std::move(name);
  c.device = DeviceKind::kCpu;
  c.min_effort = min_effort;
  c.supports = all_dtypes;
  c.workspace_bytes = no_workspace;
  return c;
}

GemmCandidate blocked_candidate(Isa isa, const Blocking& b, int threads, int min_effort) {
  GemmCandidate c = make_candidate(blocked_name(isa, b, threads), min_effort);
  const BlockedConfig cfg{isa, b.mc, b.nc, b.kc, threads};
  c.run = [cfg](const GemmParams& p, const GemmOperands& ops) { return cpu_kernels::blocked_gemm(p, ops, cfg); };
  c.info = {"tunableop", "blocked", {}};
  c.info.add("isa", cpu_kernels::isa_name(isa))
      .add("mc", std::to_string(b.mc))
      .add("nc", std::to_string(b.nc))
      .add("kc", std::to_string(b.kc))
      .add("threads", std::to_string(threads));
  return c;
}

GemmCandidate skinny_candidate(Isa isa, int threads, int min_effort) {
  GemmCandidate c = make_candidate(
      "Gemm_Skinny_" + std::string(cpu_kernels::isa_name(isa)) + "_t" + std::to_string(threads), min_effort);
  c.supports = [](const GemmParams& p) {
    if (p.widens()) return Status::unsupported("skinny kernel: C in the inputs' dtype only");
    if (p.n > cpu_kernels::kSkinnyMaxN)
      return Status::unsupported("skinny kernel: n (" + std::to_string(p.n) + ") > " +
                                 std::to_string(cpu_kernels::kSkinnyMaxN));
    return Status::ok();
  };
  const SkinnyConfig cfg{isa, threads};
  c.run = [cfg](const GemmParams& p, const GemmOperands& ops) { return cpu_kernels::skinny_gemm(p, ops, cfg); };
  c.info = {"tunableop", "skinny", {}};
  c.info.add("isa", cpu_kernels::isa_name(isa)).add("threads", std::to_string(threads));
  return c;
}

}  // namespace

void register_cpu_kernels(Registry& r) {
  std::vector<GemmCandidate>& list = r.list<GemmCandidate>();
  const Isa best = cpu_kernels::best_isa();
  const int all = cpu_kernels::resolve_threads(0);
  const Blocking def = blockings(best).front();

  // Default: best ISA, default blocking, every hardware thread; narrow n goes skinny.
  GemmCandidate d = make_candidate("Default", 0);
  const BlockedConfig dcfg{best, def.mc, def.nc, def.kc, all};
  const SkinnyConfig scfg{best, all};
  d.run = [dcfg, scfg](const GemmParams& p, const GemmOperands& ops) {
    if (default_goes_skinny(p)) return cpu_kernels::skinny_gemm(p, ops, scfg);
    return cpu_kernels::blocked_gemm(p, ops, dcfg);
  };
  d.info = {"tunableop", "default", {}};  // blocked, or skinny for narrow n
  d.info.add("isa", cpu_kernels::isa_name(best)).add("threads", std::to_string(all));
  list.push_back(std::move(d));

  // Thread counts: 1, half the cores, all cores (deduplicated). One thread often wins small
  // problems, where waking a second thread costs more than it saves; half is for machines
  // shared with other work and rarely wins otherwise.
  std::vector<std::pair<int, int>> threads_extra = {{1, 0}};  // (threads, extra min_effort)
  if (all / 2 > 1) threads_extra.push_back({all / 2, 1});
  if (all > 1) threads_extra.push_back({all, 0});

  std::set<std::string> seen;
  const Isa isas[] = {Isa::kAvx512, Isa::kAvx2, Isa::kPortable};
  for (Isa isa : isas) {
    if (!cpu_kernels::isa_available(isa)) continue;
    for (const Blocking& b : blockings(isa)) {
      for (auto [threads, extra] : threads_extra) {
        // The default blocking on all threads is Default itself for all but narrow n.
        if (isa == best && b.mc == def.mc && b.nc == def.nc && b.kc == def.kc && threads == all) continue;
        int effort = std::min(2, b.min_effort + extra);
        if (isa != best) effort = 2;  // an older ISA on the same core only wins by accident
        GemmCandidate c = blocked_candidate(isa, b, threads, effort);
        if (seen.insert(c.name).second) list.push_back(std::move(c));
      }
    }
  }
  for (auto [threads, extra] : threads_extra) {
    GemmCandidate c = skinny_candidate(best, threads, 1 + extra > 2 ? 2 : 1 + extra);
    if (seen.insert(c.name).second) list.push_back(std::move(c));
  }
  register_cpu_gemm_and_bias(r);
  register_cpu_scaled_gemm(r);
}

}  // namespace tunableop

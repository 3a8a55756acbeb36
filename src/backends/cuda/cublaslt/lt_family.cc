#include "backends/cuda/cublaslt/lt_family.h"

#include <fmt/format.h>

#include <set>
#include <vector>

#include "backends/cuda/common/cuda_util.h"
#include "backends/cuda/common/lt_plan.h"
#include "backends/cuda/common/lt_search.h"

namespace tunableop::cuda {

namespace {

GemmCandidate make_candidate(std::shared_ptr<LtPlan> plan, const LtConfig& cfg, const cublasLtMatmulAlgo_t& algo,
                             size_t workspace) {
  GemmCandidate c;
  c.name = lt_name(cfg);
  c.info = lt_info(cfg, "algo");
  c.device = DeviceKind::kCuda;
  c.min_effort = 0;
  LtAlignment align = algo_alignment(algo);
  c.supports = [plan](const GemmParams& p) -> Status {
    if (!plan->matches(p)) return Status::unsupported("cuBLASLt algorithm was configured for another problem");
    return Status::ok();
  };
  c.workspace_bytes = [workspace](const GemmParams&) { return workspace; };
  c.run = [plan, algo, align, workspace](const GemmParams& p, const GemmOperands& o) -> Status {
    if (!plan->matches(p)) return Status::unsupported("cuBLASLt algorithm was configured for another problem");
    auto misaligned = [](const void* ptr, uint32_t need) {
      return need > 1 && (reinterpret_cast<uintptr_t>(ptr) % need) != 0;
    };
    if (misaligned(o.a, align.a) || misaligned(o.b, align.b) || misaligned(o.c, align.c)) {
      return Status::unsupported(fmt::format("pointers not aligned as the algorithm needs (A {}, B {}, C {} bytes)",
                                             align.a, align.b, align.c));
    }
    auto ws = workspace_for(o, workspace);
    if (!ws.is_ok()) return ws.status();
    GemmOperands with_ws = o;
    with_ws.workspace = *ws;
    with_ws.workspace_bytes = *ws == o.workspace ? o.workspace_bytes : workspace;
    auto h = current_handles();
    if (!h.is_ok()) return h.status();
    return plan->run(h->lt, algo, p, with_ws);
  };
  return c;
}

std::vector<GemmCandidate> expand(const GemmParams& p, int effort) {
  std::vector<GemmCandidate> out;
  auto h = current_handles();
  if (!h.is_ok()) return out;
  auto plan = LtPlan::create(p);
  if (!plan.is_ok()) return out;
  const LtProblem problem = lt_problem(**plan);
  std::vector<LtConfig> configs;
  lt_heuristic_configs(h->lt, problem, effort <= 0 ? kLtHeuristicRequestEffort0 : kLtHeuristicRequest, configs);
  if (effort >= 1) lt_per_id_configs(h->lt, problem, configs);
  if (effort >= 2) {
    std::vector<LtConfig> more;
    lt_exhaustive_configs(h->lt, problem, kLtExhaustiveMaxConfigs, more);
    configs.insert(configs.end(), more.begin(), more.end());
  }
  std::set<std::string> seen;
  for (const LtConfig& cfg : configs) {
    std::string name = lt_name(cfg);
    if (!seen.insert(name).second) continue;
    // Time exactly what a later run rebuilds from the name (not the heuristic's own struct),
    // so a stored result always means the same kernel.
    size_t ws = 0;
    auto algo = (*plan)->make_algo(h->lt, cfg, &ws);
    if (!algo.is_ok()) continue;
    out.push_back(make_candidate(*plan, cfg, *algo, ws));
  }
  return out;
}

StatusOr<GemmCandidate> resolve(const GemmParams& p, const std::string& name) {
  auto cfg = parse_lt_name(name);
  if (!cfg.is_ok()) return cfg.status();
  auto h = current_handles();
  if (!h.is_ok()) return h.status();
  auto plan = LtPlan::create(p);
  if (!plan.is_ok()) return plan.status();
  size_t ws = 0;
  auto algo = (*plan)->make_algo(h->lt, *cfg, &ws);
  if (!algo.is_ok()) {
    return Status::unsupported(fmt::format("{} no longer validates here: {}", name, algo.status().message()));
  }
  return make_candidate(*plan, *cfg, *algo, ws);
}

}  // namespace

GemmCandidateFamily make_lt_family() {
  GemmCandidateFamily f;
  f.prefix = kLtPrefix;
  f.device = DeviceKind::kCuda;
  f.min_effort = 0;
  f.expand = expand;
  f.resolve = resolve;
  return f;
}

}  // namespace tunableop::cuda

// Registration pieces shared by the CPU BLAS providers (openblas/, blis/, onednn/): open the
// library or leave a note, and one candidate per thread count. A library type `Lib` offers
// `open_first(paths)`, `supports(p)`, `gemm(p, ops, threads)` and, when its candidates need
// scratch, `static size_t workspace_bytes(p)`.
#pragma once

#include <concepts>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tunableop/gemm.h"
#include "tunableop/registry.h"

namespace tunableop::cpu_shared {

// 1, half and all of the `cores` this process may use, capped by `library_max` when it is > 0
// (so that a name never promises more threads than the library will run), deduplicated; largest
// first, since the tuner prunes against the best so far and all cores usually wins big problems.
std::vector<int> thread_counts(int cores, int library_max = 0);

// Lib::open_first(paths); when no path loads, adds the one note "NAME provider off
// (PREFIX_* not registered): <every attempt>" and returns null.
template <class Lib>
std::shared_ptr<Lib> open_or_note(Registry& r, const std::vector<std::string>& paths, const std::string& name,
                                  const std::string& prefix) {
  auto opened = Lib::open_first(paths);
  if (!opened.is_ok()) {
    r.add_note(name + " provider off (" + prefix + "_* not registered): " + opened.status().message());
    return nullptr;
  }
  return *opened;
}

// Lib's candidates need scratch: it declares `static size_t workspace_bytes(const GemmParams&)`.
template <class Lib>
concept HasWorkspace = requires(const GemmParams& p) {
  { Lib::workspace_bytes(p) } -> std::convertible_to<size_t>;
};

// A CPU candidate `name` that runs lib->gemm(p, ops, threads); offered from search effort
// `min_effort`.
template <class Lib>
GemmCandidate make_candidate(std::shared_ptr<Lib> lib, std::string name, int threads, int min_effort) {
  GemmCandidate c;
  c.name = std::move(name);
  c.device = DeviceKind::kCpu;
  c.min_effort = min_effort;
  c.supports = [lib](const GemmParams& p) {
    if (p.widens()) return Status::unsupported("the BLAS libraries write C in the inputs' dtype");
    return lib->supports(p);
  };
  c.run = [lib, threads](const GemmParams& p, const GemmOperands& ops) { return lib->gemm(p, ops, threads); };
  c.info.library = Lib::kName;
  c.info.algorithm = "gemm";
  c.info.add("threads", threads > 0 ? std::to_string(threads) : "library default");
  if constexpr (HasWorkspace<Lib>) {
    c.workspace_bytes = [](const GemmParams& p) { return Lib::workspace_bytes(p.with_defaults()); };
  } else {
    c.workspace_bytes = [](const GemmParams&) { return size_t(0); };
  }
  return c;
}

// PREFIX_t<N> for each of `counts`. The first (all cores, the libraries' usual default) is
// offered even at the lowest search effort, the others from effort 1.
template <class Lib>
void add_thread_candidates(Registry& r, const std::shared_ptr<Lib>& lib, const std::string& prefix,
                           const std::vector<int>& counts) {
  for (int threads : counts)
    r.list<GemmCandidate>().push_back(
        make_candidate(lib, prefix + "_t" + std::to_string(threads), threads, threads == counts.front() ? 0 : 1));
}

}  // namespace tunableop::cpu_shared

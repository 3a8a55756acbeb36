// Candidate lists, lookup by stored name, and the per-context resolved-candidate cache, shared
// by every op whose candidates follow the GemmCandidate shape (name, device, min_effort,
// supports, run) with an optional family type (prefix, device, min_effort, expand, resolve).
#pragma once

#include <fmt/format.h>

#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "tunableop/context.h"

namespace tunableop::ops {

// The candidates for p on the context's device at the given effort: Default first, then the
// static ones in registration order, then family expansions.
template <class Candidate, class Family, class Params>
std::vector<Candidate> candidates_for(Context& ctx, const Params& p, int effort) {
  std::vector<Candidate> out;
  const DeviceKind kind = ctx.device().kind;
  if (const auto* list = ctx.registry().find_list<Candidate>()) {
    for (const auto& c : *list) {
      if (c.device != kind || c.min_effort > effort) continue;
      if (c.name == "Default")
        out.insert(out.begin(), c);
      else
        out.push_back(c);
    }
  }
  if (const auto* fams = ctx.registry().find_list<Family>()) {
    for (const auto& f : *fams) {
      if (f.device != kind || f.min_effort > effort) continue;
      for (auto& c : f.expand(p, effort)) out.push_back(std::move(c));
    }
  }
  return out;
}

// A candidate by its stored name: a static one, or one a family rebuilds; NotFound if none.
template <class Candidate, class Family, class Params>
StatusOr<Candidate> find_candidate(Context& ctx, const Params& p, const std::string& name) {
  const DeviceKind kind = ctx.device().kind;
  if (const auto* list = ctx.registry().find_list<Candidate>())
    for (const auto& c : *list)
      if (c.device == kind && c.name == name) return c;
  if (const auto* fams = ctx.registry().find_list<Family>())
    for (const auto& f : *fams)
      if (f.device == kind && name.rfind(f.prefix, 0) == 0) return f.resolve(p, name);
  return Status::not_found(fmt::format("no candidate named '{}' on {}", name, ctx.device().to_string()));
}

// Resolved candidates per (problem key, name), kept in the context, so that a hit costs a map
// lookup and not a family resolve (e.g. cuBLASLt re-validation) on every call. A null entry
// records "does not apply".
template <class Candidate>
struct ResolvedCache {
  std::shared_mutex mu;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<const Candidate>> by_key;
};

template <class Candidate, class Family, class Params>
std::shared_ptr<const Candidate> cached_candidate(Context& ctx, const Params& p, const std::string& problem_key,
                                                  const std::string& name) {
  auto& cache = ctx.op_state<ResolvedCache<Candidate>>();
  std::pair<std::string, std::string> key{problem_key, name};
  {
    std::shared_lock lock(cache.mu);
    if (auto it = cache.by_key.find(key); it != cache.by_key.end()) return it->second;
  }
  auto c = find_candidate<Candidate, Family>(ctx, p, name);
  std::shared_ptr<const Candidate> sp;
  if (c.is_ok() && c->supports(p).is_ok()) sp = std::make_shared<const Candidate>(std::move(*c));
  std::unique_lock lock(cache.mu);
  cache.by_key[key] = sp;
  return sp;
}

}  // namespace tunableop::ops

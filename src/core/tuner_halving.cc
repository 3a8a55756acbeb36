// Phase 4 of the tuning protocol, successive halving: the candidates that survived screening and
// the numerics check share one time budget per round, and each round keeps the faster half.
// Giving every survivor the full per-candidate budget made tuning cost grow with the number of
// near-equal candidates (dozens of cuBLASLt configurations pass the 1.15x screen on large GEMMs:
// 10 s for one problem); halving makes it grow with log2 of that number, and spends most of the
// time on the few that are still in contention.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/tuning_session.h"

namespace tunableop {

namespace {

using Outcome = CandidateReport::Outcome;

void sort_by_estimate(std::vector<CandidateState*>& field) {
  std::stable_sort(field.begin(), field.end(),
                   [](const CandidateState* a, const CandidateState* b) { return a->estimate_ms < b->estimate_ms; });
}

}  // namespace

void TuningSession::halving_round(std::vector<CandidateState*>& field, double budget_ms, int64_t max_runs,
                                  bool record) {
  const size_t n = field.size();
  if (n == 0) return;
  // Equal shares of the round's budget, as small samples (plan_samples).
  const double share = budget_ms / double(n);
  std::vector<SamplePlan> plan(n);
  int most = 0;
  for (size_t j = 0; j < n; ++j) {
    plan[j] = plan_samples(*field[j], share, max_runs, kMaxSamplesPerRound, /*at_least_one=*/record);
    most = std::max(most, plan[j].samples);
  }
  // Interleaved: sample k of every contestant before sample k + 1 of any, the first mover
  // rotating, so that drift in the machine's state (clocks, other load) hits all alike.
  for (int k = 0; k < most; ++k) {
    for (size_t q = 0; q < n; ++q) {
      const size_t j = (q + size_t(k)) % n;
      CandidateState& s = *field[j];
      if (k >= plan[j].samples || !s.timed) continue;
      Status st = take_samples(s, {1, plan[j].runs_per_sample}, record ? &s.samples : nullptr);
      if (!st.is_ok()) {
        s.timed = false;
        drop(s.index, Dropped{Outcome::kFailed, st});
      }
    }
  }
  std::erase_if(field, [](const CandidateState* s) { return !s->timed; });
  for (CandidateState* s : field) {
    s->m = summarize(s->samples);
    s->estimate_ms = estimate(*s);
  }
}

void TuningSession::keep_fastest(std::vector<CandidateState*>& field, size_t places, double ratio,
                                 const std::string& why, bool check) {
  std::vector<CandidateState*> kept;
  for (CandidateState* s : field) {
    const bool room = kept.size() < places && (kept.empty() || s->estimate_ms <= ratio * kept.front()->estimate_ms);
    if (room) {
      if (check)
        if (auto d = verify(*s)) {  // a wrong result takes no place: the next one moves up
          s->timed = false;
          drop(s->index, *d);
          continue;
        }
      kept.push_back(s);
      continue;
    }
    s->timed = false;
    const double cut_ms = kept.empty() ? 0 : kept.back()->estimate_ms;
    log_.log(2, fmt::format("├──halved out in {} id={}, {} {} ({:.6g} ms > {:.6g} ms)", why, s->index, what_, s->name,
                            s->estimate_ms, cut_ms));
    Measurement m = s->m;
    m.median_ms = s->estimate_ms;
    note(s->index, Outcome::kHalved, why, m);
  }
  field = std::move(kept);
}

std::vector<CandidateState*> TuningSession::halve(std::vector<CandidateState*> contestants, size_t keep) {
  keep = std::max<size_t>(keep, 1);
  constexpr double kNoRatio = std::numeric_limits<double>::infinity();
  std::vector<CandidateState*> field;
  for (CandidateState* s : contestants)
    if (s->timed) field.push_back(s);
  sort_by_estimate(field);
  if (field.size() <= keep) {
    keep_fastest(field, keep, kNoRatio, "the finalists' check", /*check=*/true);
    return field;
  }

  // The screening runs warmed every contestant already; this shared warm-up brings the
  // cheapest ones to a steady state without costing more than the policy's warm-up budget.
  // Both, like every round, within what is left of the problem's budget.
  halving_round(field, std::min(pol_.max_warmup_ms, remaining_ms()), pol_.max_warmup_iters, /*record=*/false);
  for (int round = 1; field.size() > keep; ++round) {
    const double budget_ms = std::min(pol_.max_tuning_ms, remaining_ms());
    double one_run_each = 0;
    for (const CandidateState* s : field) one_run_each += s->estimate_ms;
    // Out of budget, or a later round that cannot buy one run each (it would sample anyway):
    // the estimates so far decide.
    if (over_budget() || (round > 1 && one_run_each > remaining_ms())) {
      log_.log(2, fmt::format("├──over the problem budget ({} ms) in halving round {}: keeping the {} fastest so far",
                              pol_.max_problem_ms, round, keep));
      keep_fastest(field, keep, kNoRatio, fmt::format("round {} (problem budget)", round), /*check=*/true);
      break;
    }
    const size_t contestants_now = field.size();
    // A first round whose budget cannot buy every contestant one more run would cost a run
    // each anyway (dozens of near-equal cuBLASLt configurations of a 3 ms GEMM: 150 ms); it
    // cuts on the screening estimates instead, which are just as fresh. Later rounds, with
    // half the field or less, always sample.
    if (round > 1 || one_run_each <= budget_ms) {
      halving_round(field, budget_ms, pol_.max_tuning_iters, /*record=*/true);
      sort_by_estimate(field);
    } else {
      log_.log(3, fmt::format("├──halving round 1 on the screening estimates (one run each: {:.6g} ms > {:.6g} ms)",
                              one_run_each, budget_ms));
    }
    // The faster half goes on (rounded up, never fewer than `keep`), none of them slower than
    // the second screening ratio allows.
    const size_t places = std::max(keep, (contestants_now + 1) / 2);
    keep_fastest(field, places, pol_.screen_ratio_2, fmt::format("round {}", round), /*check=*/places == keep);
    log_.log(3, fmt::format("├──halving round {}: {} contestants, {} go on", round, contestants_now, field.size()));
  }
  // A round whose ratio cut left `keep` or fewer ended the halving before a checked cut: the
  // finalists are checked here (the checked ones cost nothing).
  keep_fastest(field, keep, kNoRatio, "the finalists' check", /*check=*/true);
  return field;
}

}  // namespace tunableop

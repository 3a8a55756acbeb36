// The tuning protocol of docs/design.md as phases: probe, screen, verify numerics (candidate by
// candidate), successive halving of the survivors (tuner_halving.cc), re-measure finalists
// interleaved with Default, decide (Default unless the winner beats it by the margin).
// Tuner::find_fastest composes them.
#include "core/tuning_session.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace tunableop {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
using Outcome = CandidateReport::Outcome;
}  // namespace

Measurement summarize(std::vector<double> s) {
  Measurement m;
  if (s.empty()) return m;
  std::sort(s.begin(), s.end());
  m.runs = int(s.size());
  m.min_ms = s.front();
  size_t n = s.size();
  m.median_ms = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  double sum = 0;
  for (double v : s) sum += v;
  m.mean_ms = sum / double(n);
  double var = 0;
  for (double v : s) var += (v - m.mean_ms) * (v - m.mean_ms);
  m.std_ms = n > 1 ? std::sqrt(var / double(n - 1)) : 0.0;
  return m;
}

double median(std::vector<double> samples) { return summarize(std::move(samples)).median_ms; }

std::vector<std::vector<double>> interleaved_rounds(size_t items, const InterleavedRounds& rounds, Timer& clock,
                                                    const std::function<StatusOr<double>(size_t)>& measure,
                                                    const std::function<void(size_t, const Status&)>& on_fail) {
  std::vector<std::vector<double>> samples(items);
  std::vector<bool> failed(items, false);
  const double t0 = clock.now_ms();
  for (int r = 0; r < rounds.max_rounds && items > 0; ++r) {
    if (r >= rounds.min_rounds && clock.now_ms() - t0 > rounds.budget_ms) break;
    for (size_t q = 0; q < items; ++q) {
      const size_t i = (q + size_t(r)) % items;  // rotate who goes first
      if (failed[i]) continue;                   // never run again after failing
      auto ms = measure(i);
      if (!ms.is_ok()) {
        failed[i] = true;
        if (on_fail) on_fail(i, ms.status());
        continue;
      }
      samples[i].push_back(*ms);
    }
  }
  return samples;
}

TuningSession::TuningSession(TuningProblem& problem, const TuningPolicy& policy, Logger& log)
    : pr_(problem), pol_(policy), log_(log) {
  t_begin_ = pr_.timer().now_ms();
  report_.winner.op = pr_.op_signature();
  report_.winner.params = pr_.params_signature();
  what_ = fmt::format("{}({})", report_.winner.op, report_.winner.params);
}

double TuningSession::elapsed_ms() { return pr_.timer().now_ms() - t_begin_; }

StatusOr<double> time_runs(TuningProblem& problem, size_t i, int runs, size_t* rotation) {
  Timer& t = problem.timer();
  t.start();
  for (int r = 0; r < runs; ++r) {
    Status st = problem.run(i, (*rotation)++);
    if (!st.is_ok()) {
      t.stop_ms();
      return st;
    }
  }
  return t.stop_ms() / runs;
}

StatusOr<double> TuningSession::time_runs(size_t i, int runs) { return tunableop::time_runs(pr_, i, runs, &rotation_); }

void TuningSession::note(size_t i, Outcome o, std::string detail, Measurement m) {
  report_.candidates.push_back({pr_.candidate_name(i), o, std::move(detail), m});
}

void TuningSession::skip_over_budget(size_t i) {
  log_.log(2, fmt::format("├──over the problem budget ({} ms), not trying id={}, {} {}", pol_.max_problem_ms, i, what_,
                          pr_.candidate_name(i)));
  note(i, Outcome::kOverBudget, "problem budget exhausted");
}

void TuningSession::drop(size_t i, const Dropped& d) {
  const std::string name = pr_.candidate_name(i);
  switch (d.outcome) {
    case Outcome::kUnsupported:
      log_.log(2, fmt::format("├──unsupported id={}, {} {}", i, what_, name));
      note(i, d.outcome, d.status.message());
      return;
    case Outcome::kSkippedSlow: note(i, d.outcome, fmt::format("{:.6g} ms", d.m.median_ms), d.m); return;
    case Outcome::kOverBudget: skip_over_budget(i); return;
    case Outcome::kNumericsFailed:
      log_.log(2, fmt::format("├──verify numerics failed id={}, {} {}: {}", i, what_, name, d.status.message()));
      note(i, d.outcome, d.status.message());
      break;
    default:
      log_.log(2, fmt::format("├──failed id={}, {} {}: {}", i, what_, name, d.status.to_string()));
      note(i, Outcome::kFailed, d.status.to_string());
      break;
  }
  // A failed run or check may leave the device in an error state.
  Status rec = pr_.recover();
  if (!rec.is_ok()) log_.warn(fmt::format("after candidate {} failed: {}", name, rec.to_string()));
}

std::optional<Dropped> TuningSession::probe(size_t i, CandidateState& s) {
  s = CandidateState{};
  s.index = i;
  s.name = pr_.candidate_name(i);
  Status st = pr_.supports(i);
  if (!st.is_ok()) return Dropped{Outcome::kUnsupported, st};
  // One run sizes the samples: short runs are batched so clock overhead stays small.
  auto one = time_runs(i, 1);
  if (!one.is_ok()) return Dropped{Outcome::kFailed, one.status()};
  s.probe_ms = *one;
  s.batch = std::clamp(int(std::ceil(pr_.timer().min_sample_ms() / std::max(*one, 1e-6))), 1, 1000);
  return std::nullopt;
}

double TuningSession::estimate(const CandidateState& s) {
  if (s.samples.empty()) return s.probe_ms;
  if (s.samples.size() == 1) return s.batch == 1 && s.probe_ms > 0 ? std::min(s.samples[0], s.probe_ms) : s.samples[0];
  std::vector<double> v = s.samples;
  const size_t lower = (v.size() - 1) / 2;
  std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(lower), v.end());
  return v[lower];
}

std::optional<Dropped> TuningSession::screen(CandidateState& s, double best_ms) {
  // A sizing run so slow that no warm-up could bring the candidate near the best leaves before
  // its screening sample (kColdCutRatio); batched candidates' single runs say too little.
  if (s.index > 0 && s.batch == 1 && s.probe_ms > kColdCutRatio * best_ms + kColdAllowanceMs) {
    log_.log(2, fmt::format("├──skip slow instance id={}, {} {} (first run {:.6g} ms > {}x best {:.6g} ms + {} ms)",
                            s.index, what_, s.name, s.probe_ms, kColdCutRatio, best_ms, kColdAllowanceMs));
    Measurement m;
    m.runs = 1;
    m.median_ms = m.mean_ms = m.min_ms = s.probe_ms;
    return Dropped{Outcome::kSkippedSlow, Status::ok(), m};
  }
  for (auto [runs, ratio] :
       {std::pair{pol_.screen_runs_1, pol_.screen_ratio_1}, {pol_.screen_runs_2, pol_.screen_ratio_2}}) {
    if (runs <= 0) continue;  // a stage without samples makes no cut
    // The problem's budget: no sample it cannot afford. Default goes on with its sizing run as
    // its estimate; another candidate leaves (it was not measured, not found slow).
    if (remaining_ms() < s.probe_ms * s.batch * runs) {
      if (s.index > 0) return Dropped{Outcome::kOverBudget, Status::ok()};
      break;
    }
    for (int r = 0; r < runs; ++r) {
      auto ms = time_runs(s.index, s.batch);
      if (!ms.is_ok()) return Dropped{Outcome::kFailed, ms.status()};
      s.samples.push_back(*ms);
    }
    // The first cut rests on one sample, where one disturbed run (a preemption, an interrupt)
    // would drop a good candidate: estimate() takes the sizing run as a second opinion.
    const double est = estimate(s);
    if (s.index > 0 && est > ratio * best_ms) {
      log_.log(2, fmt::format("├──skip slow instance id={}, {} {} ({:.6g} ms > {}x best {:.6g} ms)", s.index, what_,
                              s.name, est, ratio, best_ms));
      Measurement m = summarize(s.samples);
      m.median_ms = est;
      return Dropped{Outcome::kSkippedSlow, Status::ok(), m};
    }
  }
  return std::nullopt;
}

std::optional<Dropped> TuningSession::verify(CandidateState& s) {
  // Checked once, and only when it matters (qualify, halve): the screening's `best` and every
  // halving survivor are verified, so a wrong-but-fast candidate can neither win nor prune nor
  // take a correct one's place.
  if (s.verified || !pol_.numerical_check) {
    s.verified = true;
    return std::nullopt;
  }
  Status st = pr_.check_numerics(s.index);
  if (!st.is_ok()) return Dropped{Outcome::kNumericsFailed, st};
  s.verified = true;
  log_.log(3, fmt::format("├──verify numerics passed id={}, {}", s.index, s.name));
  return std::nullopt;
}

std::optional<Dropped> TuningSession::qualify(size_t i, double best_ms, CandidateState& s) {
  if (auto d = probe(i, s)) return d;
  if (auto d = screen(s, best_ms)) return d;
  s.m = summarize(s.samples);
  s.estimate_ms = estimate(s);
  // Default is the reference; a new best prunes others: both must be right. The rest are
  // checked only if they get far enough in the halving.
  if (i == 0 || s.estimate_ms < best_ms) {
    if (i > 0 && !s.verified && pol_.numerical_check && remaining_ms() < s.probe_ms)
      return Dropped{Outcome::kOverBudget, Status::ok()};
    if (auto d = verify(s)) return d;
  }
  s.timed = true;
  return std::nullopt;
}

TuningSession::SamplePlan TuningSession::plan_samples(const CandidateState& s, double share_ms, int64_t max_runs,
                                                      int max_samples, bool at_least_one) {
  const double per_run = std::max(s.estimate_ms, 1e-6);
  int64_t runs = std::min<int64_t>(std::max<int64_t>(max_runs, 0), int64_t(share_ms / per_run));
  if (runs <= 0) {
    if (!at_least_one) return {};
    runs = 1;
  }
  SamplePlan p;
  p.samples = int(std::clamp<int64_t>(runs / std::max(s.batch, 1), 1, std::max(max_samples, 1)));
  p.runs_per_sample = int(std::max<int64_t>(s.batch, runs / p.samples));
  return p;
}

Status TuningSession::take_samples(const CandidateState& s, SamplePlan plan, std::vector<double>* out) {
  for (int k = 0; k < plan.samples; ++k) {
    auto ms = time_runs(s.index, plan.runs_per_sample);
    if (!ms.is_ok()) return ms.status();
    if (out) out->push_back(*ms);
  }
  return Status::ok();
}

Status TuningSession::remeasure(const std::vector<CandidateState*>& finalists) {
  for (CandidateState* s : finalists) s->rounds.clear();
  final_rounds_ = {};
  if (finalists.size() < 2 || pol_.remeasure_rounds <= 0) return Status::ok();
  // Five rounds at least (fewer only when the policy asks for fewer): from five on, the spread
  // of the paired ratios leaves one disturbed round at each end out (versus_default), so that
  // one interrupt neither decides nor vetoes; more rounds while the re-measurement budget lasts.
  // Within the problem's budget: each finalist's share of a round shrinks to what the budget
  // gives it, and the rounds are as many as one run each per round affords; none (the first
  // pass decides, as with re-measurement off) when not one round fits.
  const double left = remaining_ms();
  double per_round_ms = 0;  // one run of each finalist: what a round costs at least
  for (const CandidateState* s : finalists) per_round_ms += std::max(s->estimate_ms, 1e-6);
  const int affordable = int(std::min<double>(pol_.remeasure_rounds, std::floor(left / per_round_ms)));
  if (affordable < 1) {
    log_.log(2, fmt::format("├──over the problem budget ({} ms) before the re-measurement: the first pass decides",
                            pol_.max_problem_ms));
    return Status::ok();
  }
  const double share_ms =
      std::min(pol_.max_tuning_ms / pol_.remeasure_rounds, left / (double(affordable) * double(finalists.size())));
  InterleavedRounds rounds{std::min({kMinRemeasureRounds, pol_.remeasure_rounds, affordable}), affordable,
                           std::min(pol_.remeasure_ms, left)};
  Status default_failed;
  std::vector<std::vector<double>> samples(finalists.size());
  std::vector<DeviceClock> clocks;  // read after each finalist's samples in a counted round
  auto round_samples = [&](size_t q) -> StatusOr<std::vector<double>> {
    CandidateState& s = *finalists[q];
    if (!s.timed || !default_failed.is_ok()) return Status::internal("not measured");
    // Each round fills ~1/rounds of the tuning budget per finalist, within the iteration budget
    // too (smaller wins; at least one run per round), as several small samples. Every run takes
    // the next rotating copy, so each finalist meets copies as long out of cache as the others.
    SamplePlan plan = plan_samples(s, share_ms, std::max<int64_t>(1, pol_.max_tuning_iters / pol_.remeasure_rounds),
                                   kMaxSamplesPerRound, /*at_least_one=*/true);
    std::vector<double> round;
    TUNABLEOP_RETURN_IF_ERROR(take_samples(s, plan, &round));
    return round;
  };
  auto on_fail = [&](size_t q, const Status& st) {
    CandidateState& s = *finalists[q];
    if (!s.timed || !default_failed.is_ok()) return;
    if (s.index == 0) {
      default_failed = st;  // nothing to compare with any more: stop
      return;
    }
    drop(s.index, Dropped{Outcome::kFailed, st});
    s.timed = false;
  };
  // Under sustained load the rounds count only once the device runs as hot as the workload
  // will: the same rounds, back to back, their values thrown away (tuner_sustained.cc).
  final_rounds_.how = sustained(*finalists.front()) ? "sustained" : "burst";
  if (final_rounds_.how == "sustained") {
    final_rounds_.heated_ms = heat(finalists.size(), finalists.front()->estimate_ms, [&](size_t q) {
      auto r = round_samples(q);
      if (!r.is_ok()) on_fail(q, r.status());
      return default_failed.is_ok();
    });
    if (!default_failed.is_ok()) return default_failed;
  }
  auto measure = [&](size_t q) -> StatusOr<double> {
    auto round = round_samples(q);
    if (!round.is_ok()) return round.status();
    samples[q].insert(samples[q].end(), round->begin(), round->end());
    clocks.push_back(pr_.timer().device_clock());
    return median(std::move(*round));
  };
  auto per_round = interleaved_rounds(finalists.size(), rounds, pr_.timer(), measure, on_fail);
  if (!default_failed.is_ok()) return default_failed;
  final_rounds_.clock = median_clock(clocks);
  if (final_rounds_.how == "sustained") hot_until_ms_ = elapsed_ms();
  for (size_t q = 0; q < finalists.size(); ++q) {
    CandidateState& s = *finalists[q];
    if (!s.timed) continue;
    Measurement re = summarize(samples[q]);
    log_.log(3, fmt::format("├──re-measured {}: median {:.6g} ms over {} samples in {} rounds (first pass {:.6g})",
                            s.name, re.median_ms, re.runs, per_round[q].size(), s.m.median_ms));
    s.m = re;
    s.rounds = std::move(per_round[q]);
  }
  return Status::ok();
}

VersusDefault versus_default(const std::vector<double>& cand, const std::vector<double>& def, double min_improvement) {
  VersusDefault v;
  std::vector<double> ratio;
  for (size_t r = 0; r < std::min(cand.size(), def.size()); ++r)
    if (def[r] > 0 && std::isfinite(cand[r])) ratio.push_back(cand[r] / def[r]);
  v.rounds = int(ratio.size());
  v.margin = min_improvement;
  if (ratio.empty()) return v;
  std::sort(ratio.begin(), ratio.end());
  v.ratio = median(ratio);
  // The spread is the range of the ratios, from five rounds on with the most extreme round at
  // each end left out: one round hit by an interrupt or a page-fault storm does not veto a
  // clear win, while noise that returns (two rounds of five or more) still widens it. The whole
  // range, not half of it: the median of few rounds is itself noisy (in the fake-clock tests,
  // half the range let a candidate 3% slower with 25% noise per run win in 4 seeds of 40, the
  // whole range in 1).
  const size_t trim = ratio.size() >= 5 ? 1 : 0;
  v.spread = ratio[ratio.size() - 1 - trim] - ratio[trim];
  v.margin = std::max(min_improvement, v.spread);
  v.wins = v.ratio < 1.0 - v.margin;
  return v;
}

CandidateState* TuningSession::winner_over_default(const std::vector<CandidateState*>& finalists) {
  const CandidateState& def = *finalists.front();
  CandidateState* win = nullptr;
  double win_ratio = 1;
  for (size_t q = 1; q < finalists.size(); ++q) {
    CandidateState& s = *finalists[q];
    if (!s.timed) continue;
    const VersusDefault v = versus_default(s.rounds, def.rounds, pol_.min_improvement);
    log_.log(3, fmt::format("├──{} / Default: median ratio {:.4f} over {} rounds, spread {:.2f}%: {}", s.name, v.ratio,
                            v.rounds, 100 * v.spread, v.wins ? "faster than the noise" : "not faster than the noise"));
    if (!v.wins) {
      log_.log(2, fmt::format("├──keeping Default over {}: {:.4f} of Default's time in the paired rounds, needs below "
                              "{:.4f} (1 - max of the {:.0f}% margin and the rounds' spread {:.2f}%)",
                              s.name, v.ratio, 1 - v.margin, 100 * pol_.min_improvement, 100 * v.spread));
      continue;
    }
    if (!win || v.ratio < win_ratio) win = &s, win_ratio = v.ratio;
  }
  return win;
}

const CandidateState& TuningSession::decide(const std::vector<CandidateState*>& finalists) {
  CandidateState& def = *finalists.front();
  if (def.rounds.empty()) {
    // No paired rounds (re-measurement off): the fastest median, if it clears the margin.
    const CandidateState* win = &def;
    for (size_t q = 1; q < finalists.size(); ++q) {
      const CandidateState& s = *finalists[q];
      if (s.timed && s.m.median_ms < win->m.median_ms) win = &s;
    }
    if (win != &def && win->m.median_ms > def.m.median_ms * (1.0 - pol_.min_improvement)) {
      log_.log(2, fmt::format("├──keeping Default: {} ({:.6g} ms) is not {:.0f}% faster than Default ({:.6g} ms)",
                              win->name, win->m.median_ms, pol_.min_improvement * 100, def.m.median_ms));
      win = &def;
    }
    return *win;
  }
  CandidateState* win = winner_over_default(finalists);
  if (!win) return def;
  // A big win whose times disagree with the screening (the winner's or Default's) was measured
  // while the machine changed under one of them: a burst of load slows a candidate that needs
  // both cores and not one that needs one. The pair is measured again and must agree.
  const VersusDefault v = versus_default(win->rounds, def.rounds, pol_.min_improvement);
  auto drifted = [](const CandidateState& s) {
    return s.estimate_ms > 0 && std::abs(s.m.median_ms / s.estimate_ms - 1.0) > kRecheckDrift;
  };
  if (v.ratio < 1.0 / kRecheckFactor && (drifted(*win) || drifted(def))) {
    if (remaining_ms() < double(kMinRemeasureRounds) * (win->m.median_ms + def.m.median_ms)) {
      log_.log(2, fmt::format("├──keeping Default: {} would need a re-check ({:.2f}x faster, times unlike the "
                              "screening's) that the problem budget ({} ms) has no room for",
                              win->name, 1 / v.ratio, pol_.max_problem_ms));
      return def;
    }
    log_.log(2,
             fmt::format("├──re-checking {}: {:.2f}x faster than Default, but re-measured at {:.6g} ms (screening "
                         "{:.6g}) against Default's {:.6g} ms (screening {:.6g})",
                         win->name, 1 / v.ratio, win->m.median_ms, win->estimate_ms, def.m.median_ms, def.estimate_ms));
    CandidateState& w = *win;
    Status st = remeasure({&def, &w});
    const VersusDefault again = versus_default(w.rounds, def.rounds, pol_.min_improvement);
    if (!st.is_ok() || !w.timed || !again.wins) {
      log_.log(2,
               fmt::format("├──keeping Default: {} does not beat it again ({:.4f} of Default's time, spread {:.2f}%)",
                           w.name, again.ratio, 100 * again.spread));
      return def;
    }
    log_.log(2, fmt::format("├──{} beats Default again: {:.4f} of its time", w.name, again.ratio));
  }
  return *win;
}

StatusOr<TuningReport> Tuner::find_fastest(TuningProblem& pr) {
  TuningSession session(pr, policy_, log_);
  const std::string& what = session.what();
  const size_t n = pr.candidate_count();
  log_.log(1, fmt::format("finding fastest for {} out of {} candidates", what, n));
  if (policy_.numerical_check) log_.log(2, "├──numerics check against the reference is on");

  // Probe, screen and verify candidate by candidate, so that "best so far" (the screening cut's
  // reference) is always a verified candidate: a wrong-but-fast one can neither win nor prune.
  std::vector<CandidateState> in_race;
  in_race.reserve(n);
  double best = kInf;
  bool budget_gone = false;  // a candidate left for lack of budget: none after it is probed
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && (budget_gone || session.over_budget())) {
      session.skip_over_budget(i);
      continue;
    }
    CandidateState s;
    if (auto d = session.qualify(i, best, s)) {
      if (i > 0) {
        budget_gone = d->outcome == Outcome::kOverBudget;
        session.drop(i, *d);
        continue;
      }
      // Not even Default runs: there is nothing to choose from.
      switch (d->outcome) {
        case Outcome::kUnsupported:
          return Status::internal(fmt::format("Default does not support {}: {}", what, d->status.message()));
        case Outcome::kNumericsFailed:
          session.drop(i, *d);
          return Status::numerics(fmt::format("Default fails the numerics check on {}: {}", what, d->status.message()));
        default: return d->status;
      }
    }
    if (s.estimate_ms < best) {
      best = s.estimate_ms;
      log_.log(2, fmt::format("├──found better instance id={}. {:.6g}ms. {}", i, best, s.name));
    }
    in_race.push_back(std::move(s));
  }
  if (in_race.empty() || in_race.front().index != 0)
    return Status::internal(fmt::format("Default could not be measured on {}", what));

  // Successive halving among the others down to the policy's finalists; then the finalists and
  // Default are re-measured interleaved, so that each gets the same machine state, and the
  // medians of these rounds decide (the minimum of noisy first passes favours lucky runs).
  std::vector<CandidateState*> contestants;
  for (size_t q = 1; q < in_race.size(); ++q) contestants.push_back(&in_race[q]);
  std::vector<CandidateState*> finalists = {&in_race.front()};
  for (CandidateState* s : session.halve(contestants, size_t(std::max(policy_.finalists, 1)))) finalists.push_back(s);
  TUNABLEOP_RETURN_IF_ERROR(session.remeasure(finalists));
  const CandidateState& win = session.decide(finalists);

  TuningReport& report = session.report();
  for (const CandidateState* s : finalists)
    if (s->timed) session.note(s->index, Outcome::kTimed, "", s->m);
  const CandidateState& def = in_race.front();
  report.default_median_ms = def.m.median_ms;
  report.winner.solution = win.name;
  report.winner.time_ms = win.m.median_ms;
  report.winner.stats = win.m;
  report.winner.tuning_ms = session.elapsed_ms();
  report.winner.default_ms = def.m.median_ms;
  const TuningSession::FinalRounds& fr = session.final_rounds();
  report.winner.final_rounds = fr.how;
  report.winner.sm_mhz = fr.clock.sm_mhz;
  report.winner.power_w = fr.clock.power_w;
  std::string rounds = fr.how.empty() ? "" : "; " + fr.how + " final rounds";
  if (fr.clock.sm_mhz > 0) rounds += fmt::format(" at SM {:.0f} MHz", fr.clock.sm_mhz);
  if (fr.clock.power_w > 0) rounds += fmt::format(", {:.0f} W", fr.clock.power_w);
  log_.log(1, fmt::format("└──found fastest for {} {} [{:.6g} ms, Default {:.6g} ms, tuned in {:.0f} ms{}]", what,
                          win.name, win.m.median_ms, def.m.median_ms, report.winner.tuning_ms, rounds));
  return std::move(report);
}

}  // namespace tunableop

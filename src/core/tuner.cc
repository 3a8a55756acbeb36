// The tuning protocol of docs/design.md as phases: probe, screen, verify numerics, time,
// re-measure finalists interleaved with Default, decide (Default unless the winner beats it by
// the margin). Tuner::find_fastest composes them candidate by candidate.
#include "tunableop/tuner.h"

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

StatusOr<double> TuningSession::time_runs(size_t i, int runs) {
  Timer& t = pr_.timer();
  t.start();
  for (int r = 0; r < runs; ++r) {
    Status st = pr_.run(i, rotation_++);
    if (!st.is_ok()) {
      t.stop_ms();
      return st;
    }
  }
  return t.stop_ms() / runs;
}

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
  s.batch = std::clamp(int(std::ceil(pr_.timer().min_sample_ms() / std::max(*one, 1e-6))), 1, 1000);
  return std::nullopt;
}

std::optional<Dropped> TuningSession::screen(CandidateState& s, double best_ms) {
  for (auto [runs, ratio] :
       {std::pair{pol_.screen_runs_1, pol_.screen_ratio_1}, {pol_.screen_runs_2, pol_.screen_ratio_2}}) {
    for (int r = 0; r < runs; ++r) {
      auto ms = time_runs(s.index, s.batch);
      if (!ms.is_ok()) return Dropped{Outcome::kFailed, ms.status()};
      s.samples.push_back(*ms);
    }
    const Measurement est = summarize(s.samples);
    if (s.index > 0 && est.median_ms > ratio * best_ms) {
      log_.log(2, fmt::format("├──skip slow instance id={}, {} {} ({:.6g} ms > {}x best {:.6g} ms)", s.index, what_,
                              s.name, est.median_ms, ratio, best_ms));
      return Dropped{Outcome::kSkippedSlow, Status::ok(), est};
    }
  }
  return std::nullopt;
}

std::optional<Dropped> TuningSession::verify(CandidateState& s) {
  // Only survivors of screening pay for the check (on a GPU it reads the whole output), and
  // `best` only ever holds verified candidates, so a wrong-but-fast one can neither win nor
  // prune others.
  if (!pol_.numerical_check) return std::nullopt;
  Status st = pr_.check_numerics(s.index);
  if (!st.is_ok()) return Dropped{Outcome::kNumericsFailed, st};
  log_.log(3, fmt::format("├──verify numerics passed id={}, {}", s.index, s.name));
  return std::nullopt;
}

std::optional<Dropped> TuningSession::time(CandidateState& s) {
  Timer& timer = pr_.timer();
  const double per_run = std::max(summarize(s.samples).median_ms, 1e-6);
  auto iters_for = [&](double ms, int64_t max_iters) {
    return std::max<int64_t>(1, std::min<int64_t>(max_iters, int64_t(ms / per_run)));
  };
  const int64_t warm = iters_for(pol_.max_warmup_ms, pol_.max_warmup_iters);
  const int64_t tune = iters_for(pol_.max_tuning_ms, pol_.max_tuning_iters);
  const double w0 = timer.now_ms();
  for (int64_t done = 0; done < warm;) {
    int runs = int(std::min<int64_t>(s.batch, warm - done));
    auto ms = time_runs(s.index, runs);
    if (!ms.is_ok()) return Dropped{Outcome::kFailed, ms.status()};
    done += runs;
  }
  const double warm_ms = timer.now_ms() - w0;
  s.samples.clear();
  const double t0 = timer.now_ms();
  for (int64_t done = 0; done < tune;) {
    int runs = int(std::min<int64_t>(s.batch, tune - done));
    auto ms = time_runs(s.index, runs);
    if (!ms.is_ok()) return Dropped{Outcome::kFailed, ms.status()};
    s.samples.push_back(*ms);
    done += runs;
  }
  s.m = summarize(s.samples);
  s.timed = true;
  log_.log(2, fmt::format(
                  "├──tuning using warmup iters {} [{:.6g} ms] and tuning iters {} [{:.6g} ms] instance id={}, {} {}",
                  warm, warm_ms, tune, timer.now_ms() - t0, s.index, what_, s.name));
  log_.log(3, fmt::format("│   min {:.6g} median {:.6g} mean {:.6g} std {:.3g} ms over {} samples", s.m.min_ms,
                          s.m.median_ms, s.m.mean_ms, s.m.std_ms, s.m.runs));
  return std::nullopt;
}

std::optional<Dropped> TuningSession::evaluate(size_t i, double best_ms, CandidateState& s) {
  if (auto d = probe(i, s)) return d;
  if (auto d = screen(s, best_ms)) return d;
  if (auto d = verify(s)) return d;
  return time(s);
}

Status TuningSession::remeasure(const std::vector<CandidateState*>& finalists) {
  if (finalists.size() < 2 || pol_.remeasure_rounds <= 0) return Status::ok();
  // Three rounds give a median; more only while the re-measurement budget lasts.
  InterleavedRounds rounds{3, pol_.remeasure_rounds, pol_.remeasure_ms};
  Status default_failed;
  auto measure = [&](size_t q) -> StatusOr<double> {
    CandidateState& s = *finalists[q];
    if (!s.timed || !default_failed.is_ok()) return Status::internal("not measured");
    // Enough runs per sample to fill ~1/rounds of the tuning budget, within the iteration
    // budget too (smaller wins; at least one run per round).
    int runs = std::max(s.batch, int(std::min<double>(1000, pol_.max_tuning_ms / pol_.remeasure_rounds /
                                                                std::max(s.m.median_ms, 1e-6))));
    runs = int(std::max<int64_t>(1, std::min<int64_t>(runs, pol_.max_tuning_iters / pol_.remeasure_rounds)));
    return time_runs(s.index, runs);
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
  auto samples = interleaved_rounds(finalists.size(), rounds, pr_.timer(), measure, on_fail);
  if (!default_failed.is_ok()) return default_failed;
  for (size_t q = 0; q < finalists.size(); ++q) {
    CandidateState& s = *finalists[q];
    if (!s.timed) continue;
    Measurement re = summarize(samples[q]);
    log_.log(3, fmt::format("├──re-measured {}: median {:.6g} ms over {} rounds (first pass {:.6g})", s.name,
                            re.median_ms, re.runs, s.m.median_ms));
    s.m = re;
  }
  return Status::ok();
}

const CandidateState& TuningSession::decide(const std::vector<CandidateState*>& finalists) {
  const CandidateState& def = *finalists.front();
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

StatusOr<TuningReport> Tuner::find_fastest(TuningProblem& pr) {
  TuningSession session(pr, policy_, log_);
  const std::string& what = session.what();
  const size_t n = pr.candidate_count();
  log_.log(1, fmt::format("finding fastest for {} out of {} candidates", what, n));
  if (policy_.numerical_check) log_.log(2, "├──numerics check against the reference is on");

  std::vector<CandidateState> timed;
  double best = kInf;
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && session.elapsed_ms() > policy_.max_problem_ms) {
      session.skip_over_budget(i);
      continue;
    }
    CandidateState s;
    if (auto d = session.evaluate(i, best, s)) {
      if (i > 0) {
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
    if (s.m.median_ms < best) {
      best = s.m.median_ms;
      log_.log(2, fmt::format("├──found better instance id={}. {:.6g}ms. {}", i, best, s.name));
    }
    timed.push_back(std::move(s));
  }
  if (timed.empty() || timed.front().index != 0)
    return Status::internal(fmt::format("Default could not be timed on {}", what));

  // Re-measure the best few and Default, interleaved, so that each gets the same machine state;
  // medians of these rounds decide (the minimum of noisy first passes favours lucky runs).
  std::vector<CandidateState*> finalists;
  for (auto& s : timed) finalists.push_back(&s);
  std::sort(finalists.begin() + 1, finalists.end(),
            [](const CandidateState* a, const CandidateState* b) { return a->m.median_ms < b->m.median_ms; });
  finalists.resize(std::min(finalists.size(), size_t(policy_.finalists) + 1));
  TUNABLEOP_RETURN_IF_ERROR(session.remeasure(finalists));
  const CandidateState& win = session.decide(finalists);

  TuningReport& report = session.report();
  for (const CandidateState& s : timed)
    if (s.timed) session.note(s.index, Outcome::kTimed, "", s.m);
  const CandidateState& def = timed.front();
  report.default_median_ms = def.m.median_ms;
  report.winner.solution = win.name;
  report.winner.time_ms = win.m.median_ms;
  report.winner.stats = win.m;
  report.winner.tuning_ms = session.elapsed_ms();
  log_.log(1, fmt::format("└──found fastest for {} {} [{:.6g} ms, Default {:.6g} ms, tuned in {:.0f} ms]", what,
                          win.name, win.m.median_ms, def.m.median_ms, report.winner.tuning_ms));
  return std::move(report);
}

}  // namespace tunableop

// The tuning protocol of DESIGN.md: probe, check numerics, screen, time, re-measure finalists
// interleaved with Default, keep Default unless the winner beats it by the margin.
#include "tunableop/tuner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace tunableop {

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

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct State {
  size_t index = 0;
  std::string name;
  int batch = 1;                // runs per timed sample
  std::vector<double> samples;  // ms per run
  Measurement m;
  bool timed = false;
};

// Times a run of `runs` consecutive executions of candidate i, each on the next input copy;
// returns ms per run.
StatusOr<double> time_runs(TuningProblem& pr, size_t i, int runs, size_t& rotation) {
  Timer& t = pr.timer();
  t.start();
  for (int r = 0; r < runs; ++r) {
    Status st = pr.run(i, rotation++);
    if (!st.is_ok()) {
      t.stop_ms();
      return st;
    }
  }
  return t.stop_ms() / runs;
}

}  // namespace

StatusOr<TuningReport> Tuner::find_fastest(TuningProblem& pr) {
  const TuningPolicy& pol = policy_;
  Timer& timer = pr.timer();
  const double t_begin = timer.now_ms();
  const std::string op = pr.op_signature(), params = pr.params_signature();
  const std::string what = fmt::format("{}({})", op, params);
  const size_t n = pr.candidate_count();
  size_t rotation = 0;

  TuningReport report;
  std::vector<State> timed;
  double best = kInf;
  log_.log(1, fmt::format("finding fastest for {} out of {} candidates", what, n));
  if (pol.numerical_check) log_.log(2, "├──numerics check against the reference is on");

  auto note = [&](size_t i, CandidateReport::Outcome o, std::string detail, Measurement m = {}) {
    report.candidates.push_back({pr.candidate_name(i), o, std::move(detail), m});
  };
  auto fail = [&](size_t i, const Status& st) {
    log_.log(2, fmt::format("├──failed id={}, {} {}: {}", i, what, pr.candidate_name(i), st.to_string()));
    note(i, CandidateReport::Outcome::kFailed, st.to_string());
    Status rec = pr.recover();
    if (!rec.is_ok()) log_.warn(fmt::format("after candidate {} failed: {}", pr.candidate_name(i), rec.to_string()));
  };

  for (size_t i = 0; i < n; ++i) {
    const std::string name = pr.candidate_name(i);
    if (i > 0 && timer.now_ms() - t_begin > pol.max_problem_ms) {
      log_.log(2, fmt::format("├──over the problem budget ({} ms), not trying id={}, {} {}", pol.max_problem_ms, i,
                              what, name));
      note(i, CandidateReport::Outcome::kOverBudget, "problem budget exhausted");
      continue;
    }
    Status st = pr.supports(i);
    if (!st.is_ok()) {
      if (i == 0) return Status::internal(fmt::format("Default does not support {}: {}", what, st.message()));
      log_.log(2, fmt::format("├──unsupported id={}, {} {}", i, what, name));
      note(i, CandidateReport::Outcome::kUnsupported, st.message());
      continue;
    }
    State s;
    s.index = i;
    s.name = name;
    // One run sizes the samples: short runs are batched so clock overhead stays small.
    auto one = time_runs(pr, i, 1, rotation);
    if (!one.is_ok()) {
      if (i == 0) return one.status();
      fail(i, one.status());
      continue;
    }
    s.batch = std::clamp(int(std::ceil(timer.min_sample_ms() / std::max(*one, 1e-6))), 1, 1000);

    // Screening: cheap estimates against the best so far (Default is never screened out).
    bool dropped = false, failed = false;
    for (auto [runs, ratio] :
         {std::pair{pol.screen_runs_1, pol.screen_ratio_1}, {pol.screen_runs_2, pol.screen_ratio_2}}) {
      for (int r = 0; r < runs; ++r) {
        auto ms = time_runs(pr, i, s.batch, rotation);
        if (!ms.is_ok()) {
          if (i == 0) return ms.status();
          fail(i, ms.status());
          failed = true;
          break;
        }
        s.samples.push_back(*ms);
      }
      if (failed) break;
      double est = summarize(s.samples).median_ms;
      if (i > 0 && est > ratio * best) {
        log_.log(2, fmt::format("├──skip slow instance id={}, {} {} ({:.6g} ms > {}x best {:.6g} ms)", i, what, name,
                                est, ratio, best));
        note(i, CandidateReport::Outcome::kSkippedSlow, fmt::format("{:.6g} ms", est), summarize(s.samples));
        dropped = true;
        break;
      }
    }
    if (dropped || failed) continue;

    // Numerics after screening: only survivors pay for the check (on a GPU it copies the whole
    // output), and `best` only ever holds verified candidates, so a wrong-but-fast one can
    // neither win nor prune others.
    if (pol.numerical_check) {
      st = pr.check_numerics(i);
      if (!st.is_ok()) {
        log_.log(2, fmt::format("├──verify numerics failed id={}, {} {}: {}", i, what, name, st.message()));
        note(i, CandidateReport::Outcome::kNumericsFailed, st.message());
        Status rec = pr.recover();
        if (!rec.is_ok()) log_.warn(rec.to_string());
        if (i == 0)
          return Status::numerics(fmt::format("Default fails the numerics check on {}: {}", what, st.message()));
        continue;
      }
      log_.log(3, fmt::format("├──verify numerics passed id={}, {}", i, name));
    }

    // Warm-up and timing under the budgets (smaller of ms and iterations; at least one run).
    double per_run = std::max(summarize(s.samples).median_ms, 1e-6);
    auto iters_for = [&](double ms, int64_t max_iters) {
      return std::max<int64_t>(1, std::min<int64_t>(max_iters, int64_t(ms / per_run)));
    };
    int64_t warm = iters_for(pol.max_warmup_ms, pol.max_warmup_iters);
    int64_t tune = iters_for(pol.max_tuning_ms, pol.max_tuning_iters);
    double w0 = timer.now_ms();
    for (int64_t done = 0; done < warm && !failed;) {
      int runs = int(std::min<int64_t>(s.batch, warm - done));
      auto ms = time_runs(pr, i, runs, rotation);
      if (!ms.is_ok()) {
        if (i == 0) return ms.status();
        fail(i, ms.status());
        failed = true;
      }
      done += runs;
    }
    if (failed) continue;
    double warm_ms = timer.now_ms() - w0;
    s.samples.clear();
    double t0 = timer.now_ms();
    for (int64_t done = 0; done < tune;) {
      int runs = int(std::min<int64_t>(s.batch, tune - done));
      auto ms = time_runs(pr, i, runs, rotation);
      if (!ms.is_ok()) {
        if (i == 0) return ms.status();
        fail(i, ms.status());
        failed = true;
        break;
      }
      s.samples.push_back(*ms);
      done += runs;
    }
    if (failed) continue;
    s.m = summarize(s.samples);
    s.timed = true;
    log_.log(2, fmt::format(
                    "├──tuning using warmup iters {} [{:.6g} ms] and tuning iters {} [{:.6g} ms] instance id={}, {} {}",
                    warm, warm_ms, tune, timer.now_ms() - t0, i, what, name));
    log_.log(3, fmt::format("│   min {:.6g} median {:.6g} mean {:.6g} std {:.3g} ms over {} samples", s.m.min_ms,
                            s.m.median_ms, s.m.mean_ms, s.m.std_ms, s.m.runs));
    if (s.m.median_ms < best) {
      best = s.m.median_ms;
      log_.log(2, fmt::format("├──found better instance id={}. {:.6g}ms. {}", i, best, name));
    }
    timed.push_back(std::move(s));
  }
  if (timed.empty() || timed.front().index != 0)
    return Status::internal(fmt::format("Default could not be timed on {}", what));

  // Re-measure the best few and Default, interleaved, so that each gets the same machine state;
  // medians of these rounds decide (the minimum of noisy first passes favours lucky runs).
  std::vector<size_t> order(timed.size());
  for (size_t j = 0; j < order.size(); ++j) order[j] = j;
  std::sort(order.begin() + 1, order.end(),
            [&](size_t a, size_t b) { return timed[a].m.median_ms < timed[b].m.median_ms; });
  order.resize(std::min(order.size(), size_t(pol.finalists) + 1));
  if (order.size() > 1 && pol.remeasure_rounds > 0) {
    std::vector<std::vector<double>> rounds(order.size());
    const double r0 = timer.now_ms();
    for (int r = 0; r < pol.remeasure_rounds; ++r) {
      // Three rounds give a median; more only while the re-measurement budget lasts.
      if (r >= 3 && timer.now_ms() - r0 > pol.remeasure_ms) break;
      for (size_t q = 0; q < order.size(); ++q) {
        size_t j = order[(q + size_t(r)) % order.size()];  // rotate who goes first
        State& s = timed[j];
        if (!s.timed) continue;  // failed in an earlier round: never run it again
        // Enough runs per sample to fill ~1/rounds of the tuning budget, within the iteration
        // budget too (smaller wins; at least one run per round).
        int runs = std::max(s.batch, int(std::min<double>(1000, pol.max_tuning_ms / pol.remeasure_rounds /
                                                                    std::max(s.m.median_ms, 1e-6))));
        runs = int(std::max<int64_t>(1, std::min<int64_t>(runs, pol.max_tuning_iters / pol.remeasure_rounds)));
        auto ms = time_runs(pr, s.index, runs, rotation);
        if (!ms.is_ok()) {
          if (s.index == 0) return ms.status();
          fail(s.index, ms.status());
          s.timed = false;
          continue;
        }
        auto pos = std::find(order.begin(), order.end(), j) - order.begin();
        rounds[size_t(pos)].push_back(*ms);
      }
    }
    for (size_t q = 0; q < order.size(); ++q) {
      State& s = timed[order[q]];
      if (!s.timed) continue;
      Measurement re = summarize(rounds[q]);
      log_.log(3, fmt::format("├──re-measured {}: median {:.6g} ms over {} rounds (first pass {:.6g})", s.name,
                              re.median_ms, re.runs, s.m.median_ms));
      s.m = re;
    }
  }

  const State& def = timed.front();
  const State* win = &def;
  for (size_t q = 1; q < order.size(); ++q) {
    const State& s = timed[order[q]];
    if (s.timed && s.m.median_ms < win->m.median_ms) win = &s;
  }
  if (win != &def && win->m.median_ms > def.m.median_ms * (1.0 - pol.min_improvement)) {
    log_.log(2, fmt::format("├──keeping Default: {} ({:.6g} ms) is not {:.0f}% faster than Default ({:.6g} ms)",
                            win->name, win->m.median_ms, pol.min_improvement * 100, def.m.median_ms));
    win = &def;
  }
  for (const State& s : timed)
    if (s.timed) note(s.index, CandidateReport::Outcome::kTimed, "", s.m);

  report.default_median_ms = def.m.median_ms;
  report.winner.op = op;
  report.winner.params = params;
  report.winner.solution = win->name;
  report.winner.time_ms = win->m.median_ms;
  report.winner.stats = win->m;
  report.winner.tuning_ms = timer.now_ms() - t_begin;
  log_.log(1, fmt::format("└──found fastest for {} {} [{:.6g} ms, Default {:.6g} ms, tuned in {:.0f} ms]", what,
                          win->name, win->m.median_ms, def.m.median_ms, report.winner.tuning_ms));
  return report;
}

}  // namespace tunableop

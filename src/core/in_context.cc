#include "tunableop/in_context.h"

#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <set>
#include <utility>

#include "tunableop/tuner.h"

namespace tunableop {

namespace {

// Which of the workload's tuned choices are in force: the store holds the tuned entry for those
// in the set and a Default entry for the others (the plans revalidate at their next run, since
// every insert moves the context's generation).
class ChoiceSet {
 public:
  ChoiceSet(Context& ctx, std::vector<ResultEntry> tuned) : ctx_(ctx), tuned_(std::move(tuned)) {}
  size_t size() const { return tuned_.size(); }
  const ResultEntry& tuned(size_t i) const { return tuned_[i]; }

  void apply(const std::vector<bool>& on) {
    for (size_t i = 0; i < tuned_.size(); ++i) ctx_.results().insert(on[i] ? tuned_[i] : as_default(tuned_[i]));
  }
  static ResultEntry as_default(const ResultEntry& e) {
    ResultEntry d;
    d.op = e.op;
    d.params = e.params;
    d.solution = "Default";
    // Default's own time from the tuner's final measurement; a choice read from a file has
    // none, and then the dropped choice's time alone is what the time column can say.
    d.time_ms = e.default_ms > 0 ? e.default_ms : e.time_ms;
    return d;
  }

 private:
  Context& ctx_;
  std::vector<ResultEntry> tuned_;
};

}  // namespace

ChoiceVerdict judge_choice(const std::vector<double>& tuned_rounds, const std::vector<double>& default_rounds) {
  ChoiceVerdict v;
  std::vector<double> ratios;
  for (size_t r = 0; r < tuned_rounds.size() && r < default_rounds.size(); ++r)
    if (default_rounds[r] > 0 && std::isfinite(tuned_rounds[r])) ratios.push_back(tuned_rounds[r] / default_rounds[r]);
  v.rounds = int(ratios.size());
  if (ratios.empty()) return v;
  v.ratio = median(std::move(ratios));
  v.loses = v.ratio > 1.0;
  return v;
}

Status revert_to_default(Context& ctx, const ResultEntry& tuned, std::string note) {
  ResultEntry d = ChoiceSet::as_default(tuned);
  d.note = std::move(note);
  return ctx.store_result(std::move(d), /*replace=*/true);
}

std::string InContextReport::summary() const {
  if (choices == 0) return "no tuned choices to check (the workload runs Default everywhere)";
  return fmt::format("kept {} of {} tuned choices (whole workload, tuned / Default: {:.3f} before, {:.3f} after)", kept,
                     choices, ratio_before, ratio_after);
}

StatusOr<InContextReport> check_in_context(Context& ctx, const std::function<Status()>& workload,
                                           const InContextPolicy& policy, Timer* clock) {
  if (policy.rounds < 1) return Status::invalid_argument("in-context check: rounds must be at least 1");
  HostTimer host;
  Timer& t = clock ? *clock : host;
  InContextReport report;
  const double t_begin = t.now_ms();

  // 1. Learn the workload's problems from its dispatch decisions (touch() makes every plan
  //    decide again at its next run).
  ctx.start_recording_choices();
  ctx.results().touch();
  Status first = workload();
  auto used = ctx.stop_recording_choices();
  TUNABLEOP_RETURN_IF_ERROR(first);
  ++report.workload_runs;
  std::vector<ResultEntry> tuned;
  for (const auto& [op, params] : used)
    if (auto e = ctx.results().lookup(op, params); e && e->solution != "Default") tuned.push_back(*e);
  report.choices = report.kept = tuned.size();
  if (tuned.empty()) {
    report.elapsed_ms = t.now_ms() - t_begin;
    return report;
  }
  ChoiceSet set(ctx, std::move(tuned));
  const size_t n = set.size();
  const std::vector<bool> none(n, false);
  std::vector<bool> kept(n, true);

  // Workload time of `a` over `b`: per-round ratios (each round runs both, in an order that
  // alternates), their median. On a failure the tuned choices are put back.
  Status failed = Status::ok();
  auto compare = [&](const std::vector<bool>& a, const std::vector<bool>& b) -> double {
    const std::vector<bool>* sides[2] = {&a, &b};
    auto samples = interleaved_rounds(
        2, InterleavedRounds{policy.rounds, policy.rounds}, t,
        [&](size_t i) -> StatusOr<double> {
          set.apply(*sides[i]);
          t.start();
          Status st = workload();
          const double ms = t.stop_ms();
          ++report.workload_runs;
          if (!st.is_ok()) return st;
          return ms;
        },
        [&](size_t, const Status& st) {
          if (failed.is_ok()) failed = st;
        });
    return judge_choice(samples[0], samples[1]).ratio;
  };
  auto restore_tuned = [&] { set.apply(std::vector<bool>(n, true)); };

  // 2. The tuned set against Default.
  report.ratio_before = report.ratio_after = compare(kept, none);
  if (!failed.is_ok()) {
    restore_tuned();
    return failed;
  }
  if (report.ratio_before > 1.0) {
    // 3. Remove one choice at a time (a single choice was just measured against Default).
    const double t_choices = t.now_ms();
    for (size_t i = 0; n > 1 && i < n && t.now_ms() - t_choices < policy.budget_ms; ++i) {
      std::vector<bool> without = kept;
      without[i] = false;
      if (compare(without, kept) < 1.0) kept[i] = false;
      if (!failed.is_ok()) break;
    }
    // 4. What remains against Default (for one choice, step 2 said it); a set that still loses
    //    goes as a whole.
    if (failed.is_ok() && n > 1 && kept != none) report.ratio_after = compare(kept, none);
    if (failed.is_ok() && (n == 1 || kept == none || report.ratio_after > 1.0)) {
      kept = none;
      report.ratio_after = 1.0;
    }
    if (!failed.is_ok()) {
      restore_tuned();
      return failed;
    }
  }

  // 5. Leave the decision in force; record the dropped choices.
  set.apply(kept);
  report.kept = 0;
  for (size_t i = 0; i < n; ++i) {
    if (kept[i]) {
      ++report.kept;
      continue;
    }
    report.dropped.push_back(set.tuned(i));
    if (!policy.write) continue;
    TUNABLEOP_RETURN_IF_ERROR(revert_to_default(
        ctx, set.tuned(i),
        fmt::format("in-context check: {} lost in the whole workload (tuned / Default {:.3f}); Default kept (time "
                    "column: {})",
                    set.tuned(i).solution, report.ratio_before,
                    set.tuned(i).default_ms > 0 ? "Default's" : set.tuned(i).solution + " alone")));
  }
  report.elapsed_ms = t.now_ms() - t_begin;
  ctx.log().log(1, "in-context check: " + report.summary());
  return report;
}

}  // namespace tunableop

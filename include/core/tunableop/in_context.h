// The in-context check (issue 10). Tuning times every candidate alone, back to back on one
// problem; a program runs its problems one after another, where the previous call's library
// threads may still spin on the cores, caches hold the previous call's data, and a library's
// first call after another's pays for waking its own pool. A choice that won alone can lose
// there. So after a workload was tuned, the whole workload is timed with the tuned choices
// against Default, interleaved, and the choices that lose in context are dropped: Default takes
// their place in memory and in the results file (a replacing line, with a note in the `.stats`
// sidecar saying what was dropped and why).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tunableop/context.h"
#include "tunableop/results.h"
#include "tunableop/status.h"
#include "tunableop/timer.h"

namespace tunableop {

struct InContextPolicy {
  // Interleaved rounds per comparison; each round runs both sides once and gives one ratio, and
  // a comparison is the median of its rounds' ratios (drift in the machine's state cancels).
  int rounds = 5;
  // Wall time for the per-choice checks that run when the tuned set loses as a whole; the
  // first and the last comparison (tuned set against Default) always run.
  double budget_ms = 30000;
  // Record dropped choices in the results file (off: memory only, e.g. for a dry run).
  bool write = true;
};

struct InContextReport {
  size_t choices = 0;       // non-Default choices the workload used
  size_t kept = 0;          // of which kept
  double ratio_before = 1;  // workload time, tuned choices / Default (below 1: tuned is faster)
  double ratio_after = 1;   // the same with the kept choices only
  int workload_runs = 0;
  double elapsed_ms = 0;
  std::vector<ResultEntry> dropped;  // as they were tuned (solution: the dropped candidate)
  // "kept 3 of 5 tuned choices (whole workload, tuned / Default: 1.043 before, 0.991 after)"
  std::string summary() const;
};

// Runs `workload` (which must dispatch through `ctx` with its results enabled, and finish its
// work before returning: the check times it on `clock`, the host clock when null) about
// 2 x rounds x (2 + choices) times at most, and leaves ctx's results with the kept choices. What
// the workload uses is learned from the dispatch decisions of its first run. The workload's
// problems must already be tuned (a run that tunes would be timed as the workload).
//   1. tuned set against Default: when tuned is not slower, everything is kept;
//   2. otherwise each choice in turn (while the budget lasts) is removed from the kept set and
//      stays removed when the workload ran faster without it;
//   3. the kept set against Default once more: when it still loses, every choice is dropped.
StatusOr<InContextReport> check_in_context(Context& ctx, const std::function<Status()>& workload,
                                           const InContextPolicy& policy = {}, Timer* clock = nullptr);

// --- The post-decision guard's two pieces (issue 31), for callers that measure a workload their
//     own way (`bench --suite` times every candidate of a shape, interleaved, under the load that
//     measurement puts on the device) and for the check above.

// A tuned choice against Default in a workload's own measurement, round by round (each round
// timed both in the same machine state): the median of the per-round ratios tuned / Default.
// The choice loses when that median is above 1: where it runs, it is slower than Default.
struct ChoiceVerdict {
  int rounds = 0;    // paired rounds (0: nothing to compare, the choice is kept)
  double ratio = 1;  // median over rounds of tuned / Default
  bool loses = false;
};
ChoiceVerdict judge_choice(const std::vector<double>& tuned_rounds, const std::vector<double>& default_rounds);

// Puts Default in force for `tuned`'s problem, in memory and in the results file: one replacing
// line `op,params,Default,<time>` (the later line wins on load; no other entry is touched) whose
// time is Default's (tuned.default_ms, else the tuned time), and `note` in the `.stats` sidecar.
Status revert_to_default(Context& ctx, const ResultEntry& tuned, std::string note);

}  // namespace tunableop

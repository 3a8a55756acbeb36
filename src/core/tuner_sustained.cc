// Sustained timing (docs/design.md, "Sustained timing"): a GPU that runs large calls back to back
// reaches its power cap and lowers its clock (an H100 held 1710-1725 MHz under a long graph
// replay of 0.9 ms prefills against 1980 MHz in short bursts: docs/results/attention, stage 12).
// A kernel that wins at the boost clock may lose at the cap, and a workload of such calls runs
// at the cap. So for those problems the final rounds count only after the finalists ran back to
// back long enough for the clock to settle; the clock and power of the rounds are recorded.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/tuning_session.h"

namespace tunableop {

namespace {

// The median of the readings that know a value (0 when none does).
double median_known(const std::vector<DeviceClock>& v, double DeviceClock::*field) {
  std::vector<double> known;
  for (const DeviceClock& c : v)
    if (c.*field > 0 && std::isfinite(c.*field)) known.push_back(c.*field);
  return median(std::move(known));
}

std::string describe(const DeviceClock& c) {
  if (!c.known()) return "clock unknown (no NVML)";
  std::string s = fmt::format("SM {:.0f} MHz", c.sm_mhz);
  if (c.power_w > 0) s += fmt::format(", {:.0f} W", c.power_w);
  if (c.limited) s += ", at a power or thermal limit";
  return s;
}

}  // namespace

DeviceClock median_clock(const std::vector<DeviceClock>& readings) {
  DeviceClock m;
  m.sm_mhz = median_known(readings, &DeviceClock::sm_mhz);
  m.power_w = median_known(readings, &DeviceClock::power_w);
  size_t limited = 0;
  for (const DeviceClock& c : readings) limited += c.limited ? 1 : 0;
  m.limited = 2 * limited > readings.size();
  return m;
}

bool TuningSession::sustained(const CandidateState& def) {
  return pr_.timer().slows_under_load() && pol_.sustained_heat_ms > 0 && def.estimate_ms > 0 &&
         def.estimate_ms >= pol_.sustained_min_call_ms;
}

double TuningSession::heat(size_t finalists, double default_ms, const std::function<bool(size_t)>& sample) {
  // Right after a sustained re-measurement (decide()'s re-check of a big win) the device is
  // still as hot as it was: no second heat.
  const double t0 = elapsed_ms();
  if (t0 - hot_until_ms_ < kStillHotMs) return 0;
  // Within the problem's budget too: what is left of max_problem_ms bounds the heat.
  const double budget = std::min(pol_.sustained_heat_ms, std::max(0.0, pol_.max_problem_ms - t0));
  Timer& t = pr_.timer();
  const DeviceClock before = t.device_clock();
  DeviceClock prev = before;
  int rounds = 0;
  bool settled = false;
  // The finalists in turn, the first mover rotating, as the counted rounds run them: the clock
  // settles where a workload mixing these calls holds it.
  while (!settled && elapsed_ms() - t0 < budget) {
    for (size_t k = 0; k < finalists; ++k)
      if (!sample((k + size_t(rounds)) % finalists)) return elapsed_ms() - t0;  // Default failed
    ++rounds;
    const DeviceClock now = t.device_clock();
    // A limit reported, and the clock no longer falling (within 1% of the last reading): the
    // device is where sustained load keeps it.
    settled = now.limited && prev.known() && now.sm_mhz >= kSettledClock * prev.sm_mhz;
    prev = now;
  }
  const double spent = elapsed_ms() - t0;
  log_.log(2, fmt::format("├──sustained final rounds (Default {:.4g} ms a call >= {} ms): heated {:.0f} ms in {} "
                          "round{}, until {}: {} -> {}",
                          default_ms, pol_.sustained_min_call_ms, spent, rounds, rounds == 1 ? "" : "s",
                          settled ? "the clock settled at a limit" : "the heat budget ran out", describe(before),
                          describe(prev)));
  return spent;
}

}  // namespace tunableop

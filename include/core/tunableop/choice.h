// What a context decides for one problem, and why (Context::decide): the one place a solution
// is chosen. Plans (tunableop/op.h) keep the answer per problem; every caller that serves calls
// (the plain op call, the interposer, the engine, the all-reduce) reads it from there.
#pragma once

#include <cstdint>
#include <string>

namespace tunableop {

enum class ChoiceSource : uint8_t {
  kDisabled,      // TunableOp is off: Default
  kStored,        // a result of the store (loaded from the results file, or tuned earlier)
  kTuned,         // tuned just now
  kNotTuned,      // no result, tuning off: Default (recorded in the untuned file when asked)
  kDeferred,      // no result, and tuning may not run now (a CUDA graph is being captured):
                  // Default for now; tuned at the first decision outside a capture
  kTuningFailed,  // tuning could not run or failed: Default (tried once per process)
  kDidNotFit,     // its tuning copies did not fit the memory free: Default (tried once per
                  // process, recorded in the untuned file for `tunableop tune`)
};
const char* choice_source_name(ChoiceSource s);  // "stored", "tuned", ...

struct Choice {
  std::string solution = "Default";
  ChoiceSource source = ChoiceSource::kNotTuned;
  // A result stands behind the solution (stored or just tuned), as opposed to Default by rule.
  bool has_result() const { return source == ChoiceSource::kStored || source == ChoiceSource::kTuned; }
};

}  // namespace tunableop

// One way to compute attention (stage 1 of issue 12: the kernels before the tunable op). The
// shape mirrors GemmCandidate so that the op framework can take these lists over unchanged.
#pragma once

#include <functional>
#include <string>

#include "ops/attention/params.h"
#include "tunableop/device.h"

namespace tunableop {

struct AttentionCandidate {
  std::string name;  // stable and self-describing (tile shape, warps, stages, splits)
  DeviceKind device = DeviceKind::kCpu;
  int min_effort = 0;  // offered when the policy's search effort is at least this
  std::function<Status(const AttentionParams&)> supports;
  std::function<Status(const AttentionParams&, const AttentionOperands&)> run;
  std::function<size_t(const AttentionParams&)> workspace_bytes;  // optional
};

}  // namespace tunableop

// One way to compute attention: AttentionCandidate = Candidate<AttentionOp> (tunableop/op.h),
// declared with the op in the public header.
#pragma once

#include "tunableop/attention.h"
#include "tunableop/device.h"

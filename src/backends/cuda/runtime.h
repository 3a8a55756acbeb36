// The CUDA DeviceRuntime: device memory, copies, CUDA-event timers and error recovery, all on
// the current CUDA device (a context is bound to one ordinal; the caller makes it current).
#pragma once

#include <cuda_runtime.h>

#include <functional>

#include "cuda_common/event_timer.h"  // EventTimer: the tuner's clock on a CUDA stream
#include "tunableop/registry.h"
#include "tunableop/timer.h"

namespace tunableop::cuda {

DeviceRuntime make_cuda_runtime();

// Captures `body` on `stream` once, replays the graph (one warm-up, then 5 samples of 10
// replays timed with events) and returns the median milliseconds per replay: DeviceRuntime::
// replay_ms on CUDA, and the attention lab's graph column.
StatusOr<double> replay_graph_ms(const std::function<Status()>& body, cudaStream_t stream);

// Clears a recoverable error; a sticky one (illegal address, ...) cannot be cleared inside the
// process and is reported as such.
Status recover_device();

}  // namespace tunableop::cuda

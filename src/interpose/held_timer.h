// The GPU clock the interposer tunes with: CUDA events, but each timed region is held back on
// the device until the host has queued all of it.
//
// Why: the ordinary event timer records "start" on an idle stream, so the region includes the
// host time to launch the first run. cuBLAS spends ~5-10 us of host time per call (its
// heuristic), our own kernels ~2-3 us: on a 36 us GEMM that is a 10% head start for a cheap
// launch, which the program never sees when it replays a CUDA graph or keeps its stream busy
// (measured: llama2-7b.down@8 tuned away from cuBLAS by the tuner, 4.4% slower than cuBLAS in
// PyTorch's graph replay). Held, the region is device time only: what the program gets.
#pragma once

#include <memory>

#include "tunableop/tuner.h"

namespace tunableop::interpose {

// `problem` with its timer replaced by the held one on `stream` (a cudaStream_t); `problem`
// unchanged when the held timer cannot be made (its pinned flag cannot be allocated).
std::unique_ptr<TuningProblem> with_held_timer(std::unique_ptr<TuningProblem> problem, void* stream);

}  // namespace tunableop::interpose

// The GPU clock the interposer tunes with: CUDA events, but each timed region is held back on
// the device until the host has queued all of it.
//
// Why: the ordinary event timer records "start" on an idle stream, so the region includes the
// host time to launch the first run. cublasGemmEx spends 7-12 us of host time per call on the
// H100 machine (its heuristic), a served GEMV 3.5-5 us: on a 36 us GEMM a head start of 10% or
// more for a cheap launch, which the program never sees when it replays a CUDA graph or keeps
// its stream busy (the suspected cause of llama2-7b.down@8 being tuned away from cuBLAS, then
// 4.4% slower than cuBLAS in PyTorch's graph replay). Held, the region is device time only.
#pragma once

#include <memory>

#include "tunableop/tuner.h"

namespace tunableop::interpose {

// `problem` with its timer replaced by the held one on `stream` (a cudaStream_t); `problem`
// unchanged when the held timer cannot be made (its pinned flag cannot be allocated).
std::unique_ptr<TuningProblem> with_held_timer(std::unique_ptr<TuningProblem> problem, void* stream);

}  // namespace tunableop::interpose

// The few CUDA facts the serve path needs, behind plain functions so that serve.cc builds
// without CUDA (these are no-ops there).
#pragma once

#include <cstddef>

namespace tunableop::interpose::gpu {

// True while `stream` captures a CUDA graph. An error from the query (the legacy stream while
// another stream captures in global mode) also counts as capturing: the safe answer.
bool stream_capturing(void* stream);
// Whether this thread has our cuBLAS/cuBLASLt handles on `ordinal` (made outside a capture).
bool thread_ready(int ordinal);
// Makes them (never while capturing: creating a handle allocates device memory).
void make_thread_ready(int ordinal);
// Clears an error our own CUDA calls left (the serve path runs only when none was pending).
void clear_our_error();
// cudaMalloc / never freed (graph workspace blocks).
void* device_alloc(size_t bytes);
// CUBLAS_STATUS_EXECUTION_FAILED, for a served call that failed after writing part of C.
int execution_failed_status();

}  // namespace tunableop::interpose::gpu

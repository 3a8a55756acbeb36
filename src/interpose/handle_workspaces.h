// The workspace a program gave each cuBLAS handle. cuBLAS has a setter (cublasSetWorkspace) and
// no getter, yet a served call should use the program's workspace: memory it owns and keeps alive
// for that handle and stream, also across CUDA graph replays (PyTorch sets one per handle and
// stream before each call). So the setters are hooked and the last value per handle kept here:
// a fixed lock-free table (a process has few handles; a full table just means "unknown").
#pragma once

#include <cstddef>

namespace tunableop::interpose::preload::handle_workspaces {

void set(const void* handle, void* ptr, size_t bytes);
// cublasSetStream: cuBLAS falls back to its default workspace pool, which we cannot use.
void reset(const void* handle);
void forget(const void* handle);  // cublasDestroy
// The workspace set on `handle`; false (and 0 bytes) when none is known.
bool get(const void* handle, void** ptr, size_t* bytes);
void clear_all();  // in a forked child

}  // namespace tunableop::interpose::preload::handle_workspaces

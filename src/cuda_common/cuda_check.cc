#include "cuda_common/cuda_check.h"

#include <string>

namespace tunableop::cuda {

namespace {
std::string describe(cudaError_t err) {
  return std::string(cudaGetErrorString(err)) + " (" + cudaGetErrorName(err) + ")";
}
}  // namespace

Status cuda_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::ok();
  return Status::device_error(std::string(what) + ": " + describe(err));
}

Status check_launch(const char* kernel_name) {
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return Status::ok();
  return Status::device_error(std::string("launch of ") + kernel_name + ": " + describe(err));
}

}  // namespace tunableop::cuda

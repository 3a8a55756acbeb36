// cuBLAS GEMM calls -> our GEMM problem, exactly, or the reason why not. Pure functions of the
// call and the handle's state, so they are tested without a GPU.
#pragma once

#include "interpose/abi.h"
#include "tunableop/gemm.h"

namespace tunableop::interpose {

// What the handle says (read through the program's own cuBLAS).
struct HandleState {
  void* stream = nullptr;
  int pointer_mode = 0;  // cublasPointerMode_t
  int math_mode = 0;     // cublasMath_t, flags included
  int sm_count_target = 0;
};

// Reason::kServed means "mapped". `allow_tf32` is TUNABLEOP_ALLOW_TF32: fp32 may use tf32 when
// it or the handle's math mode (CUBLAS_TF32_TENSOR_OP_MATH) or the compute type allows it.
Reason map_cublas_call(const CublasCall& call, const HandleState& h, bool allow_tf32, GemmParams* p, GemmOperands* ops);

// The dtype of a cudaDataType (R_32F, R_64F, R_16BF, R_16F); false for any other.
bool dtype_of(int cuda_data_type, DType* out);

}  // namespace tunableop::interpose

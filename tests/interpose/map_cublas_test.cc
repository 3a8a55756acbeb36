// cuBLAS GEMM calls -> our GEMM problem: what maps (and to which problem), and every reason a
// call is passed through. Pure functions: no GPU needed.
#include "interpose/map_cublas.h"

#include <cublas_api.h>
#include <gtest/gtest.h>

namespace tunableop::interpose {
namespace {

struct CublasCase {
  float alpha = 1, beta = 0;
  double alpha64 = 1, beta64 = 0;
  float a[4], b[4], c[4];
  CublasCall call;
  HandleState h;
  GemmParams p;
  GemmOperands ops;

  // bf16 "tn" as PyTorch's F.linear(x[8, 64], W[32, 64]) issues it.
  CublasCase() {
    call.api = Api::kCublasGemmEx;
    call.transa = CUBLAS_OP_T;
    call.transb = CUBLAS_OP_N;
    call.m = 32;
    call.n = 8;
    call.k = 64;
    call.alpha = &alpha;
    call.beta = &beta;
    call.a = a;
    call.b = b;
    call.c = c;
    call.a_type = call.b_type = call.c_type = CUDA_R_16BF;
    call.lda = 64;
    call.ldb = 64;
    call.ldc = 32;
    call.compute_type = CUBLAS_COMPUTE_32F;
    h.stream = reinterpret_cast<void*>(0x1234);
  }
  void as(int type, int compute) {
    call.a_type = call.b_type = call.c_type = type;
    call.compute_type = compute;
    if (type == CUDA_R_64F) {
      call.alpha = &alpha64;
      call.beta = &beta64;
    }
  }
  Reason map(bool allow_tf32 = false) { return map_cublas_call(call, h, allow_tf32, &p, &ops); }
};

TEST(MapCublasCall, GemmExIsTheSameColumnMajorProblem) {
  CublasCase t;
  t.beta = 0.5f;
  ASSERT_EQ(t.map(), Reason::kServed);
  EXPECT_EQ(gemm_op_signature(t.p), "GemmTunableOp_BFloat16_TN");
  EXPECT_EQ(gemm_params_signature(t.p), "tn_32_8_64");
  EXPECT_EQ(t.p.beta, 0.5);
  EXPECT_EQ(t.ops.a, t.a);
  EXPECT_EQ(t.ops.b, t.b);
  EXPECT_EQ(t.ops.c, t.c);
  EXPECT_EQ(t.ops.stream, t.h.stream);
  EXPECT_FALSE(t.p.allow_tf32);
}

TEST(MapCublasCall, Tf32OnlyWithTheHandlesOrTheUsersConsent) {
  CublasCase t;
  t.as(CUDA_R_32F, CUBLAS_COMPUTE_32F);
  ASSERT_EQ(t.map(), Reason::kServed);
  EXPECT_FALSE(t.p.allow_tf32);
  EXPECT_EQ(t.map(/*allow_tf32=*/true), Reason::kServed);
  EXPECT_TRUE(t.p.allow_tf32);
  t.h.math_mode = CUBLAS_TF32_TENSOR_OP_MATH;
  ASSERT_EQ(t.map(), Reason::kServed);
  EXPECT_TRUE(t.p.allow_tf32);
  EXPECT_EQ(gemm_op_signature(t.p), "GemmTunableOp_float_tf32_TN");
  t.h.math_mode = CUBLAS_DEFAULT_MATH;
  t.call.compute_type = CUBLAS_COMPUTE_32F_FAST_TF32;
  ASSERT_EQ(t.map(), Reason::kServed);
  EXPECT_TRUE(t.p.allow_tf32);
  // bf16 data never carries the tf32 flag.
  CublasCase b;
  b.h.math_mode = CUBLAS_TF32_TENSOR_OP_MATH;
  ASSERT_EQ(b.map(true), Reason::kServed);
  EXPECT_FALSE(b.p.allow_tf32);
}

TEST(MapCublasCall, StridedBatchesKeepTheirStridesAndRefuseBroadcast) {
  CublasCase t;
  t.call.strided = true;
  t.call.batch = 3;
  t.call.stride_a = 64 * 32;
  t.call.stride_b = 64 * 8 + 16;
  t.call.stride_c = 32 * 8;
  ASSERT_EQ(t.map(), Reason::kServed);
  EXPECT_EQ(t.p.batch, 3);
  EXPECT_EQ(t.p.stride_b, 64 * 8 + 16);
  t.call.stride_a = 0;  // one A for every batch
  EXPECT_EQ(t.map(), Reason::kBroadcastStride);
  t.call.stride_a = 64 * 32;
  t.call.batch = 0;
  EXPECT_EQ(t.map(), Reason::kTrivial);
  t.call.batch = 1;  // strides do not matter for one matrix
  t.call.stride_c = 0;
  EXPECT_EQ(t.map(), Reason::kServed);
  EXPECT_EQ(t.p.batch, 1);
}

TEST(MapCublasCall, EveryCallWeCannotReproducePassesThroughWithItsReason) {
  auto reason = [](auto change) {
    CublasCase t;
    change(t);
    return t.map();
  };
  EXPECT_EQ(reason([](CublasCase& t) { t.as(CUDA_R_16F, CUBLAS_COMPUTE_16F); }), Reason::kComputeType);  // Hgemm
  EXPECT_EQ(reason([](CublasCase& t) { t.as(CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_16F); }), Reason::kComputeType);
  EXPECT_EQ(reason([](CublasCase& t) { t.as(CUDA_R_32F, CUBLAS_COMPUTE_32F_PEDANTIC); }), Reason::kComputeType);
  EXPECT_EQ(reason([](CublasCase& t) { t.as(CUDA_R_64F, CUBLAS_COMPUTE_32F); }), Reason::kComputeType);
  EXPECT_EQ(reason([](CublasCase& t) { t.h.math_mode = CUBLAS_PEDANTIC_MATH; }), Reason::kMathMode);
  EXPECT_EQ(reason([](CublasCase& t) { t.h.math_mode = CUBLAS_TENSOR_OP_MATH; }), Reason::kMathMode);
  EXPECT_EQ(reason([](CublasCase& t) { t.h.math_mode = CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION; }),
            Reason::kMathMode);
  EXPECT_EQ(reason([](CublasCase& t) {
              t.as(CUDA_R_32F, CUBLAS_COMPUTE_32F);  // the flag is about 16-bit data only
              t.h.math_mode = CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
            }),
            Reason::kServed);
  EXPECT_EQ(reason([](CublasCase& t) { t.h.pointer_mode = CUBLAS_POINTER_MODE_DEVICE; }), Reason::kDevicePointerMode);
  EXPECT_EQ(reason([](CublasCase& t) { t.h.sm_count_target = 66; }), Reason::kSmCountTarget);
  EXPECT_EQ(reason([](CublasCase& t) { t.call.c_type = CUDA_R_32F; }), Reason::kDataType);
  EXPECT_EQ(reason([](CublasCase& t) { t.call.a_type = t.call.b_type = t.call.c_type = CUDA_R_8F_E4M3; }),
            Reason::kDataType);
  EXPECT_EQ(reason([](CublasCase& t) { t.call.a_type = t.call.b_type = t.call.c_type = CUDA_C_32F; }),
            Reason::kDataType);
  EXPECT_EQ(reason([](CublasCase& t) { t.alpha = 0; }), Reason::kTrivial);
  EXPECT_EQ(reason([](CublasCase& t) { t.call.k = 0; }), Reason::kTrivial);
  EXPECT_EQ(reason([](CublasCase& t) { t.call.n = 0; }), Reason::kTrivial);
  EXPECT_EQ(reason([](CublasCase& t) { t.call.lda = 63; }), Reason::kInvalidArguments);
  EXPECT_EQ(reason([](CublasCase& t) { t.call.m = -1; }), Reason::kInvalidArguments);
  EXPECT_EQ(reason([](CublasCase& t) { t.call.transa = CUBLAS_OP_CONJG; }), Reason::kInvalidArguments);
  EXPECT_EQ(reason([](CublasCase& t) { t.call.alpha = nullptr; }), Reason::kInvalidArguments);
  // Real data: the conjugate transpose is the transpose.
  CublasCase c;
  c.call.transa = CUBLAS_OP_C;
  ASSERT_EQ(c.map(), Reason::kServed);
  EXPECT_EQ(c.p.transa, 'T');
}

TEST(MapCublasCall, Fp64ReadsDoubleScalars) {
  CublasCase t;
  t.as(CUDA_R_64F, CUBLAS_COMPUTE_64F);
  t.alpha64 = -2.5;
  t.beta64 = 0.25;
  ASSERT_EQ(t.map(), Reason::kServed);
  EXPECT_EQ(t.p.alpha, -2.5);
  EXPECT_EQ(t.p.beta, 0.25);
  EXPECT_EQ(gemm_op_signature(t.p), "GemmTunableOp_double_TN");
}

}  // namespace
}  // namespace tunableop::interpose

#include "interpose/map_cublas.h"

#include <cublas_api.h>

namespace tunableop::interpose {

bool dtype_of(int t, DType* out) {
  switch (t) {
    case CUDA_R_32F: *out = DType::kF32; return true;
    case CUDA_R_64F: *out = DType::kF64; return true;
    case CUDA_R_16BF: *out = DType::kBF16; return true;
    case CUDA_R_16F: *out = DType::kF16; return true;
    default: return false;
  }
}

namespace {

char trans_letter(int op) {
  switch (op) {
    case CUBLAS_OP_N: return 'N';
    case CUBLAS_OP_T:
    case CUBLAS_OP_C: return 'T';  // real data: the conjugate transpose is the transpose
    default: return 0;             // CUBLAS_OP_CONJG and unknown values
  }
}

}  // namespace

Reason map_cublas_call(const CublasCall& c, const HandleState& h, bool allow_tf32, GemmParams* p, GemmOperands* ops) {
  DType dt;
  if (!dtype_of(c.a_type, &dt) || c.b_type != c.a_type || c.c_type != c.a_type) return Reason::kDataType;
  bool tf32 = false;
  switch (c.compute_type) {
    case CUBLAS_COMPUTE_32F:
      if (dt == DType::kF64) return Reason::kComputeType;
      tf32 = dt == DType::kF32 && (allow_tf32 || (h.math_mode & 0xf) == CUBLAS_TF32_TENSOR_OP_MATH);
      break;
    case CUBLAS_COMPUTE_32F_FAST_TF32:
      if (dt != DType::kF32) return Reason::kComputeType;
      tf32 = true;
      break;
    case CUBLAS_COMPUTE_64F:
      if (dt != DType::kF64) return Reason::kComputeType;
      break;
    default: return Reason::kComputeType;  // 16F accumulation (Hgemm), pedantic, fast-16F/16BF, emulated, int
  }
  // Math modes: default and tf32 are reproduced; pedantic, emulation and the deprecated tensor-op
  // mode (fp16 down-conversion) are not, nor "no reduced-precision reduction" for 16-bit data
  // (our split-K candidates may reduce in the output type).
  const int base = h.math_mode & 0xf;
  if (base != CUBLAS_DEFAULT_MATH && base != CUBLAS_TF32_TENSOR_OP_MATH) return Reason::kMathMode;
  if ((h.math_mode & CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION) && (dt == DType::kBF16 || dt == DType::kF16))
    return Reason::kMathMode;
  if (h.pointer_mode != CUBLAS_POINTER_MODE_HOST) return Reason::kDevicePointerMode;
  if (h.sm_count_target != 0) return Reason::kSmCountTarget;
  const char ta = trans_letter(c.transa), tb = trans_letter(c.transb);
  if (ta == 0 || tb == 0 || c.m < 0 || c.n < 0 || c.k < 0 || (c.strided && c.batch < 0))
    return Reason::kInvalidArguments;
  if (c.alpha == nullptr || c.beta == nullptr) return Reason::kInvalidArguments;
  double alpha, beta;
  if (dt == DType::kF64) {
    alpha = *static_cast<const double*>(c.alpha);
    beta = *static_cast<const double*>(c.beta);
  } else {
    alpha = *static_cast<const float*>(c.alpha);
    beta = *static_cast<const float*>(c.beta);
  }
  // cuBLAS returns at once for an empty C and only scales C when k or alpha is 0.
  if (c.m == 0 || c.n == 0 || c.k == 0 || alpha == 0.0 || (c.strided && c.batch == 0)) return Reason::kTrivial;
  if (c.a == nullptr || c.b == nullptr || c.c == nullptr) return Reason::kInvalidArguments;
  GemmParams q;
  q.dtype = dt;
  q.allow_tf32 = tf32;
  q.transa = ta;
  q.transb = tb;
  q.m = c.m;
  q.n = c.n;
  q.k = c.k;
  q.lda = c.lda;
  q.ldb = c.ldb;
  q.ldc = c.ldc;
  q.alpha = alpha;
  q.beta = beta;
  if (c.strided && c.batch > 1) {
    // A stride of 0 reuses one matrix for every batch: our params read 0 as "dense".
    if (c.stride_a <= 0 || c.stride_b <= 0 || c.stride_c <= 0) return Reason::kBroadcastStride;
    q.batch = c.batch;
    q.stride_a = c.stride_a;
    q.stride_b = c.stride_b;
    q.stride_c = c.stride_c;
  }
  if (q.lda < 1 || q.ldb < 1 || q.ldc < 1) return Reason::kInvalidArguments;
  q = q.with_defaults();
  if (!q.validate().is_ok()) return Reason::kInvalidArguments;
  *p = q;
  *ops = GemmOperands{c.a, c.b, c.c, h.stream};
  return Reason::kServed;
}

}  // namespace tunableop::interpose

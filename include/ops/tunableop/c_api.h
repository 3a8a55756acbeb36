/* tunableop's C ABI: contexts, GEMM plans and the plain GEMM call, for programs that cannot call
 * C++ (C, Rust, Julia, ...). The same library, decisions and results files as the C++ API
 * (tunableop/gemm.h): a plan is validated once and run many times; a run serves the tuned
 * solution, tunes a miss when tuning is on, or runs Default.
 *
 * Every call that can fail returns a tunableop_status; TUNABLEOP_OK is 0. The message of the
 * last failure on the calling thread (it names the bad argument) stays readable through
 * tunableop_last_error() until the thread's next failing call. No call aborts or throws.
 * Objects are opaque; each *_create has its *_destroy. A plan refers to its context, which must
 * outlive it. GEMM is column-major (BLAS convention): C = alpha op(A) op(B) + beta C.
 */
#ifndef TUNABLEOP_C_API_H
#define TUNABLEOP_C_API_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tunableop_status {
  TUNABLEOP_OK = 0,
  TUNABLEOP_UNSUPPORTED = 1,
  TUNABLEOP_INVALID_ARGUMENT = 2,
  TUNABLEOP_NOT_FOUND = 3,
  TUNABLEOP_IO_ERROR = 4,
  TUNABLEOP_PARSE_ERROR = 5,
  TUNABLEOP_NUMERICS_MISMATCH = 6,
  TUNABLEOP_DEVICE_ERROR = 7,
  TUNABLEOP_INTERNAL = 8,
  TUNABLEOP_RESOURCE_EXHAUSTED = 9,
  TUNABLEOP_UNAVAILABLE = 10
} tunableop_status;

typedef enum tunableop_dtype {
  TUNABLEOP_F32 = 0,
  TUNABLEOP_F64 = 1,
  TUNABLEOP_BF16 = 2,
  TUNABLEOP_F16 = 3
} tunableop_dtype;

typedef enum tunableop_device_kind { TUNABLEOP_DEVICE_CPU = 0, TUNABLEOP_DEVICE_CUDA = 1 } tunableop_device_kind;

typedef struct tunableop_context tunableop_context;
typedef struct tunableop_gemm_plan tunableop_gemm_plan;

/* One GEMM problem; tunableop_gemm_params_init fills the defaults (fp32, 'N', alpha 1, beta 0,
 * batch 1, dense leading dimensions and strides, no TF32). A leading dimension or stride of 0
 * means dense. */
typedef struct tunableop_gemm_params {
  tunableop_dtype dtype;     /* of A and B, and of C unless out_dtype says otherwise */
  tunableop_dtype out_dtype; /* C's: dtype, or TUNABLEOP_F32 for bf16/fp16 inputs */
  char transa, transb;       /* 'N' or 'T' */
  int64_t m, n, k;
  int64_t lda, ldb, ldc;
  double alpha, beta;
  int64_t batch;
  int64_t stride_a, stride_b, stride_c;
  int allow_tf32; /* CUDA fp32 only: permission to use TF32 tensor cores */
} tunableop_gemm_params;

void tunableop_gemm_params_init(tunableop_gemm_params* p);

/* A context for one device with every backend of the build; it reads the TUNABLEOP_* and
 * PYTORCH_TUNABLEOP_* environment once, now. */
tunableop_status tunableop_context_create(tunableop_device_kind kind, int ordinal, tunableop_context** out);
void tunableop_context_destroy(tunableop_context* ctx);
/* Sets a setting by its environment name with or without the prefix ("TUNING",
 * "TUNABLEOP_FILENAME", ...) from its text form ("1", "results%d.csv", ...). */
tunableop_status tunableop_context_set(tunableop_context* ctx, const char* setting, const char* value);

/* The plain call: normalizes and validates p, then runs the problem's decision. `stream` is a
 * cudaStream_t on CUDA (NULL: the default stream), ignored on the CPU. */
tunableop_status tunableop_gemm(tunableop_context* ctx, const tunableop_gemm_params* p, const void* a, const void* b,
                                void* c, void* stream);

tunableop_status tunableop_gemm_plan_create(tunableop_context* ctx, const tunableop_gemm_params* p,
                                            tunableop_gemm_plan** out);
tunableop_status tunableop_gemm_plan_run(const tunableop_gemm_plan* plan, const void* a, const void* b, void* c,
                                         void* stream);
/* The solution the plan runs now ("" before its first run decided), valid until the plan's next
 * run or destruction. */
const char* tunableop_gemm_plan_solution(tunableop_gemm_plan* plan);
void tunableop_gemm_plan_destroy(tunableop_gemm_plan* plan);

/* "ok", "invalid argument", ... (never NULL). */
const char* tunableop_status_string(tunableop_status status);
/* The calling thread's last failure message ("" when none). */
const char* tunableop_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* TUNABLEOP_C_API_H */

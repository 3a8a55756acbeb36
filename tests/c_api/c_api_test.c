/* The C ABI (tunableop/c_api.h) from C: a tuned fp32 GEMM with leading-dimension gaps through a
 * plan and the plain call, a bf16 x bf16 -> fp32 GEMM, and the errors a C caller sees (status
 * codes, their strings, the message naming the bad argument). Exits non-zero on the first
 * failure, printing what failed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tunableop/c_api.h"

static int failures = 0;

#define CHECK(cond, ...)                                         \
  do {                                                           \
    if (!(cond)) {                                               \
      fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                              \
      fprintf(stderr, "\n");                                     \
      ++failures;                                                \
    }                                                            \
  } while (0)

#define CHECK_OK(call)                                                                                      \
  do {                                                                                                      \
    tunableop_status st_ = (call);                                                                          \
    CHECK(st_ == TUNABLEOP_OK, "%s: %s (%s)", #call, tunableop_status_string(st_), tunableop_last_error()); \
  } while (0)

static const float kSentinel = 12288.0f; /* outside C: must stay */
static const float kPoison = NAN;        /* inside C with beta 0: must be overwritten */

/* Small integers: exact in bf16, so bf16 inputs need no rounding by the test. */
static float value(int i) { return (float)((i * 7 + 3) % 11 - 5) * 0.25f; }

static unsigned short to_bf16(float f) {
  unsigned int u;
  memcpy(&u, &f, sizeof(u));
  return (unsigned short)(u >> 16);
}

/* C = alpha A B + beta C0 in double, column-major, A m x k (lda), B k x n (ldb). */
static double expected(int i, int j, int k, const float* a, int lda, const float* b, int ldb, double alpha, double beta,
                       const float* c0, int ldc) {
  double acc = 0;
  for (int l = 0; l < k; ++l) acc += (double)a[i + l * lda] * (double)b[l + j * ldb];
  return alpha * acc + (beta != 0 ? beta * (double)c0[i + j * ldc] : 0.0);
}

/* Checks c (m x n, ldc) against the reference and the gaps against the sentinel. */
static void check_c(const char* what, int m, int n, int k, const float* a, int lda, const float* b, int ldb,
                    double alpha, double beta, const float* c0, const float* c, int ldc) {
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < ldc; ++i) {
      const float got = c[i + j * ldc];
      if (i >= m) {
        CHECK(got == kSentinel, "%s: element (%d, %d) in the ld gap was written (%g)", what, i, j, got);
        continue;
      }
      const double want = expected(i, j, k, a, lda, b, ldb, alpha, beta, c0, ldc);
      CHECK(fabs(got - want) <= 1e-4 * (1 + fabs(want)), "%s: C(%d, %d) = %g, want %g", what, i, j, got, want);
    }
  }
}

static void fill(float* x, int n) {
  for (int i = 0; i < n; ++i) x[i] = value(i);
}

static void test_fp32_gemm(tunableop_context* ctx) {
  enum { m = 5, n = 7, k = 3, lda = 6, ldb = 4, ldc = 8 };
  float a[lda * k], b[ldb * n], c0[ldc * n], c[ldc * n];
  fill(a, lda * k);
  fill(b, ldb * n);
  for (int i = 0; i < ldc * n; ++i) c0[i] = (i % ldc) < m ? value(3 * i + 1) : kSentinel;
  tunableop_gemm_params p;
  tunableop_gemm_params_init(&p);
  p.m = m, p.n = n, p.k = k, p.lda = lda, p.ldb = ldb, p.ldc = ldc;
  p.alpha = 1.5, p.beta = 0.5;

  memcpy(c, c0, sizeof(c));
  CHECK_OK(tunableop_gemm(ctx, &p, a, b, c, NULL));
  check_c("tunableop_gemm", m, n, k, a, lda, b, ldb, 1.5, 0.5, c0, c, ldc);

  tunableop_gemm_plan* plan = NULL;
  CHECK_OK(tunableop_gemm_plan_create(ctx, &p, &plan));
  CHECK(plan != NULL, "no plan");
  for (int rep = 0; rep < 3 && plan; ++rep) {
    memcpy(c, c0, sizeof(c));
    CHECK_OK(tunableop_gemm_plan_run(plan, a, b, c, NULL));
    check_c("tunableop_gemm_plan_run", m, n, k, a, lda, b, ldb, 1.5, 0.5, c0, c, ldc);
  }
  CHECK(plan && strlen(tunableop_gemm_plan_solution(plan)) > 0, "a plan that ran names its solution");
  tunableop_gemm_plan_destroy(plan);

  /* beta 0 never reads C: NaN there must not survive. */
  p.beta = 0;
  for (int i = 0; i < ldc * n; ++i) c[i] = (i % ldc) < m ? kPoison : kSentinel;
  CHECK_OK(tunableop_gemm(ctx, &p, a, b, c, NULL));
  check_c("beta 0 over NaN", m, n, k, a, lda, b, ldb, 1.5, 0.0, c0, c, ldc);
}

static void test_bf16_in_fp32_out(tunableop_context* ctx) {
  enum { m = 9, n = 2, k = 17 };
  float af[m * k], bf[k * n], c[m * n];
  unsigned short a[m * k], b[k * n];
  fill(af, m * k);
  fill(bf, k * n);
  for (int i = 0; i < m * k; ++i) a[i] = to_bf16(af[i]);
  for (int i = 0; i < k * n; ++i) b[i] = to_bf16(bf[i]);
  for (int i = 0; i < m * n; ++i) c[i] = kPoison;
  tunableop_gemm_params p;
  tunableop_gemm_params_init(&p);
  p.dtype = TUNABLEOP_BF16;
  p.out_dtype = TUNABLEOP_F32;
  p.m = m, p.n = n, p.k = k;
  CHECK_OK(tunableop_gemm(ctx, &p, a, b, c, NULL));
  check_c("bf16 x bf16 -> fp32", m, n, k, af, m, bf, k, 1.0, 0.0, NULL, c, m);
}

static void test_errors(tunableop_context* ctx) {
  float x[16] = {0};
  tunableop_gemm_params p;
  tunableop_gemm_params_init(&p);
  p.m = p.n = p.k = 4;
  p.lda = 2;
  CHECK(tunableop_gemm(ctx, &p, x, x, x, NULL) == TUNABLEOP_INVALID_ARGUMENT, "lda < m is refused");
  CHECK(strstr(tunableop_last_error(), "lda") != NULL, "the message names lda: %s", tunableop_last_error());

  tunableop_gemm_params_init(&p);
  p.m = p.n = p.k = 4;
  p.dtype = (tunableop_dtype)99;
  CHECK(tunableop_gemm(ctx, &p, x, x, x, NULL) == TUNABLEOP_INVALID_ARGUMENT, "an unknown dtype is refused");
  CHECK(strstr(tunableop_last_error(), "dtype") != NULL, "the message names the dtype: %s", tunableop_last_error());

  tunableop_gemm_params_init(&p);
  p.m = p.n = p.k = 4;
  p.dtype = TUNABLEOP_F32;
  p.out_dtype = TUNABLEOP_BF16;
  CHECK(tunableop_gemm(ctx, &p, x, x, x, NULL) == TUNABLEOP_INVALID_ARGUMENT, "a narrower C is refused");

  tunableop_gemm_params_init(&p);
  p.m = p.n = p.k = 4;
  CHECK(tunableop_gemm(ctx, &p, x, x, NULL, NULL) == TUNABLEOP_INVALID_ARGUMENT, "a NULL C is refused");
  CHECK(tunableop_gemm(NULL, &p, x, x, x, NULL) == TUNABLEOP_INVALID_ARGUMENT, "a NULL context is refused");
  CHECK(tunableop_gemm(ctx, NULL, x, x, x, NULL) == TUNABLEOP_INVALID_ARGUMENT, "NULL params are refused");
  CHECK(tunableop_gemm_plan_run(NULL, x, x, x, NULL) == TUNABLEOP_INVALID_ARGUMENT, "a NULL plan is refused");

  tunableop_gemm_plan* plan = (tunableop_gemm_plan*)&p; /* must be overwritten */
  p.k = -1;
  CHECK(tunableop_gemm_plan_create(ctx, &p, &plan) == TUNABLEOP_INVALID_ARGUMENT, "k < 0 is refused");
  CHECK(plan == NULL, "a failed create leaves NULL");

  CHECK(tunableop_context_set(ctx, "NO_SUCH_SETTING", "1") == TUNABLEOP_INVALID_ARGUMENT, "unknown setting");
  CHECK(strstr(tunableop_last_error(), "NO_SUCH_SETTING") != NULL, "the message names it: %s", tunableop_last_error());
  CHECK(tunableop_context_set(ctx, "TUNABLEOP_MAX_TUNING_DURATION_MS", "soon") == TUNABLEOP_INVALID_ARGUMENT,
        "a bad value is refused");

  tunableop_context* none = (tunableop_context*)&p;
  CHECK(tunableop_context_create((tunableop_device_kind)7, 0, &none) == TUNABLEOP_INVALID_ARGUMENT,
        "an unknown device kind is refused");
  CHECK(none == NULL, "a failed create leaves NULL");

  CHECK(strcmp(tunableop_status_string(TUNABLEOP_OK), "ok") == 0, "ok");
  CHECK(strcmp(tunableop_status_string(TUNABLEOP_INVALID_ARGUMENT), "invalid argument") == 0, "invalid argument");
  CHECK(strcmp(tunableop_status_string((tunableop_status)1234), "unknown status") == 0, "unknown");
}

int main(void) {
  char results[128];
  snprintf(results, sizeof(results), "/tmp/tunableop-c-api-%ld-%%d.csv", (long)getpid());
  tunableop_context* ctx = NULL;
  CHECK_OK(tunableop_context_create(TUNABLEOP_DEVICE_CPU, 0, &ctx));
  if (!ctx) return 1;
  /* Tuning on, into a scratch file, with small budgets: the C caller gets tuned solutions. */
  CHECK_OK(tunableop_context_set(ctx, "ENABLED", "1"));
  CHECK_OK(tunableop_context_set(ctx, "TUNABLEOP_TUNING", "1"));
  CHECK_OK(tunableop_context_set(ctx, "FILENAME", results));
  CHECK_OK(tunableop_context_set(ctx, "MAX_TUNING_DURATION_MS", "5"));
  CHECK_OK(tunableop_context_set(ctx, "MAX_WARMUP_DURATION_MS", "1"));
  test_fp32_gemm(ctx);
  test_bf16_in_fp32_out(ctx);
  test_errors(ctx);
  tunableop_context_destroy(ctx);
  char path[160];
  snprintf(path, sizeof(path), "/tmp/tunableop-c-api-%ld-0.csv", (long)getpid());
  FILE* f = fopen(path, "r");
  CHECK(f != NULL, "the tuned results were written to %s", path);
  if (f) {
    char line[512];
    int entries = 0;
    while (fgets(line, sizeof(line), f))
      if (strncmp(line, "GemmTunableOp_", 14) == 0) ++entries;
    fclose(f);
    /* fp32 (one line for both betas: the file's key leaves beta out) and bf16 -> fp32 */
    CHECK(entries == 2, "two problems tuned, %d lines", entries);
  }
  remove(path);
  strncat(path, ".stats", sizeof(path) - strlen(path) - 1);
  remove(path);
  if (failures)
    fprintf(stderr, "%d failures\n", failures);
  else
    printf("C ABI: ok\n");
  return failures ? 1 : 0;
}

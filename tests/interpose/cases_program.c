/* Single interposer cases of the red-team pass (issue 33), each a mode of this C program, run by
 * cases_test.py plain and under the preload library:
 *
 *   interpose_cases_program invalid-order   cblas_sgemm with order 0 (neither 101 nor 102): the
 *                                           library rejects it (the reference CBLAS exits 255,
 *                                           others return with C untouched; finding 12)
 *   interpose_cases_program nan-first       a shape whose first call has NaN and Inf in A, then the
 *                                           same shape on finite data (finding 16)
 *   interpose_cases_program chdir DIR       a GEMM, chdir(DIR), a GEMM of another shape: both
 *                                           results belong to the file named before the chdir
 *                                           (finding 16)
 *   interpose_cases_program too-large       a small GEMM, then an address-space limit (RLIMIT_AS)
 *                                           that leaves room for the program's own calls but not
 *                                           for a tuning copy of a 256 MiB operand; then that
 *                                           GEMM twice: it must run (the program's library) and
 *                                           be correct, never be tuned (findings 2 and 3)
 * Each prints what it saw ("c_untouched=1", "finite_correct=1", ...) and exits 0 when its own
 * checks pass; the driver compares the plain and interposed runs and looks at the files. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

void cblas_sgemm(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);

enum { kColMajor = 102, kNoTrans = 111, kTrans = 112 };

static void fill(float* x, int n, unsigned seed) {
  for (int i = 0; i < n; ++i) {
    seed = seed * 1103515245u + 12345u;
    x[i] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
  }
}

/* max |C - A B| over max |A B|, column-major, no transposes. */
static double relative_error(int m, int n, int k, const float* a, const float* b, const float* c) {
  double err = 0, scale = 1e-30;
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      double s = 0;
      for (int l = 0; l < k; ++l) s += (double)a[i + l * m] * (double)b[l + j * k];
      double e = fabs(s - (double)c[i + j * m]);
      if (!(e <= err)) err = e; /* NaN sticks */
      if (fabs(s) > scale) scale = fabs(s);
    }
  return err / scale;
}

static int invalid_order(void) {
  float a[6 * 5], b[5 * 4], c[6 * 4];
  fill(a, 30, 1);
  fill(b, 20, 2);
  for (int i = 0; i < 24; ++i) c[i] = 7.0f;
  /* Order 0 is no CBLAS layout, and 'N', 'T' are no CBLAS transposes either: as a Fortran call
   * (order 0 was how the interposer marked those) it is a valid column-major product. */
  cblas_sgemm(0, 'N', 'T', 6, 4, 5, 1.0f, a, 6, b, 4, 0.0f, c, 6);
  int untouched = 1;
  for (int i = 0; i < 24; ++i) untouched &= c[i] == 7.0f;
  printf("c_untouched=%d\n", untouched);
  return untouched ? 0 : 1;
}

static int nan_first(void) {
  enum { M = 40, N = 24, K = 56 };
  static float a[M * K], b[K * N], c[M * N];
  fill(a, M * K, 3);
  fill(b, K * N, 4);
  a[5] = NAN;
  a[77] = INFINITY;
  cblas_sgemm(kColMajor, kNoTrans, kNoTrans, M, N, K, 1.0f, a, M, b, K, 0.0f, c, M);
  const int nan_seen = isnan(c[5]) || isinf(c[5]) || isnan(c[77 % M]);
  fill(a, M * K, 5);
  cblas_sgemm(kColMajor, kNoTrans, kNoTrans, M, N, K, 1.0f, a, M, b, K, 0.0f, c, M);
  const int correct = relative_error(M, N, K, a, b, c) < 1e-5;
  printf("nan_seen=%d finite_correct=%d\n", nan_seen, correct);
  return nan_seen && correct ? 0 : 1;
}

static int change_directory(const char* dir) {
  enum { M = 24, N = 16, K = 32 };
  static float a[M * K], b[K * N], c[M * N];
  fill(a, M * K, 6);
  fill(b, K * N, 7);
  cblas_sgemm(kColMajor, kNoTrans, kNoTrans, M, N, K, 1.0f, a, M, b, K, 0.0f, c, M);
  int correct = relative_error(M, N, K, a, b, c) < 1e-5;
  if (chdir(dir) != 0) {
    perror("chdir");
    return 1;
  }
  /* Another shape (K - 8): a second problem, tuned after the chdir. */
  cblas_sgemm(kColMajor, kNoTrans, kNoTrans, M, N, K - 8, 1.0f, a, M, b, K - 8, 0.0f, c, M);
  correct &= relative_error(M, N, K - 8, a, b, c) < 1e-5;
  printf("both_correct=%d\n", correct);
  return correct ? 0 : 1;
}

/* The address space in use now (bytes), from /proc/self/statm. */
static unsigned long long address_space_used(void) {
  unsigned long long pages = 0;
  FILE* f = fopen("/proc/self/statm", "r");
  if (f) {
    if (fscanf(f, "%llu", &pages) != 1) pages = 0;
    fclose(f);
  }
  return pages * (unsigned long long)sysconf(_SC_PAGESIZE);
}

static int too_large(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  /* A sanitizer's shadow memory is terabytes of address space: a limit above it means nothing. */
  printf("too_large=skipped\n");
  return 0;
#endif
  enum { M = 8192, K = 8192, N = 2 }; /* A: 256 MiB */
  float* a = malloc((size_t)M * K * sizeof(float));
  float *b = malloc((size_t)K * N * sizeof(float)), *c = malloc((size_t)M * N * sizeof(float));
  if (!a || !b || !c) return 3;
  fill(a, M * K, 8);
  fill(b, K * N, 9);
  /* Loads the interposer's engine and the libraries while memory is plentiful. */
  cblas_sgemm(kColMajor, kNoTrans, kNoTrans, 16, N, 16, 1.0f, a, 16, b, 16, 0.0f, c, 16);
  /* Room for the library's own work, not for a copy of A. */
  struct rlimit lim = {address_space_used() + (96u << 20), RLIM_INFINITY};
  lim.rlim_max = lim.rlim_cur;
  if (setrlimit(RLIMIT_AS, &lim) != 0) {
    perror("setrlimit");
    return 3;
  }
  int correct = 1;
  for (int call = 0; call < 2; ++call) {
    cblas_sgemm(kColMajor, kNoTrans, kNoTrans, M, N, K, 1.0f, a, M, b, K, 0.0f, c, M);
    for (int i = 0; i < M; i += 97) { /* a sample of rows, in double */
      for (int j = 0; j < N; ++j) {
        double s = 0, mag = 0;
        for (int l = 0; l < K; ++l) {
          s += (double)a[i + (size_t)l * M] * (double)b[l + j * K];
          mag += fabs((double)a[i + (size_t)l * M] * (double)b[l + j * K]);
        }
        correct &= fabs(s - (double)c[i + j * M]) <= 1e-5 * (mag + 1);
      }
    }
  }
  printf("big_correct=%d\n", correct);
  return correct ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc >= 2 && strcmp(argv[1], "invalid-order") == 0) return invalid_order();
  if (argc >= 2 && strcmp(argv[1], "nan-first") == 0) return nan_first();
  if (argc >= 3 && strcmp(argv[1], "chdir") == 0) return change_directory(argv[2]);
  if (argc >= 2 && strcmp(argv[1], "too-large") == 0) return too_large();
  fprintf(stderr, "usage: %s invalid-order | nan-first | chdir DIR | too-large\n", argv[0]);
  return 64;
}

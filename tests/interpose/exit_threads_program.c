/* A C program that leaves while its threads are inside GEMM calls (issue 33, finding 1).
 *
 *   interpose_exit_threads_program exit|return [CALLS [tiny]]
 *
 * 8 threads loop over mixed cblas_sgemm / cblas_dgemm / sgemm_ / dgemm_ calls of a few shapes.
 * "exit": thread 0 calls exit(0) after CALLS calls of its own, while the others are mid-call.
 * "return": main returns 0 after every thread has made CALLS calls, the threads still calling
 * (Python's daemon threads doing matmuls at interpreter exit are the everyday form of both).
 * Natively (any BLAS) it exits 0. Under `tunableop run` it must exit 0 too: the interposer may not
 * add an exit-time crash the program does not have (the libraries our candidates come from are
 * torn down by their own static destructors while other threads still run their code).
 * Before leaving, thread 0 checks one result of its own against a plain triple loop (exit 2 if
 * wrong), so a run that served nothing correctly cannot pass either. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void cblas_sgemm(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
void cblas_dgemm(int, int, int, int, int, int, double, const double*, int, const double*, int, double, double*, int);
void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*, const float*, const int*,
            const float*, const int*, const float*, float*, const int*);
void dgemm_(const char*, const char*, const int*, const int*, const int*, const double*, const double*, const int*,
            const double*, const int*, const double*, double*, const int*);

enum { kThreads = 8, kRowMajor = 101, kColMajor = 102, kNoTrans = 111, kTrans = 112, kMax = 96 };

/* The shapes every thread cycles through (m, n, k): few enough that they are tuned quickly.
 * "tiny": one block each, so that every candidate computes on the calling thread (the TSan job:
 * OpenMP's team barriers are not instrumented, and a parallel region reads as races there). */
static const int kNormalShapes[][3] = {{96, 80, 72}, {64, 96, 48}, {33, 17, 95}};
static const int kTinyShapes[][3] = {{7, 5, 3}, {4, 6, 8}, {3, 3, 9}};
enum { kShapeCount = sizeof(kNormalShapes) / sizeof(kNormalShapes[0]) };
static const int (*kShapes)[3] = kNormalShapes;

static int g_calls = 200;
static int g_exit_from_thread = 1;
static atomic_int g_done_calls[kThreads];

typedef struct {
  int id;
  float fa[kMax * kMax], fb[kMax * kMax], fc[kMax * kMax];
  double da[kMax * kMax], db[kMax * kMax], dc[kMax * kMax];
} Work;

static Work g_work[kThreads];

static void fill(Work* w) {
  unsigned s = 12345u + 977u * (unsigned)w->id;
  for (int i = 0; i < kMax * kMax; ++i) {
    s = s * 1103515245u + 12345u;
    double v = (double)((s >> 8) & 0xffff) / 65536.0 - 0.5;
    w->fa[i] = (float)v;
    w->da[i] = v;
    s = s * 1103515245u + 12345u;
    v = (double)((s >> 8) & 0xffff) / 65536.0 - 0.5;
    w->fb[i] = (float)v;
    w->db[i] = v;
  }
}

/* Call number i of a thread: the API and the shape rotate. */
static void one_call(Work* w, int i) {
  const int* s = kShapes[i % kShapeCount];
  const int m = s[0], n = s[1], k = s[2];
  const float fone = 1.0f, fzero = 0.0f;
  const double done = 1.0, dzero = 0.0;
  switch ((i / kShapeCount) % 4) {
    case 0: cblas_sgemm(kColMajor, kNoTrans, kNoTrans, m, n, k, 1.0f, w->fa, m, w->fb, k, 0.0f, w->fc, m); break;
    case 1: cblas_dgemm(kRowMajor, kNoTrans, kTrans, m, n, k, 1.0, w->da, k, w->db, k, 0.0, w->dc, n); break;
    case 2: sgemm_("T", "N", &m, &n, &k, &fone, w->fa, &k, w->fb, &k, &fzero, w->fc, &m); break;
    default: dgemm_("N", "N", &m, &n, &k, &done, w->da, &m, w->db, &k, &dzero, w->dc, &m); break;
  }
}

/* C = A B, column-major, the first shape: checked against a triple loop in double. */
static int first_shape_correct(Work* w) {
  const int m = kShapes[0][0], n = kShapes[0][1], k = kShapes[0][2];
  cblas_sgemm(kColMajor, kNoTrans, kNoTrans, m, n, k, 1.0f, w->fa, m, w->fb, k, 0.0f, w->fc, m);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      double ref = 0, mag = 0;
      for (int l = 0; l < k; ++l) {
        ref += (double)w->fa[i + l * m] * (double)w->fb[l + j * k];
        mag += (double)(w->fa[i + l * m] < 0 ? -w->fa[i + l * m] : w->fa[i + l * m]);
      }
      double err = ref - (double)w->fc[i + j * m];
      if (err < 0) err = -err;
      if (err > 1e-4 * (mag + 1)) {
        fprintf(stderr, "wrong result at (%d, %d): %g, expected %g\n", i, j, (double)w->fc[i + j * m], ref);
        return 0;
      }
    }
  return 1;
}

static void* worker(void* arg) {
  Work* w = (Work*)arg;
  for (int i = 0;; ++i) {
    if (w->id == 0 && g_exit_from_thread && i == g_calls) {
      if (!first_shape_correct(w)) exit(2);
      exit(0); /* the others are mid-call */
    }
    one_call(w, i);
    atomic_store(&g_done_calls[w->id], i + 1);
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 2 || (strcmp(argv[1], "exit") != 0 && strcmp(argv[1], "return") != 0)) {
    fprintf(stderr, "usage: %s exit|return [CALLS]\n", argv[0]);
    return 64;
  }
  g_exit_from_thread = strcmp(argv[1], "exit") == 0;
  if (argc > 2) g_calls = atoi(argv[2]);
  if (argc > 3 && strcmp(argv[3], "tiny") == 0) kShapes = kTinyShapes;
  pthread_t t[kThreads];
  for (int i = 0; i < kThreads; ++i) {
    g_work[i].id = i;
    fill(&g_work[i]);
    if (pthread_create(&t[i], NULL, worker, &g_work[i]) != 0) return 3;
  }
  if (g_exit_from_thread) {
    pthread_join(t[0], NULL); /* never returns: thread 0 exits the process */
    return 4;
  }
  for (;;) {
    int least = g_calls;
    for (int i = 0; i < kThreads; ++i)
      if (atomic_load(&g_done_calls[i]) < least) least = atomic_load(&g_done_calls[i]);
    if (least >= g_calls) break;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  return 0; /* the threads are still calling */
}

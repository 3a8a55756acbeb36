// The calls of the CUDA interposer test program. "Servable" problems are those the interposer
// maps (each distinct, one results line each); the others must pass through untouched.
#include <dlfcn.h>

#include <memory>
#include <thread>

#include "cublas_program.h"

#define TEST_STR2(x) #x
#define TEST_STR(x) TEST_STR2(x)

namespace interpose_test {

namespace {

using Call = cublasStatus_t (*)(Context&, Problem&);

std::unique_ptr<Problem> make(Type t, char ta, char tb, int m, int n, int k, uint64_t seed, int pad = 0,
                              double beta = 0, int batch = 1, bool with_bias = false, int act = 0) {
  auto p = std::make_unique<Problem>();
  p->with_bias = with_bias;
  p->act = act;
  p->type = t;
  p->ta = ta;
  p->tb = tb;
  p->m = m;
  p->n = n;
  p->k = k;
  p->beta = beta;
  p->batch = batch;
  if (pad) {
    p->lda = (ta == 'N' ? m : k) + pad;
    p->ldb = (tb == 'N' ? k : n) + pad;
    p->ldc = m + pad;
  }
  p->init(seed);
  return p;
}

bool call_and_check(Context& ctx, Problem& p, Call call, const std::string& label) {
  p.upload_c();
  cublasStatus_t st = call(ctx, p);
  if (st != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cublas_program: %s returned %d\n", label.c_str(), int(st));
    return false;
  }
  return check(p, *ctx.out, label);
}

// alpha and beta in device memory: must pass through.
bool device_pointer_mode(Context& ctx, Problem& p) {
  float host[2] = {float(p.alpha), float(p.beta)};
  float* dev = nullptr;
  TEST_CUDA(cudaMalloc(&dev, sizeof(host)));
  TEST_CUDA(cudaMemcpy(dev, host, sizeof(host), cudaMemcpyHostToDevice));
  p.upload_c();
  cublasSetPointerMode(ctx.handle, CUBLAS_POINTER_MODE_DEVICE);
  cublasStatus_t st =
      cublasGemmEx(ctx.handle, p.ta == 'N' ? CUBLAS_OP_N : CUBLAS_OP_T, p.tb == 'N' ? CUBLAS_OP_N : CUBLAS_OP_T, p.m,
                   p.n, p.k, dev, p.da, cuda_type(p.type), p.lda, p.db, cuda_type(p.type), p.ldb, dev + 1, p.dc,
                   cuda_type(p.type), p.ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  cublasSetPointerMode(ctx.handle, CUBLAS_POINTER_MODE_HOST);
  bool ok = st == CUBLAS_STATUS_SUCCESS && check(p, *ctx.out, "GemmEx, device pointer mode (passes through)");
  cudaFree(dev);
  return ok;
}

// Two calls captured into a CUDA graph (global capture mode: any forbidden call by the
// interposer would invalidate the capture): `known` was run before, `fresh` never.
bool graph_capture(Context& ctx, Problem& known, Problem& fresh) {
  cudaStream_t cs;
  TEST_CUDA(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
  cudaStream_t eager = ctx.stream;
  ctx.use_stream(cs);
  known.upload_c();
  fresh.upload_c();
  cudaGraph_t graph = nullptr;
  TEST_CUDA(cudaStreamBeginCapture(cs, cudaStreamCaptureModeGlobal));
  cublasStatus_t s1 = gemm_ex(ctx, known);
  cublasStatus_t s2 = gemm_ex(ctx, fresh);
  cudaError_t end = cudaStreamEndCapture(cs, &graph);
  ctx.use_stream(eager);
  if (s1 != CUBLAS_STATUS_SUCCESS || s2 != CUBLAS_STATUS_SUCCESS || end != cudaSuccess) {
    std::fprintf(stderr, "cublas_program: capture failed: calls %d %d, end capture: %s\n", int(s1), int(s2),
                 cudaGetErrorString(end));
    return false;
  }
  cudaGraphExec_t exec = nullptr;
  TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  TEST_CUDA(cudaGraphLaunch(exec, cs));
  TEST_CUDA(cudaStreamSynchronize(cs));
  bool ok = check(known, *ctx.out, "captured GemmEx, known problem");
  ok &= check(fresh, *ctx.out, "captured GemmEx, new problem");
  // Replayed again: the graph must not depend on memory freed since.
  known.upload_c();
  fresh.upload_c();
  TEST_CUDA(cudaGraphLaunch(exec, cs));
  TEST_CUDA(cudaStreamSynchronize(cs));
  ok &= check(known, *ctx.out, "graph replayed, known problem");
  ok &= check(fresh, *ctx.out, "graph replayed, new problem");
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(cs);
  return ok;
}

// Threads with their own handle and stream, one problem.
bool threads(Problem& shape_of) {
  bool ok = true;
  std::vector<std::unique_ptr<Problem>> probs;
  std::vector<int> status(2, 0);
  for (int t = 0; t < 2; ++t)
    probs.push_back(make(shape_of.type, shape_of.ta, shape_of.tb, shape_of.m, shape_of.n, shape_of.k, 50 + t));
  std::vector<std::thread> th;
  for (int t = 0; t < 2; ++t) {
    th.emplace_back([t, &probs, &status] {
      Context c;
      cublasCreate(&c.handle);
      cudaMalloc(&c.workspace, c.workspace_bytes);
      cudaStream_t s;
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
      c.use_stream(s);
      for (int i = 0; i < 3; ++i) status[size_t(t)] |= gemm_ex(c, *probs[size_t(t)]) != CUBLAS_STATUS_SUCCESS;
      cudaStreamSynchronize(s);
      cublasDestroy(c.handle);
      cudaFree(c.workspace);
      cudaStreamDestroy(s);
    });
  }
  for (auto& x : th) x.join();
  std::ofstream sink("/dev/null", std::ios::binary);
  for (int t = 0; t < 2; ++t) {
    // beta == 0: three calls give the same C as one.
    ok &= status[size_t(t)] == 0 && check(*probs[size_t(t)], sink, "GemmEx from thread " + std::to_string(t));
  }
  return ok;
}

// A program that loads cuBLAS itself and calls it through its own handle (not interposed).
bool own_dlopen(Problem& p) {
  void* h = dlopen("libcublas.so." TEST_STR(CUBLAS_VER_MAJOR), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return true;  // nothing to test on this machine
  using Create = cublasStatus_t (*)(cublasHandle_t*);
  using Sgemm = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const float*,
                                   const float*, int, const float*, int, const float*, float*, int);
  auto create = reinterpret_cast<Create>(dlsym(h, "cublasCreate_v2"));
  auto sgemm = reinterpret_cast<Sgemm>(dlsym(h, "cublasSgemm_v2"));
  if (!create || !sgemm) return false;
  cublasHandle_t handle;
  if (create(&handle) != CUBLAS_STATUS_SUCCESS) return false;
  p.upload_c();
  float alpha = float(p.alpha), beta = float(p.beta);
  cublasStatus_t st = sgemm(handle, p.ta == 'N' ? CUBLAS_OP_N : CUBLAS_OP_T, p.tb == 'N' ? CUBLAS_OP_N : CUBLAS_OP_T,
                            p.m, p.n, p.k, &alpha, static_cast<float*>(p.da), p.lda, static_cast<float*>(p.db), p.ldb,
                            &beta, static_cast<float*>(p.dc), p.ldc);
  std::ofstream sink("/dev/null", std::ios::binary);
  bool ok = st == CUBLAS_STATUS_SUCCESS && check(p, sink, "Sgemm through the program's own dlopen handle");
  cublasDestroy(handle);
  return ok;
}

}  // namespace

int run_all_cases(Context& ctx) {
  int servable = 0;
  auto serve = [&](Problem& p, Call c, const char* label) {
    ctx.ok &= call_and_check(ctx, p, c, label);
    ++servable;
  };
  auto pass = [&](Problem& p, Call c, const char* label) { ctx.ok &= call_and_check(ctx, p, c, label); };
  auto lt = [](Context& c, Problem& p) { return lt_matmul(c, p, false); };
  auto lt_rows = [](Context& c, Problem& p) { return lt_matmul(c, p, true); };

  auto linear = make(Type::kBF16, 'T', 'N', 256, 8, 512, 1);  // F.linear(x[8, 512], W[256, 512])
  serve(*linear, gemm_ex, "GemmEx bf16 tn (F.linear)");
  auto half = make(Type::kF16, 'N', 'N', 129, 65, 33, 2, /*pad=*/3, /*beta=*/0.5);
  serve(*half, gemm_ex, "GemmEx fp16 nn, ld > rows, beta");
  auto sgemm = make(Type::kF32, 'N', 'T', 100, 50, 70, 3);
  serve(*sgemm, typed_gemm, "Sgemm fp32 nt");
  auto tf32 = make(Type::kF32, 'T', 'N', 128, 64, 256, 4);
  tf32->tf32 = true;
  cublasSetMathMode(ctx.handle, CUBLAS_TF32_TENSOR_OP_MATH);
  serve(*tf32, typed_gemm, "Sgemm fp32, tf32 math mode");
  cublasSetMathMode(ctx.handle, CUBLAS_DEFAULT_MATH);
  auto dgemm = make(Type::kF64, 'T', 'T', 31, 17, 23, 5, 1, -1.0);
  serve(*dgemm, typed_gemm, "Dgemm fp64 tt, beta");
  auto attn = make(Type::kBF16, 'T', 'N', 64, 64, 32, 6, 0, 0, /*batch=*/3);  // q k^T per head
  serve(*attn, strided_ex, "GemmStridedBatchedEx bf16 x3");
  auto sbatch = make(Type::kF32, 'N', 'N', 40, 24, 16, 7, 2, 1.0, 4);
  serve(*sbatch, typed_strided, "SgemmStridedBatched fp32 x4");
  auto dbatch = make(Type::kF64, 'N', 'T', 12, 10, 8, 8, 0, 0, 2);
  serve(*dbatch, typed_strided, "DgemmStridedBatched fp64 x2");
  auto bias = make(Type::kBF16, 'T', 'N', 192, 8, 256, 9, 0, 0, 1, /*with_bias=*/true);
  serve(*bias, lt, "LtMatmul bf16 tn + bias (addmm)");
  auto gelu = make(Type::kBF16, 'T', 'N', 320, 16, 128, 10, 0, 0, 1, true, /*act=*/2);
  serve(*gelu, lt, "LtMatmul bf16 tn + bias + GELU");
  auto rows = make(Type::kF32, 'N', 'N', 48, 36, 20, 11, 0, 0.25);
  // Row-major layouts are not offered for every type on every GPU: a case the library itself
  // refuses (in every run alike) is skipped, not failed.
  rows->upload_c();
  if (lt_matmul(ctx, *rows, true) == CUBLAS_STATUS_NOT_SUPPORTED)
    std::printf("LtMatmul fp32 row-major: no algorithm on this GPU, skipped\n");
  else
    serve(*rows, lt_rows, "LtMatmul fp32, row-major layouts, beta");

  // Pass through: fp16 accumulation, alpha/beta in device memory.
  auto hgemm = make(Type::kF16, 'N', 'N', 64, 64, 64, 12);
  hgemm->fp16_accum = true;
  pass(*hgemm, typed_gemm, "Hgemm (fp16 accumulation: passes through)");
  auto hbatch = make(Type::kF16, 'N', 'N', 32, 32, 32, 13, 0, 0, 2);
  hbatch->fp16_accum = true;
  pass(*hbatch, typed_strided, "HgemmStridedBatched (passes through)");
  auto devptr = make(Type::kBF16, 'N', 'N', 72, 40, 24, 14);
  ctx.ok &= device_pointer_mode(ctx, *devptr);

  // A CUDA graph: the F.linear problem (known) and a new one (recorded, tuned later).
  auto captured = make(Type::kBF16, 'T', 'N', 384, 16, 256, 15);
  ctx.ok &= graph_capture(ctx, *linear, *captured);
  ++servable;
  // The next call outside a capture tunes the captured problem (with tuning on) and its own.
  auto after = make(Type::kBF16, 'T', 'N', 160, 4, 96, 16);
  serve(*after, gemm_ex, "GemmEx after the capture");

  ctx.ok &= threads(*linear);
  ctx.ok &= own_dlopen(*sgemm);
  int devices = 0;
  cudaGetDeviceCount(&devices);
  if (devices > 1) {  // a second device: its own context and results file (results1.csv)
    cudaSetDevice(1);
    Context c1;
    cublasCreate(&c1.handle);
    cudaMalloc(&c1.workspace, c1.workspace_bytes);
    auto on1 = make(Type::kBF16, 'T', 'N', 256, 8, 512, 17);
    std::ofstream sink("/dev/null", std::ios::binary);
    c1.out = &sink;
    ctx.ok &= call_and_check(c1, *on1, gemm_ex, "GemmEx on device 1");
    cublasDestroy(c1.handle);
    cudaFree(c1.workspace);
    on1.reset();
    cudaSetDevice(0);
  }
  return servable;
}

}  // namespace interpose_test

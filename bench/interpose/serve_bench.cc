// Host cost of the interposer's engine path for one served call, with a candidate that does
// nothing: mapping the intercepted arguments, the decision lookup, the dispatch. What a real
// call adds on top is the hook itself (a thread-local read and an indirect call) and, on a GPU,
// the handle queries and the capture check: the in-process A/B benchmarks measure the whole
// (cblas_ab_bench.cc, cublas_ab_bench.cu).
#include <benchmark/benchmark.h>

#include "backends/cpu_runtime.h"
#include "interpose/engine.h"
#include "interpose/map_blas.h"
#include "interpose/serve.h"

#ifdef TUNABLEOP_INTERPOSE_CUDA
#include "interpose/map_cublas.h"
#include "interpose/map_cublaslt.h"
#endif

namespace tunableop::interpose {
namespace {

GemmCandidate noop(const char* name) {
  GemmCandidate c;
  c.name = name;
  c.device = DeviceKind::kCpu;
  c.supports = [](const GemmParams&) { return Status::ok(); };
  c.run = [](const GemmParams&, const GemmOperands&) { return Status::ok(); };
  return c;
}

// A CPU device engine whose results say "Gemm_Noop" for the problem of `call`.
DeviceEngine& engine_with_noop_result(const BlasCall& call) {
  static DeviceEngine* dev = [&] {
    auto* d = new DeviceEngine();
    d->device = Device::cpu();
    d->ctx = new Context(Device::cpu(), Config::defaults_only(), [](Registry& r) {
      register_cpu_runtime(r);
      r.list<GemmCandidate>().push_back(noop("Default"));
      r.list<GemmCandidate>().push_back(noop("Gemm_Noop"));
    });
    (void)d->ctx->config().set(Setting::kEnabled, true);
    (void)d->ctx->config().set(Setting::kTuning, false);
    (void)d->ctx->config().set(Setting::kFilename, "/dev/null");
    d->options = d->ctx->config().snapshot();
    GemmParams p;
    GemmOperands ops;
    (void)map_blas_call(call, &p, &ops);
    ResultEntry e;
    e.op = gemm_op_signature(p);
    e.params = gemm_params_signature(p);
    e.solution = "Gemm_Noop";
    e.time_ms = 0.001;
    d->ctx->results().insert(e);
    return d;
  }();
  return *dev;
}

BlasCall decode_call() {
  static float a[1], b[1], c[1];
  BlasCall call;
  call.api = Api::kCblasSgemm;
  call.order = 101;  // row-major y = x W^T: 1 token, 4096 -> 4096
  call.transa = 111;
  call.transb = 112;
  call.m = 1;
  call.n = 4096;
  call.k = 4096;
  call.alpha = 1;
  call.a = a;
  call.lda = 4096;
  call.b = b;
  call.ldb = 4096;
  call.c = c;
  call.ldc = 4096;
  return call;
}

void BM_MapBlasCall(benchmark::State& state) {
  BlasCall call = decode_call();
  GemmParams p;
  GemmOperands ops;
  for (auto _ : state) {
    benchmark::DoNotOptimize(map_blas_call(call, &p, &ops));
    benchmark::DoNotOptimize(p);
  }
}
BENCHMARK(BM_MapBlasCall);

// Map + decision + run of a no-op candidate: the engine's whole cost per served call.
void BM_ServeBlasCallNoop(benchmark::State& state) {
  BlasCall call = decode_call();
  DeviceEngine& dev = engine_with_noop_result(call);
  for (auto _ : state) {
    GemmParams p;
    GemmOperands ops;
    (void)map_blas_call(call, &p, &ops);
    Outcome o = serve_gemm(dev, p, ops, CallSite{});
    if (!o.served()) state.SkipWithError("not served");
    benchmark::DoNotOptimize(o);
  }
}
BENCHMARK(BM_ServeBlasCallNoop)->ThreadRange(1, 2);

#ifdef TUNABLEOP_INTERPOSE_CUDA
void BM_MapCublasCall(benchmark::State& state) {
  static float alpha = 1, beta = 0;
  CublasCall call;
  call.transa = 1;
  call.transb = 0;
  call.m = 4096;
  call.n = 1;
  call.k = 4096;
  call.alpha = &alpha;
  call.beta = &beta;
  call.a = call.b = &alpha;
  call.c = &beta;
  call.a_type = call.b_type = call.c_type = CUDA_R_16BF;
  call.lda = 4096;
  call.ldb = 4096;
  call.ldc = 4096;
  call.compute_type = CUBLAS_COMPUTE_32F;
  HandleState h;
  GemmParams p;
  GemmOperands ops;
  for (auto _ : state) {
    benchmark::DoNotOptimize(map_cublas_call(call, h, false, &p, &ops));
    benchmark::DoNotOptimize(p);
  }
}
BENCHMARK(BM_MapCublasCall);

// cuBLASLt's descriptor functions are host code: these run without a GPU. The call is PyTorch's
// F.linear with a bias (bf16 "tn", 8 tokens, 4096 -> 4096) as cublasLtMatmul receives it.
struct LtLinearCall {
  LtFunctions f{&cublasLtMatmulDescGetAttribute, &cublasLtMatrixLayoutGetAttribute, &cublasLtMatmulDescCreate,
                &cublasLtMatrixLayoutCreate};
  LtCall call;
  bool ok = false;
  LtLinearCall() {
    static float alpha = 1, beta = 0;
    static uint16_t bias[4096], buf[4];
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    if (cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS) return;
    int32_t t = CUBLAS_OP_T;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t));
    cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof(ep));
    const void* bias_ptr = bias;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof(bias_ptr));
    cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, 4096, 4096, 4096);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, 4096, 8, 4096);
    cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, 4096, 8, 4096);
    call.desc = desc;
    call.alpha = &alpha;
    call.beta = &beta;
    call.a = call.b = call.c = buf;
    call.d = buf;
    call.adesc = la;
    call.bdesc = lb;
    call.cdesc = call.ddesc = lc;
    LtMapped m;
    ok = map_lt_call(call, f, false, &m) == Reason::kServed;
  }
};

// A repeated call: one hash of the descriptors' bytes.
void BM_MapLtCallCached(benchmark::State& state) {
  LtLinearCall lt;
  if (!lt.ok) state.SkipWithError("not mapped");
  LtMapped m;
  for (auto _ : state) {
    benchmark::DoNotOptimize(map_lt_call(lt.call, lt.f, false, &m));
    benchmark::DoNotOptimize(m);
  }
}
BENCHMARK(BM_MapLtCallCached);

// First sight: every attribute read through cuBLASLt.
void BM_MapLtCallUncached(benchmark::State& state) {
  LtLinearCall lt;
  if (!lt.ok) state.SkipWithError("not mapped");
  LtMapped m;
  for (auto _ : state) {
    clear_lt_cache();
    benchmark::DoNotOptimize(map_lt_call(lt.call, lt.f, false, &m));
  }
}
BENCHMARK(BM_MapLtCallUncached);
#endif

}  // namespace
}  // namespace tunableop::interpose

BENCHMARK_MAIN();

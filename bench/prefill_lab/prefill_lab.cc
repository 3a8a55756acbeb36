// Issue 12's prefill lab (one device call): kernel times of the two prefill levers against what
// the engine runs now, on the 2048-token prefill shapes of Gemma-2B and Llama-2-7B.
//
// (A) residual add in the o / down GEMM's epilogue: cuBLAS bf16 x bf16 -> fp32 with beta 1 into
//     the fp32 residual (C = D), then rmsnorm reading x and writing the normed bf16 rows, against
//     the bf16-output GEMM followed by add_rmsnorm (read x and y, write x and the normed rows).
// (B) the gated activation fused into the gate GEMM by cuDNN 9's backend graph (matmul ->
//     GELU_APPROX_TANH_FWD | SWISH_FWD -> MUL with `up`, bf16 out), with `up` from a cuBLAS GEMM
//     over the up half of w_gate_up, against the whole gate_up GEMM followed by the engine's
//     gated kernel. Every engine configuration cuDNN's heuristics offer (mode A) that finalises
//     is timed; its output is compared with the unfused result.
//
// Times: mean of 20 runs after 3 warm-ups, CUDA events, no L2 flush (each problem streams more
// than the L2 holds). Usage: prefill_lab [gemma|llama|both] [max cuDNN configurations].
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn_graph.h>
#include <dlfcn.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "llm/cuda/kernels.h"

namespace {

using tunableop::llm::cuda::Act;
using tunableop::llm::cuda::Elem;

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)
#define CB(x)                                                                                     \
  do {                                                                                            \
    cublasStatus_t s_ = (x);                                                                      \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                            \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cublasGetStatusString(s_)); \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

// ---- cuDNN, opened at run time as the SDPA candidate does ---------------------------------
struct Cudnn {
  decltype(&cudnnGetVersion) get_version = nullptr;
  decltype(&cudnnGetErrorString) error_string = nullptr;
  decltype(&cudnnGetLastErrorString) last_error = nullptr;
  decltype(&cudnnCreate) create = nullptr;
  decltype(&cudnnSetStream) set_stream = nullptr;
  decltype(&cudnnBackendCreateDescriptor) create_desc = nullptr;
  decltype(&cudnnBackendDestroyDescriptor) destroy_desc = nullptr;
  decltype(&cudnnBackendSetAttribute) set_attr = nullptr;
  decltype(&cudnnBackendGetAttribute) get_attr = nullptr;
  decltype(&cudnnBackendFinalize) finalize = nullptr;
  decltype(&cudnnBackendExecute) execute = nullptr;
  bool ok = false;
  std::string why;
};

Cudnn load_cudnn() {
  Cudnn c;
  const char* env = std::getenv("TUNABLEOP_CUDNN_LIBRARY");
  void* h = dlopen(env && *env ? env : "libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
  if (!h) h = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    c.why = dlerror() ? dlerror() : "libcudnn.so.9 not found";
    return c;
  }
  auto bind = [&](const char* name, auto& fn) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
    return fn != nullptr;
  };
  c.ok = bind("cudnnGetVersion", c.get_version) && bind("cudnnGetErrorString", c.error_string) &&
         bind("cudnnCreate", c.create) && bind("cudnnSetStream", c.set_stream) &&
         bind("cudnnBackendCreateDescriptor", c.create_desc) && bind("cudnnBackendDestroyDescriptor", c.destroy_desc) &&
         bind("cudnnBackendSetAttribute", c.set_attr) && bind("cudnnBackendGetAttribute", c.get_attr) &&
         bind("cudnnBackendFinalize", c.finalize) && bind("cudnnBackendExecute", c.execute);
  bind("cudnnGetLastErrorString", c.last_error);
  if (!c.ok) c.why = "the library lacks the backend API";
  return c;
}

// Descriptors of one graph; the first failure is kept (later calls do nothing).
class Builder {
 public:
  explicit Builder(const Cudnn* api) : api_(api) {}
  ~Builder() {
    for (auto it = descs_.rbegin(); it != descs_.rend(); ++it) api_->destroy_desc(*it);
  }
  Builder(const Builder&) = delete;
  Builder& operator=(const Builder&) = delete;

  cudnnBackendDescriptor_t make(cudnnBackendDescriptorType_t t) {
    cudnnBackendDescriptor_t d = nullptr;
    check(api_->create_desc(t, &d), "create descriptor");
    if (d) descs_.push_back(d);
    return d;
  }
  void set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t n, cudnnBackendAttributeType_t t, int64_t count,
           const void* v, const char* what) {
    if (ok() && d) check(api_->set_attr(d, n, t, count, v), what);
  }
  void finalize(cudnnBackendDescriptor_t d, const char* what) {
    if (ok() && d) check(api_->finalize(d), what);
  }
  cudnnBackendDescriptor_t tensor(int64_t uid, cudnnDataType_t dt, const int64_t (&dims)[3],
                                  const int64_t (&strides)[3], bool is_virtual) {
    auto d = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const int64_t align = 16;
    set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt, "tensor type");
    set(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 3, dims, "tensor dims");
    set(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 3, strides, "tensor strides");
    set(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "tensor uid");
    set(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, "tensor alignment");
    set(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual, "tensor virtual");
    finalize(d, "tensor");
    return d;
  }
  void matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c) {
    auto mm = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    set(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32, "matmul precision");
    finalize(mm, "matmul");
    auto op = make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    set(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a, "matmul a");
    set(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, "matmul b");
    set(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c, "matmul c");
    set(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm, "matmul desc");
    finalize(op, "matmul op");
    ops_.push_back(op);
  }
  void pointwise(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                 cudnnBackendDescriptor_t y) {
    auto pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, "pointwise mode");
    set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &f32, "pointwise precision");
    finalize(pw, "pointwise");
    auto op = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    set(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw, "pointwise op");
    set(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, "pointwise x");
    if (b) set(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, "pointwise b");
    set(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, "pointwise y");
    finalize(op, "pointwise op");
    ops_.push_back(op);
  }
  bool ok() const { return why_.empty(); }
  const std::string& why() const { return why_; }
  const std::vector<cudnnBackendDescriptor_t>& ops() const { return ops_; }
  void check(cudnnStatus_t st, const char* what) {
    if (st == CUDNN_STATUS_SUCCESS || !ok()) return;
    why_ = std::string(what) + ": " + api_->error_string(st);
    if (api_->last_error) {
      char buf[512] = {0};
      api_->last_error(buf, sizeof(buf));
      if (buf[0]) why_ += std::string(" (") + buf + ")";
    }
  }

 private:
  const Cudnn* api_;
  std::vector<cudnnBackendDescriptor_t> descs_, ops_;
  std::string why_;
};

// ---- Timing -------------------------------------------------------------------------------
double time_us(cudaStream_t s, const std::function<void()>& run, int reps = 20) {
  for (int i = 0; i < 3; ++i) run();
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CK(cudaEventRecord(a, s));
  for (int i = 0; i < reps; ++i) run();
  CK(cudaEventRecord(b, s));
  CK(cudaEventSynchronize(b));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  CK(cudaGetLastError());
  return double(ms) * 1e3 / reps;
}

uint16_t bf16_bits(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return uint16_t((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
float bf16_value(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float v;
  std::memcpy(&v, &u, 4);
  return v;
}

void* device_random_bf16(size_t n, uint32_t seed, float scale) {
  std::vector<uint16_t> h(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& v : h) {
    x = x * 1664525u + 1013904223u;
    v = bf16_bits((float(x >> 8) / float(1 << 24) * 2.f - 1.f) * scale);
  }
  void* d = nullptr;
  CK(cudaMalloc(&d, n * 2));
  CK(cudaMemcpy(d, h.data(), n * 2, cudaMemcpyHostToDevice));
  return d;
}

// y[rows, out] = x[rows, in] W[out, in]^T (row-major), bf16 in, bf16 or fp32 out, beta 0 or 1.
void gemm(cublasHandle_t h, int64_t rows, int64_t in, int64_t out, const void* x, const void* w, void* y, bool f32_out,
          bool accumulate) {
  const float alpha = 1.f, beta = accumulate ? 1.f : 0.f;
  CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(out), int(rows), int(in), &alpha, w, CUDA_R_16BF, int(in), x,
                  CUDA_R_16BF, int(in), &beta, y, f32_out ? CUDA_R_32F : CUDA_R_16BF, int(out), CUBLAS_COMPUTE_32F,
                  CUBLAS_GEMM_DEFAULT));
}

double rel_error_bf16(const void* got_d, const void* want_d, size_t n) {
  std::vector<uint16_t> g(n), w(n);
  CK(cudaMemcpy(g.data(), got_d, n * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(w.data(), want_d, n * 2, cudaMemcpyDeviceToHost));
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    const double a = bf16_value(g[i]), b = bf16_value(w[i]);
    if (!std::isfinite(a)) return INFINITY;
    num += (a - b) * (a - b);
    den += b * b;
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

struct Model {
  const char* name;
  int64_t hidden, inter, q_dim, layers;
  bool gelu;  // GELU tanh and rmsnorm * (1 + w) (Gemma), else SiLU and * w
  float eps;
};

void lever_a(const Model& m, cublasHandle_t h, cudaStream_t s) {
  const int64_t rows = 2048, H = m.hidden;
  void* x_in = device_random_bf16(size_t(rows * m.inter), 11, 1.f);
  void* w = device_random_bf16(size_t(H * m.inter), 12, 0.02f);
  void* norm_w = device_random_bf16(size_t(H), 13, 0.5f);
  void *y = nullptr, *normed = nullptr;
  float* resid = nullptr;
  CK(cudaMalloc(&y, size_t(rows * H) * 2));
  CK(cudaMalloc(&normed, size_t(rows * H) * 2));
  CK(cudaMalloc(&resid, size_t(rows * H) * 4));
  CK(cudaMemset(resid, 0, size_t(rows * H) * 4));
  std::printf("\n(A) %s: residual add in the GEMM's epilogue (rows %ld)\n", m.name, long(rows));
  std::printf("  %-6s %-36s %10s %10s %10s\n", "site", "form", "gemm us", "norm us", "total us");
  for (int site = 0; site < 2; ++site) {
    const int64_t in = site == 0 ? m.q_dim : m.inter;
    const char* name = site == 0 ? "o" : "down";
    const double flops = 2.0 * double(rows) * double(in) * double(H);
    const double g16 = time_us(s, [&] { gemm(h, rows, in, H, x_in, w, y, false, false); });
    const double n16 = time_us(s, [&] {
      CK(tunableop::llm::cuda::add_rmsnorm(Elem::kBF16, resid, y, norm_w, rows, H, m.eps, m.gelu, normed, s));
    });
    const double g32 = time_us(s, [&] { gemm(h, rows, in, H, x_in, w, resid, true, true); });
    const double n32 = time_us(
        s, [&] { CK(tunableop::llm::cuda::rmsnorm(Elem::kBF16, resid, norm_w, rows, H, m.eps, m.gelu, normed, s)); });
    const double both16 = time_us(s, [&] {
      gemm(h, rows, in, H, x_in, w, y, false, false);
      CK(tunableop::llm::cuda::add_rmsnorm(Elem::kBF16, resid, y, norm_w, rows, H, m.eps, m.gelu, normed, s));
    });
    const double both32 = time_us(s, [&] {
      gemm(h, rows, in, H, x_in, w, resid, true, true);
      CK(tunableop::llm::cuda::rmsnorm(Elem::kBF16, resid, norm_w, rows, H, m.eps, m.gelu, normed, s));
    });
    std::printf("  %-6s %-36s %10.1f %10.1f %10.1f  (gemm %.0f TFLOP/s)\n", name, "bf16 GEMM + add_rmsnorm", g16, n16,
                both16, flops / g16 / 1e6);
    std::printf("  %-6s %-36s %10.1f %10.1f %10.1f  (gemm %.0f TFLOP/s)\n", name, "fp32 GEMM beta 1 into x + rmsnorm",
                g32, n32, both32, flops / g32 / 1e6);
  }
  CK(cudaFree(x_in));
  CK(cudaFree(w));
  CK(cudaFree(norm_w));
  CK(cudaFree(y));
  CK(cudaFree(normed));
  CK(cudaFree(resid));
}

enum Uid : int64_t { kX = 1, kWg, kUp, kOut, kC, kVirt = 100 };

void lever_b(const Model& m, const Cudnn& api, cublasHandle_t h, cudaStream_t s, int max_cfgs) {
  const int64_t M = 2048, K = m.hidden, N = m.inter;
  void* x = device_random_bf16(size_t(M * K), 21, 1.f);
  void* w = device_random_bf16(size_t(2 * N * K), 22, 0.03f);  // [gate | up] rows
  const void* w_up = static_cast<const uint16_t*>(w) + N * K;
  void *gate_up = nullptr, *gated = nullptr, *up = nullptr, *out = nullptr;
  CK(cudaMalloc(&gate_up, size_t(M * 2 * N) * 2));
  CK(cudaMalloc(&gated, size_t(M * N) * 2));
  CK(cudaMalloc(&up, size_t(M * N) * 2));
  CK(cudaMalloc(&out, size_t(M * N) * 2));
  const Act act = m.gelu ? Act::kGeluTanh : Act::kSilu;
  const double f_all = 2.0 * double(M) * double(K) * double(2 * N), f_half = f_all / 2;
  std::printf("\n(B) %s: gate_up %ldx%ldx%ld, gated activation %s\n", m.name, long(M), long(2 * N), long(K),
              m.gelu ? "GELU tanh" : "SiLU");
  const double t_gu = time_us(s, [&] { gemm(h, M, K, 2 * N, x, w, gate_up, false, false); });
  const double t_act =
      time_us(s, [&] { CK(tunableop::llm::cuda::gated_activation(Elem::kBF16, gate_up, M, N, act, gated, s)); });
  const double t_up = time_us(s, [&] { gemm(h, M, K, N, x, w_up, up, false, false); });
  std::printf("  cuBLAS gate_up GEMM            %8.1f us  %4.0f TFLOP/s\n", t_gu, f_all / t_gu / 1e6);
  std::printf("  gated kernel                   %8.1f us\n", t_act);
  std::printf("  unfused total (engine's form)  %8.1f us\n", t_gu + t_act);
  std::printf("  cuBLAS up-half GEMM            %8.1f us  %4.0f TFLOP/s\n", t_up, f_half / t_up / 1e6);
  if (!api.ok) {
    std::printf("  cuDNN: not loaded (%s)\n", api.why.c_str());
    return;
  }
  cudnnHandle_t dnn = nullptr;
  if (api.create(&dnn) != CUDNN_STATUS_SUCCESS) {
    std::printf("  cuDNN: cudnnCreate failed\n");
    return;
  }
  api.set_stream(dnn, s);
  // Two graphs: the fused gate (matmul -> act -> mul up), and a plain matmul (cuDNN's GEMM speed).
  for (int fused = 1; fused >= 0; --fused) {
    Builder g(&api);
    const cudnnDataType_t bf = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
    const int64_t n_out = fused ? N : 2 * N;
    auto tx = g.tensor(kX, bf, {1, M, K}, {M * K, K, 1}, false);
    auto tw = g.tensor(kWg, bf, {1, K, n_out}, {n_out * K, 1, K}, false);  // W^T: element (k, n) at n * K + k
    if (fused) {
      auto gate = g.tensor(kVirt, f32, {1, M, N}, {M * N, N, 1}, true);
      g.matmul(tx, tw, gate);
      auto a = g.tensor(kVirt + 1, f32, {1, M, N}, {M * N, N, 1}, true);
      g.pointwise(m.gelu ? CUDNN_POINTWISE_GELU_APPROX_TANH_FWD : CUDNN_POINTWISE_SWISH_FWD, gate, nullptr, a);
      auto tu = g.tensor(kUp, bf, {1, M, N}, {M * N, N, 1}, false);
      auto to = g.tensor(kOut, bf, {1, M, N}, {M * N, N, 1}, false);
      g.pointwise(CUDNN_POINTWISE_MUL, a, tu, to);
    } else {
      auto tc = g.tensor(kC, bf, {1, M, 2 * N}, {M * 2 * N, 2 * N, 1}, false);
      g.matmul(tx, tw, tc);
    }
    auto graph = g.make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    g.set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(g.ops().size()), g.ops().data(),
          "graph ops");
    g.set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &dnn, "graph handle");
    g.finalize(graph, "operation graph");
    auto heur = g.make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    g.set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph, "heur graph");
    g.set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, "heur mode");
    g.finalize(heur, "heuristics");
    int64_t count = 0;
    if (g.ok())
      g.check(api.get_attr(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
              "result count");
    const char* what = fused ? "cuDNN fused gate (matmul+act+mul)" : "cuDNN plain gate_up matmul";
    if (!g.ok()) {
      std::printf("  %s: %s\n", what, g.why().c_str());
      continue;
    }
    std::vector<cudnnBackendDescriptor_t> cfgs(static_cast<size_t>(count));
    for (auto& c : cfgs) c = g.make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    g.check(
        api.get_attr(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &count, cfgs.data()),
        "results");
    std::printf("  %s: %ld engine configurations\n", what, long(count));
    double best = 0;
    for (int64_t i = 0; i < count && i < max_cfgs && g.ok(); ++i) {
      Builder p(&api);
      auto plan = p.make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      p.set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &dnn, "plan handle");
      p.set(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfgs[size_t(i)],
            "plan config");
      p.finalize(plan, "plan");
      int64_t ws = 0, n = 0;
      if (p.ok())
        p.check(api.get_attr(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &ws),
                "workspace");
      if (!p.ok()) {
        std::printf("    cfg %ld: %s\n", long(i), p.why().c_str());
        continue;
      }
      void* wsp = nullptr;
      if (ws > 0) CK(cudaMalloc(&wsp, size_t(ws)));
      std::vector<int64_t> uids = {kX, kWg};
      std::vector<void*> ptrs = {x, w};  // the gate half is the first N rows
      if (fused) {
        uids.push_back(kUp), ptrs.push_back(up);
        uids.push_back(kOut), ptrs.push_back(out);
      } else {
        uids.push_back(kC), ptrs.push_back(gate_up);
      }
      auto pack = p.make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
      p.set(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, int64_t(uids.size()), uids.data(), "uids");
      p.set(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, int64_t(ptrs.size()), ptrs.data(),
            "ptrs");
      p.set(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &wsp, "workspace");
      p.finalize(pack, "variant pack");
      cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
      if (p.ok()) {
        // The reference first (cuBLAS gate_up + gated kernel into `gated`; up-half GEMM into `up`).
        gemm(h, M, K, 2 * N, x, w, gate_up, false, false);
        CK(tunableop::llm::cuda::gated_activation(Elem::kBF16, gate_up, M, N, act, gated, s));
        gemm(h, M, K, N, x, w_up, up, false, false);
        CK(cudaMemsetAsync(out, 0xff, size_t(M * N) * 2, s));  // NaN
        st = api.execute(dnn, plan, pack);
        CK(cudaStreamSynchronize(s));
      }
      if (!p.ok() || st != CUDNN_STATUS_SUCCESS) {
        std::printf("    cfg %ld: %s\n", long(i), p.ok() ? api.error_string(st) : p.why().c_str());
        if (wsp) CK(cudaFree(wsp));
        continue;
      }
      const double err = fused ? rel_error_bf16(out, gated, size_t(M * N)) : 0;
      const double t = time_us(s, [&] { (void)api.execute(dnn, plan, pack); });
      const double f = fused ? f_half : f_all;
      if (fused) {
        std::printf(
            "    cfg %ld: %8.1f us %4.0f TFLOP/s, rel err vs unfused %.2e, ws %ld B; with the up GEMM %8.1f us "
            "(%+.1f us vs unfused)\n",
            long(i), t, f / t / 1e6, err, long(ws), t + t_up, t + t_up - (t_gu + t_act));
      } else {
        std::printf("    cfg %ld: %8.1f us %4.0f TFLOP/s (cuBLAS %8.1f us), ws %ld B\n", long(i), t, f / t / 1e6, t_gu,
                    long(ws));
      }
      if (best == 0 || t < best) best = t;
      if (wsp) CK(cudaFree(wsp));
    }
    if (fused && best > 0) {
      std::printf("  best fused: %.1f us + up GEMM %.1f = %.1f us vs unfused %.1f us (x %ld layers: %+.2f ms)\n", best,
                  t_up, best + t_up, t_gu + t_act, long(m.layers),
                  (best + t_up - t_gu - t_act) * double(m.layers) / 1e3);
    }
  }
  CK(cudaFree(x));
  CK(cudaFree(w));
  CK(cudaFree(gate_up));
  CK(cudaFree(gated));
  CK(cudaFree(up));
  CK(cudaFree(out));
}

}  // namespace

int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "both";
  const int max_cfgs = argc > 2 ? std::atoi(argv[2]) : 6;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("prefill_lab: no CUDA device\n");
    return 0;
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  const Cudnn api = load_cudnn();
  std::printf("prefill_lab on %s; cuDNN %s\n", prop.name,
              api.ok ? std::to_string(api.get_version()).c_str() : ("not loaded: " + api.why).c_str());
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  cublasHandle_t h;
  CB(cublasCreate(&h));
  CB(cublasSetStream(h, s));
  const Model gemma{"Gemma-2B", 2048, 16384, 2048, 18, true, 1e-6f};
  const Model llama{"Llama-2-7B", 4096, 11008, 4096, 32, false, 1e-5f};
  for (const Model* m : {&gemma, &llama}) {
    if (which != "both" && (which == "gemma") != (m == &gemma)) continue;
    lever_a(*m, h, s);
    lever_b(*m, api, h, s, max_cfgs);
  }
  CB(cublasDestroy(h));
  return 0;
}

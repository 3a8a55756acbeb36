// The fastest any kernel can read a decode call's K and V bytes, replayed from a CUDA graph as
// `tunableop bench --suite attention` times the attention candidates. Not a test.
//
// Why: the issue's decode target is 80% of the KV-bytes floor (K and V read once at the measured
// copy bandwidth). For a small cache (Gemma-2B's one kv head: 1-16 MB) a call's fixed costs, the
// launch, the first loads' latency, the drain and the merge of the splits' partials, dwarf that
// floor. This measures them with no attention in the way: a kernel that only reads the bytes
// (16-byte loads, every SM, several blocks an SM and grid shapes tried, the best kept), alone
// ("read") and with the least any split attention adds, a ticket and one block merging the
// blocks' partials ("read + merge"), with and without programmatic dependent launch (as our decode
// kernels launch). A candidate reading the same bytes cannot beat the best of these, so its
// percentage of the floor bounds every attention kernel's.
//
// Inputs rotate through copies that together span at least 4x the L2 ("cold": nothing a call
// reads is left in the L2 by another) and, as the suite and sdpa_bench.py do, at most 8 copies
// ("suite": for shapes under half the L2 part of the bytes then come from it).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda_common/pdl.cuh"

namespace {

#define CHECK(x)                                                                                    \
  do {                                                                                              \
    cudaError_t e_ = (x);                                                                           \
    if (e_ != cudaSuccess) {                                                                        \
      std::fprintf(stderr, "read_floor: %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); \
      std::exit(1);                                                                                 \
    }                                                                                               \
  } while (0)

// Block b reads the b-th contiguous share of src (n16 16-byte words), kUnroll loads in flight per
// thread, folds them into one word and writes it to partials[b]. With merge, the block that draws
// the last ticket folds every partial into *out and puts the ticket back to 0 for the next call.
template <int kUnroll>
__global__ void read_kernel(const uint4* __restrict__ src, size_t n16, unsigned* partials, unsigned* ticket,
                            unsigned* out, int merge) {
  tunableop::cuda::pdl_wait();
  tunableop::cuda::pdl_launch_dependents();
  const size_t share = (n16 + gridDim.x - 1) / gridDim.x;
  const size_t begin = blockIdx.x * share, end = begin + share < n16 ? begin + share : n16;
  unsigned acc = 0;
  for (size_t i = begin + threadIdx.x; i < end; i += size_t(blockDim.x) * kUnroll) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t j = i + size_t(u) * blockDim.x;
      v[u] = j < end ? __ldcs(src + j) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (int o = 16; o > 0; o /= 2) acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
  __shared__ unsigned warp_acc[32];
  __shared__ bool last;
  if ((threadIdx.x & 31) == 0) warp_acc[threadIdx.x / 32] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned a = 0;
    for (unsigned w = 0; w < blockDim.x / 32; ++w) a ^= warp_acc[w];
    partials[blockIdx.x] = a;
    if (merge) {
      __threadfence();
      last = atomicAdd(ticket, 1u) == gridDim.x - 1;
    }
  }
  if (!merge) return;
  __syncthreads();
  if (!last) return;
  __threadfence();
  unsigned a = 0;
  for (unsigned b = threadIdx.x; b < gridDim.x; b += blockDim.x) a ^= __ldcg(partials + b);
  for (int o = 16; o > 0; o /= 2) a ^= __shfl_xor_sync(0xffffffffu, a, o);
  if ((threadIdx.x & 31) == 0) atomicXor(out, a);
  if (threadIdx.x == 0) *ticket = 0;
}

__global__ void empty_kernel() {
  tunableop::cuda::pdl_wait();
  tunableop::cuda::pdl_launch_dependents();
}

struct Config {
  int blocks = 0, threads = 0, unroll = 0;
};

struct Buffers {
  std::vector<uint4*> copies;
  size_t n16 = 0;
  unsigned *partials = nullptr, *ticket = nullptr, *out = nullptr;
};

void launch(const Buffers& b, int copy, const Config& c, bool merge, bool pdl, cudaStream_t s) {
  const dim3 grid(unsigned(c.blocks)), block(unsigned(c.threads));
  const uint4* src = b.copies[size_t(copy)];
  CHECK(tunableop::cuda::launch(c.unroll == 4 ? read_kernel<4> : read_kernel<8>, grid, block, 0, s, pdl, src, b.n16,
                                b.partials, b.ticket, b.out, int(merge)));
}

// Median of the event-timed milliseconds of `enqueue(stream)` over `reps` runs after `skip`
// untimed ones.
template <typename Enqueue>
float median_ms(int skip, int reps, Enqueue enqueue, cudaStream_t s) {
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int r = 0; r < skip + reps; ++r) {
    CHECK(cudaEventRecord(e0, s));
    enqueue(s);
    CHECK(cudaEventRecord(e1, s));
    CHECK(cudaEventSynchronize(e1));
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, e0, e1));
    if (r >= skip) ms.push_back(t);
  }
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Median time per call over 7 replays of a graph of `calls` calls made by add(i, stream).
template <typename Add>
double graph_us_per_call(int calls, Add add, cudaStream_t s) {
  cudaGraph_t g;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < calls; ++i) add(i, s);
  CHECK(cudaStreamEndCapture(s, &g));
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, g, 0));
  const float ms = median_ms(
      1, 7, [&](cudaStream_t st) { CHECK(cudaGraphLaunch(exec, st)); }, s);
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(g));
  return 1e3 * double(ms) / calls;
}

// Copy bandwidth as the suite measures it (measure_ceilings, tools/bench_measure.cc): bytes read +
// written by a device copy of max(256 MB, 2 x L2), median of 6 after one.
double copy_gbs(cudaStream_t s, size_t l2) {
  const size_t bytes = std::max<size_t>(size_t(256) << 20, 2 * l2);
  void *a = nullptr, *b = nullptr;
  CHECK(cudaMalloc(&a, bytes));
  CHECK(cudaMalloc(&b, bytes));
  const float ms = median_ms(
      1, 6, [&](cudaStream_t st) { CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, st)); }, s);
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  return 2.0 * double(bytes) / (double(ms) * 1e-3) / 1e9;
}

struct Best {
  double us = 1e30;
  Config c;
};

struct Shape {
  std::string name;
  size_t bytes;  // K and V of one decode call
};

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "read_floor: no CUDA GPU\n");
    return 1;
  }
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const size_t l2 = size_t(prop.l2CacheSize);
  const double gbs = copy_gbs(s, l2);
  const int sms = prop.multiProcessorCount;

  // A graph launch per node with nothing to do: the least a call can cost.
  auto empty_us = [&](bool pdl) {
    return graph_us_per_call(
        32, [&](int, cudaStream_t st) { CHECK(tunableop::cuda::launch(empty_kernel, dim3(1), dim3(32), 0, st, pdl)); },
        s);
  };
  const double empty_plain_us = empty_us(false), empty_pdl_us = empty_us(true);
  std::printf(
      "%s, %d SMs, L2 %zu MB; copy %.1f GB/s (read + write); empty kernel in a graph: %.2f us, %.2f us "
      "with PDL\n\n",
      prop.name, sms, l2 >> 20, gbs, empty_plain_us, empty_pdl_us);

  // K and V bytes of the suite's decode shapes (bf16): batch x keys x kv heads x head dim x 2 x 2.
  const std::vector<Shape> shapes = {{"gemma-2b.decode1024", size_t(1024) * 256 * 4},
                                     {"gemma-2b.decode4096", size_t(4096) * 256 * 4},
                                     {"gemma-2b.decode16384", size_t(16384) * 256 * 4},
                                     {"llama2-7b.decode1024", size_t(1024) * 32 * 128 * 4},
                                     {"llama2-7b.decode4096", size_t(4096) * 32 * 128 * 4},
                                     {"llama2-7b.decode16384", size_t(16384) * 32 * 128 * 4},
                                     {"llama2-7b.decode4096.b8", size_t(8) * 4096 * 32 * 128 * 4}};
  std::vector<Config> configs;
  for (int bps : {1, 2, 4, 8})
    for (int threads : {128, 256, 512, 1024})
      for (int unroll : {4, 8})
        if (bps * threads <= 2048) configs.push_back({bps * sms, threads, unroll});

  std::printf(
      "| shape | KV MB | floor us | copies cold / suite | read, cold | read + merge, cold | read + merge + PDL, cold "
      "| read + merge + PDL, suite copies | best grid (cold, merge, PDL) |\n|---|---|---|---|---|---|---|---|---|\n");
  Buffers b;
  CHECK(cudaMalloc(&b.partials, sizeof(unsigned) * 8 * size_t(sms)));
  CHECK(cudaMalloc(&b.ticket, sizeof(unsigned)));
  CHECK(cudaMalloc(&b.out, sizeof(unsigned)));
  CHECK(cudaMemset(b.ticket, 0, sizeof(unsigned)));
  for (const Shape& sh : shapes) {
    const size_t cold = std::max<size_t>(2, (4 * l2 + sh.bytes - 1) / sh.bytes);
    const size_t suite = std::clamp<size_t>((4 * l2 + sh.bytes - 1) / sh.bytes, 1, 8);
    b.n16 = sh.bytes / 16;
    for (size_t i = 0; i < cold; ++i) {
      uint4* p = nullptr;
      CHECK(cudaMalloc(&p, sh.bytes));
      CHECK(cudaMemset(p, int(i), sh.bytes));
      b.copies.push_back(p);
    }
    const double floor_us = double(sh.bytes) / (gbs * 1e9) * 1e6;
    auto best_of = [&](size_t copies, bool merge, bool pdl) {
      Best best;
      const int calls = int(std::max<size_t>(32, copies));
      for (const Config& c : configs) {
        const double us = graph_us_per_call(
            calls, [&](int i, cudaStream_t st) { launch(b, int(size_t(i) % copies), c, merge, pdl, st); }, s);
        if (us < best.us) best = {us, c};
      }
      return best;
    };
    const Best read = best_of(cold, false, false), merged = best_of(cold, true, false), pdl = best_of(cold, true, true),
               warm = best_of(suite, true, true);
    auto cell = [&](const Best& x) {
      char buf[48];
      std::snprintf(buf, sizeof buf, "%.2f us, %.0f%%", x.us, 100 * floor_us / x.us);
      return std::string(buf);
    };
    std::printf("| %s | %.1f | %.2f | %zu / %zu | %s | %s | %s | %s | %d x %d threads, %d loads |\n", sh.name.c_str(),
                double(sh.bytes) / 1048576.0, floor_us, cold, suite, cell(read).c_str(), cell(merged).c_str(),
                cell(pdl).c_str(), cell(warm).c_str(), pdl.c.blocks, pdl.c.threads, pdl.c.unroll);
    std::fflush(stdout);
    for (uint4* p : b.copies) CHECK(cudaFree(p));
    b.copies.clear();
  }
  CHECK(cudaDeviceSynchronize());
  return 0;
}

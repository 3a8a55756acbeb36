// How many thread-block clusters of each size fit on this GPU at once, by shared memory per block
// (cudaOccupancyMaxActiveClusters): a cluster's blocks must share a GPC, so the count is not
// SMs x blocks-per-SM / cluster. Why the streaming decode candidates (decode_stream_candidates.cc)
// use clusters of 2: on an H200 only 30 clusters of 8 fit at two blocks an SM. Not a test.
#include <cuda_runtime.h>

#include <cstdio>

namespace {

__global__ void probe_kernel(int* out) {
  extern __shared__ int smem[];
  if (out) out[0] = smem[threadIdx.x];
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "cluster_fit: no CUDA GPU\n");
    return 1;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("%s, %d SMs; blocks of 160 threads\n", prop.name, prop.multiProcessorCount);
  cudaFuncSetAttribute(probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024);
  cudaFuncSetAttribute(probe_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  std::printf("| cluster | KB a block | blocks an SM | clusters at once | blocks at once |\n|---|---|---|---|---|\n");
  for (int cluster : {2, 4, 8, 16}) {
    for (int kb : {32, 48, 64, 96, 110, 128, 192}) {
      cudaLaunchAttribute attr{};
      attr.id = cudaLaunchAttributeClusterDimension;
      attr.val.clusterDim.x = unsigned(cluster), attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(unsigned(cluster) * 32, 1, 1);
      cfg.blockDim = dim3(160, 1, 1);
      cfg.dynamicSmemBytes = size_t(kb) * 1024;
      cfg.attrs = &attr;
      cfg.numAttrs = 1;
      int clusters = -1, per_sm = 0;
      const cudaError_t err = cudaOccupancyMaxActiveClusters(&clusters, reinterpret_cast<void*>(probe_kernel), &cfg);
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, probe_kernel, 160, cfg.dynamicSmemBytes);
      if (err != cudaSuccess) {
        std::printf("| %d | %d | %d | %s | |\n", cluster, kb, per_sm, cudaGetErrorString(err));
      } else {
        std::printf("| %d | %d | %d | %d | %d |\n", cluster, kb, per_sm, clusters, clusters * cluster);
      }
    }
  }
  return 0;
}

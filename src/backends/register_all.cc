// The one list of backends. Order matters: within a device, candidates are tried in this
// order (Default first), and the tuner prunes against the best found so far.
#include "backends/register_all.h"

#include "backends/cpu_runtime.h"
#include "tunableop/context.h"
#ifdef TUNABLEOP_HAVE_CPU_KERNELS
#include "backends/cpu/all_reduce/host_all_reduce.h"
#include "backends/cpu/attention/cpu_attention.h"
#include "backends/cpu/kernels/register.h"
#endif
#ifdef TUNABLEOP_HAVE_OPENBLAS
#include "backends/cpu/openblas/register.h"
#endif
#ifdef TUNABLEOP_HAVE_BLIS
#include "backends/cpu/blis/register.h"
#endif
#ifdef TUNABLEOP_HAVE_ONEDNN
#include "backends/cpu/onednn/register.h"
#endif
#ifdef TUNABLEOP_HAVE_CUDA_BACKEND
#include "backends/cuda/register.h"
#endif

namespace tunableop {

void register_all_backends(Registry& r) {
  register_cpu_runtime(r);
#ifdef TUNABLEOP_HAVE_CPU_KERNELS
  register_cpu_kernels(r);
  cpu::register_host_all_reduce(r);  // the CPU's all-reduce communicator (host-thread ranks)
  register_cpu_attention(r);         // its math path runs on our blocked GEMM kernel
#endif
#ifdef TUNABLEOP_HAVE_OPENBLAS
  register_openblas(r);
#endif
#ifdef TUNABLEOP_HAVE_BLIS
  register_blis(r);
#endif
#ifdef TUNABLEOP_HAVE_ONEDNN
  register_onednn(r);
#endif
#ifdef TUNABLEOP_HAVE_CUDA_BACKEND
  register_cuda(r);
#endif
}

Context::Context(Device device, Config config) : Context(device, std::move(config), register_all_backends) {}

Context& default_context() {
  static Context ctx;
  return ctx;
}

}  // namespace tunableop

// The CPU backend's one list. Order matters: within a device, candidates are tried in this
// order (Default first), and the tuner prunes against the best found so far.
#include "backends/cpu/register.h"

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

namespace tunableop {

void register_backend_cpu(Registry& r) {
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
}

}  // namespace tunableop

extern "C" __attribute__((visibility("default"))) void tunableop_register_backend_cpu(void* registry) {
  tunableop::register_backend_cpu(*static_cast<tunableop::Registry*>(registry));
}

// Linked from tunableop_ops and tunableop_core alone: GEMM dispatch works with a candidate the
// program registers itself, without the registry glue or any backend.
#include <cstdio>

#include "tunableop/context.h"
#include "tunableop/gemm.h"

int main() {
  using namespace tunableop;
  Context ctx(Device::cpu(), Config::defaults_only(), [](Registry& r) {
    GemmCandidate c;
    c.name = "Default";
    c.supports = [](const GemmParams&) { return Status::ok(); };
    c.run = [](const GemmParams& p, const GemmOperands& o) {
      static_cast<float*>(o.c)[0] = float(p.k);  // 1 x 1 x k of ones
      return Status::ok();
    };
    r.list<GemmCandidate>().push_back(c);
  });
  float a[3] = {1, 1, 1}, b[3] = {1, 1, 1}, c[1] = {0};
  GemmParams p;
  p.m = p.n = 1;
  p.k = 3;
  auto plan = ctx.plan(p);
  Status st = plan.is_ok() ? plan->run({a, b, c}) : plan.status();
  std::printf("ops alone: %s c=%g\n", st.to_string().c_str(), c[0]);
  return st.is_ok() && c[0] == 3.0f ? 0 : 1;
}

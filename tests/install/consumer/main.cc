// Built against an installed tunableop: one tuned GEMM through the public API.
#include <tunableop/gemm.h>

#include <cstdio>
#include <vector>

int main() {
  tunableop::Context ctx;
  (void)ctx.config().set(tunableop::Setting::kEnabled, false);  // no results file needed
  std::vector<float> a(6, 1.0f), b(6, 2.0f), c(4, 0.0f);
  tunableop::GemmParams p;
  p.m = 2, p.n = 2, p.k = 3;
  tunableop::Status st = tunableop::gemm(ctx, p, {a.data(), b.data(), c.data()});
  std::printf("%s c[0]=%g\n", st.to_string().c_str(), c[0]);
  return st.is_ok() && c[0] == 6.0f ? 0 : 1;
}

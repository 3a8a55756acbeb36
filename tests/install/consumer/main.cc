// Built against an installed tunableop: one GEMM through the public API, on the CPU backend
// (a library of its own: linked with the static libtunableop, opened by the shared one).
#include <tunableop/context.h>
#include <tunableop/gemm.h>

#include <cstdio>
#include <vector>

int main() {
  tunableop::Context ctx;
  (void)ctx.config().set(tunableop::Setting::kEnabled, false);  // no results file needed
  const auto* list = ctx.registry().find_list<tunableop::GemmCandidate>();
  const size_t candidates = list ? list->size() : 0;
  for (const std::string& note : ctx.registry().notes()) std::printf("note: %s\n", note.c_str());
  std::vector<float> a(6, 1.0f), b(6, 2.0f), c(4, 0.0f);
  tunableop::GemmParams p;
  p.m = 2, p.n = 2, p.k = 3;
  tunableop::Status st = tunableop::gemm(ctx, p, {a.data(), b.data(), c.data()});
  std::printf("%s c[0]=%g, %zu GEMM candidates registered\n", st.to_string().c_str(), c[0], candidates);
  return st.is_ok() && c[0] == 6.0f && candidates > 1 ? 0 : 1;
}

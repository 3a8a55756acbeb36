// Built against an installed tunableop: the engine's library and headers (tunableop::llm).
#include <llm/random_model.h>

#include <cstdio>

int main() {
  auto c = tunableop::llm::preset_config("tiny");
  if (!c.is_ok()) {
    std::printf("%s\n", c.status().to_string().c_str());
    return 1;
  }
  std::printf("tiny: %lld layers\n", static_cast<long long>(c->num_layers));
  return c->num_layers > 0 ? 0 : 1;
}

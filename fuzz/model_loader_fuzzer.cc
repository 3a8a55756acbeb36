// Fuzzes the model loader: config.json parsing and a safetensors file (header and data) read
// together as a Hugging Face directory, the way `tunableop llm --model DIR` reads them. Input
// layout: 2 bytes little-endian length L, L bytes of config.json, the rest is model.safetensors.
// No input may crash, read outside the mapping, or allocate more than the checkpoint justifies;
// a model that loads has exactly the buffers its config describes.
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "llm/config.h"
#include "llm/safetensors.h"
#include "llm/weights.h"

using namespace tunableop;
using namespace tunableop::llm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string config, tensors;
  if (!tunableop::fuzz::split_input(data, size, config, tensors)) return 0;

  auto parsed = parse_model_config(config, "config.json");
  if (parsed.is_ok()) FUZZ_CHECK(parsed->validate("again").is_ok(), "a parsed config does not validate");

  tunableop::fuzz::clear_scratch();
  const std::string dir = tunableop::fuzz::scratch_dir();
  tunableop::fuzz::write_file(dir + "/config.json", config);
  tunableop::fuzz::write_file(dir + "/model.safetensors", tensors);
  if (auto f = SafetensorsFile::open(dir + "/model.safetensors"); f.is_ok()) {
    for (const auto& [name, t] : (*f)->tensors()) {
      // Every byte of every tensor is inside the mapped file: touch the first and the last.
      if (t.bytes > 0) {
        volatile uint8_t x = t.data[0];
        x = t.data[t.bytes - 1];
        (void)x;
      }
    }
  }
  auto w = load_model(dir);
  if (!w.is_ok()) return 0;
  const ModelConfig& c = w->config;
  FUZZ_CHECK(int64_t(w->embed.size()) == c.vocab_size * c.hidden_size, "embed has the wrong size");
  FUZZ_CHECK(int64_t(w->layers.size()) == c.num_layers, "wrong number of layers");
  FUZZ_CHECK(w->bytes() == c.parameter_count() * 4, "weights (%lld bytes) differ from the config (%lld parameters)",
             (long long)w->bytes(), (long long)c.parameter_count());
  return 0;
}

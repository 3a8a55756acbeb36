#include "bench_suites.h"

#include <fmt/format.h>

#include "cli_support.h"
#include "tunableop/checked_size.h"
#include "tunableop/safe_file.h"

namespace tunableop::cli {

namespace {

struct Layer {
  const char* name;
  int64_t out, in;
};

// Projection shapes of the two models in the seed's experiment (fused qkv and gate_up as
// inference engines run them). Llama-2-7B: hidden 4096, 32 heads, MLP 11008, vocab 32000.
// Gemma-2B: hidden 2048, 8 query heads + 1 kv head of 256, MLP 16384, vocab 256000.
const Layer kLlama[] = {{"llama2-7b.qkv", 12288, 4096},
                        {"llama2-7b.o", 4096, 4096},
                        {"llama2-7b.gate_up", 22016, 4096},
                        {"llama2-7b.down", 4096, 11008},
                        {"llama2-7b.lm_head", 32000, 4096}};
const Layer kGemma[] = {{"gemma-2b.qkv", 2560, 2048},
                        {"gemma-2b.o", 2048, 2048},
                        {"gemma-2b.gate_up", 32768, 2048},
                        {"gemma-2b.down", 2048, 16384},
                        {"gemma-2b.lm_head", 256000, 2048}};

SuiteShape shape(std::string name, DType dt, int64_t out, int64_t tokens, int64_t in) {
  return {fmt::format("{}@{}", name, tokens), linear_params(dt, tokens, in, out)};
}

}  // namespace

std::vector<SuiteShape> suite_shapes(const std::string& suite) {
  std::vector<SuiteShape> out;
  if (suite == "cpu-llm") {
    // fp32 on a 2-core CPU: the big layers are cut to a quarter of their output features (and
    // Gemma's down projection to a quarter of its input) so that a whole suite, tuning
    // included, runs in minutes; the shape class (skinny decode vs prefill) is what matters.
    for (int64_t t : {1, 8, 128}) {
      out.push_back(shape("llama2-7b.qkv/4", DType::kF32, 12288 / 4, t, 4096));
      out.push_back(shape("llama2-7b.o", DType::kF32, 4096, t, 4096));
      out.push_back(shape("llama2-7b.gate_up/4", DType::kF32, 22016 / 4, t, 4096));
      out.push_back(shape("llama2-7b.down/4", DType::kF32, 4096, t, 11008 / 4));
      out.push_back(shape("gemma-2b.qkv", DType::kF32, 2560, t, 2048));
      out.push_back(shape("gemma-2b.o", DType::kF32, 2048, t, 2048));
      out.push_back(shape("gemma-2b.gate_up/4", DType::kF32, 32768 / 4, t, 2048));
      out.push_back(shape("gemma-2b.down/4", DType::kF32, 2048, t, 16384 / 4));
    }
  } else if (suite == "llm") {
    for (int64_t t : {1, 8, 2048}) {
      for (const auto& l : kLlama) out.push_back(shape(l.name, DType::kBF16, l.out, t, l.in));
      for (const auto& l : kGemma) out.push_back(shape(l.name, DType::kBF16, l.out, t, l.in));
    }
    for (int64_t t : {1, 2048}) {
      out.push_back(shape("vocab50257", DType::kBF16, 50257, t, 4096));
      out.push_back(shape("vocab32001", DType::kBF16, 32001, t, 4096));
    }
  }
  return out;
}

StatusOr<std::vector<SuiteShape>> read_suite_file(const std::string& path) {
  auto text = read_regular_file(path);  // never blocks on a FIFO; refuses directories, devices
  if (!text.is_ok()) return Status(text.status().code(), "suite file " + text.status().message());
  std::vector<SuiteShape> out;
  size_t start = text->rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0;  // a UTF-8 byte order mark
  for (int no = 1; start < text->size(); ++no) {
    size_t nl = text->find('\n', start);
    std::string line = text->substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    start = nl == std::string::npos ? text->size() : nl + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos || line[0] == '#') continue;
    std::vector<std::string> f;
    for (size_t at = 0;;) {
      size_t comma = line.find(',', at);
      f.push_back(line.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
    auto bad = [&](const std::string& why) { return Status::parse_error(fmt::format("{}:{}: {}", path, no, why)); };
    if (f.size() != 7) return bad("expected name,dtype,transa,transb,m,n,k");
    auto dt = parse_dtype(f[1]);
    if (!dt.is_ok()) return bad(dt.status().message());
    GemmParams p;
    p.dtype = *dt;
    p.transa = f[2].empty() ? '?' : f[2][0];
    p.transb = f[3].empty() ? '?' : f[3][0];
    if (!parse_int64(f[4], &p.m, 0) || !parse_int64(f[5], &p.n, 0) || !parse_int64(f[6], &p.k, 0))
      return bad("m, n, k must be non-negative integers");
    p = p.with_defaults();
    Status st = p.validate();
    if (!st.is_ok()) return bad(st.message());
    out.push_back({printable(f[0]), p});  // printed in tables and logs: no escape sequences from a file
  }
  return out;
}

}  // namespace tunableop::cli

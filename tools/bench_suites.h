// LLM-shaped GEMM suites (column-major TN: m = out features, n = tokens, k = in features).
#pragma once

#include <string>
#include <vector>

#include "tunableop/gemm.h"

namespace tunableop::cli {

struct SuiteShape {
  std::string name;  // "gemma2b.qkv"
  GemmParams p;
};

// "cpu-llm" (fp32, CPU-sized) or "llm" (bf16, GPU); empty when unknown.
std::vector<SuiteShape> suite_shapes(const std::string& suite);
// A CSV file of "name,dtype,transa,transb,m,n,k" lines (# comments allowed).
StatusOr<std::vector<SuiteShape>> read_suite_file(const std::string& path);

}  // namespace tunableop::cli

// `tunableop bench --suite llm-fp8` (bench_fp8.cc): the 34 shapes of the "llm" suite as
// ScaledGemm problems (e4m3 x e4m3, rowwise scales, bf16 out): tuned vs Default, which is
// cuBLASLt's first heuristic answer, what torch._scaled_mm runs.
#pragma once

#include <string>

#include "tunableop/context.h"

namespace tunableop::cli {

struct Fp8SuiteArgs {
  std::string only, csv, results;
  int rounds = 5;
};

int bench_fp8_suite(Context& ctx, const Fp8SuiteArgs& a, void* stream);

}  // namespace tunableop::cli

// `tunableop bench --suite attention` (bench_attention.cc).
#pragma once

#include <string>

#include "tunableop/context.h"

namespace tunableop::cli {

struct AttentionSuiteArgs {
  std::string only, csv, results, shapes_csv;
  int rounds = 5;
};

int bench_attention_suite(Context& ctx, const AttentionSuiteArgs& a, void* stream);

}  // namespace tunableop::cli

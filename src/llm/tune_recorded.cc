#include "llm/tune_recorded.h"

#include "ops/attention/dispatch.h"
#include "ops/gemm/dispatch.h"

namespace tunableop::llm {

bool tunable_from_key(const std::string& op) {
  return op.rfind("GemmTunableOp_", 0) == 0 || op.rfind("GemmStridedBatchedTunableOp_", 0) == 0 ||
         op.rfind("AttentionTunableOp_", 0) == 0;
}

StatusOr<std::string> tune_recorded(Context& ctx, const std::string& op, const std::string& params, void* stream) {
  StatusOr<TuningReport> report = Status::unsupported(op + ": not tuned from its key");
  if (op.rfind("AttentionTunableOp_", 0) == 0) {
    auto p = parse_attention_signature(op, params);
    if (!p.is_ok()) return p.status();
    report = AttentionDispatch::tune(ctx, *p, false, stream);
  } else if (tunable_from_key(op)) {
    auto p = parse_gemm_signature(op, params);
    if (!p.is_ok()) return p.status();
    report = tune_gemm(ctx, *p, false, stream);
  }
  if (!report.is_ok()) return report.status();
  return report->winner.solution;
}

}  // namespace tunableop::llm

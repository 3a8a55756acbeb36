// All-reduce params: validation and the results-file signatures.
#include <fmt/format.h>

#include <cstdlib>

#include "tunableop/all_reduce.h"

namespace tunableop {

const char* reduce_op_name(ReduceOp op) { return op == ReduceOp::kSum ? "sum" : "?"; }

Status AllReduceParams::validate() const {
  if (count < 0) return Status::invalid_argument(fmt::format("all-reduce count must be >= 0, got {}", count));
  if (world_size < 1 || world_size > kMaxRanks)
    return Status::invalid_argument(
        fmt::format("all-reduce world_size must be in [1, {}], got {}", kMaxRanks, world_size));
  if (op != ReduceOp::kSum) return Status::invalid_argument("all-reduce op must be sum");
  if (dtype != DType::kF32 && dtype != DType::kF64 && dtype != DType::kBF16 && dtype != DType::kF16)
    return Status::invalid_argument("all-reduce dtype must be fp32, fp64, bf16 or fp16");
  if (epilogue != AllReduceEpilogue::kNone && epilogue != AllReduceEpilogue::kAddResidual)
    return Status::invalid_argument("all-reduce epilogue must be none or add-residual");
  if (adds_residual() && (dtype == DType::kF64 || round_to == DType::kF64))
    return Status::invalid_argument("an all-reduce into the residual stream sums fp32, bf16 or fp16 (not fp64)");
  if (count > (int64_t(1) << 40) / int64_t(dtype_size(dtype)))
    return Status::invalid_argument(fmt::format("all-reduce count {} is too large", count));
  return Status::ok();
}

std::string all_reduce_op_signature(const AllReduceParams& p) {
  return fmt::format("AllReduceTunableOp_{}_{}", dtype_torch_name(p.dtype), reduce_op_name(p.op));
}

std::string all_reduce_params_signature(const AllReduceParams& p) {
  std::string s = fmt::format("n_{}_ranks_{}", p.count, p.world_size);
  if (p.adds_residual()) s += fmt::format("_residual_{}", dtype_torch_name(p.round_to));
  return s;
}

namespace {

// A decimal integer that is all of `s`.
bool parse_int(const std::string& s, int64_t* out) {
  if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos) return false;
  *out = std::strtoll(s.c_str(), nullptr, 10);
  return true;
}

}  // namespace

StatusOr<AllReduceParams> parse_all_reduce_signature(const std::string& op, const std::string& params) {
  auto bad = [&](const std::string& why) {
    return Status::parse_error(fmt::format("cannot read all-reduce problem '{},{}': {}", op, params, why));
  };
  const std::string prefix = "AllReduceTunableOp_", suffix = "_sum";
  if (op.rfind(prefix, 0) != 0 || op.size() <= prefix.size() + suffix.size() ||
      op.compare(op.size() - suffix.size(), suffix.size(), suffix) != 0)
    return bad("op must look like AllReduceTunableOp_<dtype>_sum");
  auto dtype = parse_dtype(op.substr(prefix.size(), op.size() - prefix.size() - suffix.size()));
  if (!dtype.is_ok()) return bad(dtype.status().message());
  AllReduceParams p;
  p.dtype = *dtype;
  const size_t ranks = params.find("_ranks_"), residual = params.find("_residual_");
  int64_t count = 0, world = 0;
  const size_t world_end = residual == std::string::npos ? params.size() : residual;
  if (params.rfind("n_", 0) != 0 || ranks == std::string::npos || world_end < ranks + 7 ||
      !parse_int(params.substr(2, ranks - 2), &count) ||
      !parse_int(params.substr(ranks + 7, world_end - ranks - 7), &world))
    return bad("params must look like n_<count>_ranks_<world_size>[_residual_<dtype>]");
  if (residual != std::string::npos) {
    auto round_to = parse_dtype(params.substr(residual + 10));
    if (!round_to.is_ok()) return bad(round_to.status().message());
    p.epilogue = AllReduceEpilogue::kAddResidual;
    p.round_to = *round_to;
  }
  p.count = count;
  p.world_size = int(std::min<int64_t>(world, 1 << 20));
  if (Status st = p.validate(); !st.is_ok()) return bad(st.message());
  return p;
}

AllReduceOperands AllReduceOperands::for_rank(Communicator& comm, int rank, const void* input, void* output,
                                              void* stream) {
  AllReduceOperands o;
  o.comm = &comm;
  o.rank = rank;
  if (rank >= 0 && rank < kMaxRanks) {
    o.input[size_t(rank)] = input;
    o.output[size_t(rank)] = output;
    o.stream[size_t(rank)] = stream;
  }
  return o;
}

}  // namespace tunableop

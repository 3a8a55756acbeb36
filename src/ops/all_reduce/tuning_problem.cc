#include "ops/all_reduce/tuning_problem.h"

#include <fmt/format.h>

#include <cstring>
#include <limits>
#include <random>

#include "ops/all_reduce/reference.h"
#include "ops/framework/elements.h"

namespace tunableop::ops {

std::vector<uint8_t> tuning_input(const AllReduceParams& p, int rank) {
  std::vector<uint8_t> in(std::max<size_t>(p.bytes(), 16), 0);
  std::mt19937_64 rng(0x5eed + uint64_t(rank));
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (int64_t i = 0; i < p.count; ++i) store_from_double(p.dtype, in.data(), i, dist(rng));
  return in;
}

std::vector<uint8_t> tuning_initial_output(const AllReduceParams& p) {
  std::vector<uint8_t> out(std::max<size_t>(p.output_bytes(), 16), 0);
  std::mt19937_64 residual_rng(0x7e5d);
  std::uniform_real_distribution<double> residual_dist(-4.0, 4.0);
  for (int64_t i = 0; i < p.count; ++i) {
    if (p.adds_residual())
      store_from_double(DType::kF32, out.data(), i, double(float(residual_dist(residual_rng))));
    else
      store_from_double(p.dtype, out.data(), i, std::numeric_limits<double>::quiet_NaN());
  }
  return out;
}

std::vector<double> tuning_reference(const AllReduceParams& p, const std::vector<std::vector<uint8_t>>& inputs) {
  std::vector<const void*> ins;
  for (const auto& in : inputs) ins.push_back(in.data());
  std::vector<double> ref = all_reduce_reference(p, ins);
  if (p.adds_residual()) {  // residual + the sum rounded as the epilogue rounds it
    const std::vector<uint8_t> residual = tuning_initial_output(p);
    for (size_t i = 0; i < ref.size(); ++i)
      ref[i] =
          load_as_double(DType::kF32, residual.data(), int64_t(i)) + round_as(p.round_to, round_as(p.dtype, ref[i]));
  }
  return ref;
}

Status check_rank_output(const AllReduceParams& p, const std::string& name, const char* how, int rank,
                         const void* output, const void* first, const std::vector<double>& ref) {
  const double err = all_reduce_error(p, output, ref), tol = all_reduce_tolerance(p);
  if (!(err <= tol))
    return Status::numerics(fmt::format("{} ({}): rank {} has relative error {:.3g} against the sum (tolerance {:.3g})",
                                        name, how, rank, err, tol));
  if (first && std::memcmp(first, output, p.output_bytes()) != 0)
    return Status::numerics(
        fmt::format("{} ({}): ranks 0 and {} hold different sums (every rank must get the "
                    "same bits, or tensor-parallel ranks drift apart)",
                    name, how, rank));
  return Status::ok();
}

StatusOr<std::unique_ptr<AllReduceTuningProblem>> AllReduceTuningProblem::create(
    Communicator& comm, const AllReduceParams& p, std::vector<AllReduceCandidate> candidates) {
  if (candidates.empty() || candidates.front().name != "Default")
    return Status::internal("all-reduce candidates must start with Default");
  if (p.world_size != comm.world_size())
    return Status::invalid_argument(
        fmt::format("all-reduce of {} ranks on a communicator of {}", p.world_size, comm.world_size()));
  if (comm.group()) return Status::internal("a process-mode communicator tunes through process_tuning.h");
  std::unique_ptr<AllReduceTuningProblem> pr(new AllReduceTuningProblem(comm, p, std::move(candidates)));
  const size_t bytes = std::max<size_t>(p.bytes(), 16), out_bytes = std::max<size_t>(p.output_bytes(), 16);
  const int W = p.world_size;
  pr->poison_ = tuning_initial_output(p);
  pr->out_of_place_.comm = pr->in_place_.comm = &comm;
  for (int r = 0; r < W; ++r) {
    pr->host_in_.push_back(tuning_input(p, r));
    for (auto* list : {&pr->in_, &pr->out_}) {
      const size_t n = list == &pr->in_ ? bytes : out_bytes;
      auto m = comm.alloc(r, n);
      if (!m.is_ok())
        return Status(m.status().code(), fmt::format("all-reduce tuning needs {} bytes on rank {}: {}",
                                                     bytes + out_bytes, r, m.status().message()));
      list->push_back(*m);
    }
    TUNABLEOP_RETURN_IF_ERROR(comm.copy_to_device(r, pr->in_[size_t(r)], pr->host_in_.back().data(), bytes));
    const size_t ur = size_t(r);
    pr->out_of_place_.input[ur] = pr->in_[ur];
    pr->out_of_place_.output[ur] = pr->in_place_.output[ur] = pr->out_[ur];
    pr->in_place_.input[ur] = pr->out_[ur];
    pr->out_of_place_.stream[ur] = pr->in_place_.stream[ur] = comm.stream(r);
  }
  pr->ref_ = tuning_reference(p, pr->host_in_);
  pr->timer_ = comm.make_timer();
  return pr;
}

AllReduceTuningProblem::~AllReduceTuningProblem() {
  (void)synchronize_all();
  for (size_t r = 0; r < in_.size(); ++r) comm_.free(int(r), in_[r]);
  for (size_t r = 0; r < out_.size(); ++r) comm_.free(int(r), out_[r]);
}

Status AllReduceTuningProblem::synchronize_all() {
  for (int r = 0; r < comm_.world_size(); ++r) TUNABLEOP_RETURN_IF_ERROR(comm_.synchronize(r, nullptr));
  return Status::ok();
}

Status AllReduceTuningProblem::check_outputs(size_t i, const AllReduceOperands& ops, const char* how) {
  TUNABLEOP_RETURN_IF_ERROR(cands_[i].run(p_, ops));
  TUNABLEOP_RETURN_IF_ERROR(synchronize_all());
  const size_t bytes = p_.output_bytes();
  std::vector<uint8_t> first(bytes), got(bytes);
  for (int r = 0; r < comm_.world_size(); ++r) {
    std::vector<uint8_t>& host = r == 0 ? first : got;
    TUNABLEOP_RETURN_IF_ERROR(comm_.copy_to_host(r, host.data(), out_[size_t(r)], bytes));
    TUNABLEOP_RETURN_IF_ERROR(
        check_rank_output(p_, cands_[i].name, how, r, host.data(), r > 0 ? first.data() : nullptr, ref_));
  }
  return Status::ok();
}

Status AllReduceTuningProblem::check_numerics(size_t i) {
  const size_t bytes = p_.bytes();
  if (bytes == 0) return Status::ok();
  for (int r = 0; r < comm_.world_size(); ++r)
    TUNABLEOP_RETURN_IF_ERROR(comm_.copy_to_device(r, out_[size_t(r)], poison_.data(), p_.output_bytes()));
  TUNABLEOP_RETURN_IF_ERROR(check_outputs(i, out_of_place_, p_.adds_residual() ? "into the residual" : "out of place"));
  if (p_.adds_residual()) return Status::ok();  // no in-place form: the output is another buffer
  for (int r = 0; r < comm_.world_size(); ++r)
    TUNABLEOP_RETURN_IF_ERROR(comm_.copy_to_device(r, out_[size_t(r)], host_in_[size_t(r)].data(), bytes));
  return check_outputs(i, in_place_, "in place");
}

}  // namespace tunableop::ops

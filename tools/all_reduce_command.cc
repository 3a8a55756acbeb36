// `tunableop allreduce`: the all-reduce op's latency table. For each message size, every
// candidate on a communicator over the GPUs (or CPU ranks) is checked against the host sum and
// timed back to back in group mode (one thread launches every rank's part; the slowest rank's
// time counts); with --tune the op then decides as the engine would (results file, tuning on a
// miss) and the table marks its choice. --residual DTYPE times tensor parallelism's form: the
// inputs (--dtype, fp32 in the engine) summed, rounded to DTYPE and added to an fp32 residual.
// Under `mpirun -np N` each process is one rank (multi-process tensor parallelism's form).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <sstream>

#include "commands.h"
#include "mpi_group.h"
#include "tunableop/all_reduce.h"
#include "tunableop/checked_size.h"
#include "tunableop/context.h"
#include "tunableop/op_tools.h"

namespace tunableop::cli {
namespace {

struct AllReduceArgs {
  std::string device = "cuda", gpus = "0,1", dtype = "bf16", sizes = "8K,64K,1M,16M", residual;
  int ranks = 2;  // cpu
  int iterations = 50, rounds = 5;
  bool tune = false;
  int effort = 2;
};

// "8K" -> 8192, "1M" -> 1048576, "4096" -> 4096 (bytes).
StatusOr<std::vector<size_t>> parse_sizes(const std::string& list) {
  std::vector<size_t> out;
  std::stringstream ss(list);
  for (std::string t; std::getline(ss, t, ',');) {
    size_t mult = 1;
    if (!t.empty() && (t.back() == 'K' || t.back() == 'k')) mult = size_t(1) << 10;
    if (!t.empty() && (t.back() == 'M' || t.back() == 'm')) mult = size_t(1) << 20;
    if (mult > 1) t.pop_back();
    if (t.empty() || t.find_first_not_of("0123456789") != std::string::npos || t.size() > 9)
      return Status::invalid_argument("--sizes: '" + t + "' is not a size (e.g. 8K, 64K, 1M, 16M)");
    out.push_back(size_t(std::stoul(t)) * mult);
  }
  if (out.empty()) return Status::invalid_argument("--sizes: no sizes");
  return out;
}

std::string size_name(size_t b) {
  if (b % (size_t(1) << 20) == 0) return fmt::format("{} MiB", b >> 20);
  if (b % (size_t(1) << 10) == 0) return fmt::format("{} KiB", b >> 10);
  return fmt::format("{} B", b);
}

struct Buffers {
  Communicator& comm;
  AllReduceParams p;
  std::vector<void*> in, out;
  std::vector<std::vector<uint8_t>> host;
  std::vector<double> ref;
  Buffers(Communicator& c, const AllReduceParams& params) : comm(c), p(params) {}
  ~Buffers() {
    for (size_t r = 0; r < in.size(); ++r) comm.free(int(r), in[r]);
    for (size_t r = 0; r < out.size(); ++r) comm.free(int(r), out[r]);
  }
  Status make() {
    std::vector<const void*> hosts;
    for (int r = 0; r < p.world_size; ++r) {
      std::mt19937_64 rng(uint64_t(r) + 1);
      std::uniform_real_distribution<double> dist(-1, 1);
      host.emplace_back(p.bytes());
      for (int64_t i = 0; i < p.count; ++i) store_from_double(p.dtype, host.back().data(), i, dist(rng));
      hosts.push_back(host.back().data());
      for (auto* list : {&in, &out}) {
        auto m = comm.alloc(r, list == &in ? p.bytes() : p.output_bytes());
        if (!m.is_ok()) return m.status();
        list->push_back(*m);
      }
      TUNABLEOP_RETURN_IF_ERROR(comm.copy_to_device(r, in.back(), host.back().data(), p.bytes()));
    }
    ref = all_reduce_reference(p, hosts);
    if (p.adds_residual()) {  // into a residual of zeros (check() resets it)
      for (double& v : ref) v = round_as(p.round_to, round_as(p.dtype, v));
    }
    return Status::ok();
  }
  AllReduceOperands operands() const {
    AllReduceOperands o;
    o.comm = &comm;
    for (int r = 0; r < p.world_size; ++r) {
      o.input[size_t(r)] = in[size_t(r)];
      o.output[size_t(r)] = out[size_t(r)];
      o.stream[size_t(r)] = comm.stream(r);
    }
    return o;
  }
  Status sync() {
    for (int r = 0; r < p.world_size; ++r) TUNABLEOP_RETURN_IF_ERROR(comm.synchronize(r, nullptr));
    return Status::ok();
  }
  // One run of c against the host sum, every rank the same bits.
  Status check(const AllReduceCandidate& c) {
    TUNABLEOP_RETURN_IF_ERROR(c.supports(p));
    const size_t out_bytes = p.output_bytes();
    if (p.adds_residual()) {
      const std::vector<uint8_t> zeros(out_bytes, 0);
      for (int r = 0; r < p.world_size; ++r)
        TUNABLEOP_RETURN_IF_ERROR(comm.copy_to_device(r, out[size_t(r)], zeros.data(), out_bytes));
    }
    TUNABLEOP_RETURN_IF_ERROR(c.run(p, operands()));
    TUNABLEOP_RETURN_IF_ERROR(sync());
    std::vector<uint8_t> first(out_bytes), got(out_bytes);
    for (int r = 0; r < p.world_size; ++r) {
      std::vector<uint8_t>& h = r == 0 ? first : got;
      TUNABLEOP_RETURN_IF_ERROR(comm.copy_to_host(r, h.data(), out[size_t(r)], out_bytes));
      const double err = all_reduce_error(p, h.data(), ref);
      if (!(err <= all_reduce_tolerance(p))) return Status::numerics(fmt::format("rank {} error {:.3g}", r, err));
      if (r > 0 && std::memcmp(first.data(), got.data(), out_bytes) != 0)
        return Status::numerics(fmt::format("ranks 0 and {} differ", r));
    }
    return Status::ok();
  }
  // Median over rounds of (iterations back-to-back runs) / iterations, in microseconds.
  StatusOr<double> time(const AllReduceCandidate& c, Timer& timer, int iterations, int rounds) {
    const AllReduceOperands o = operands();
    for (int i = 0; i < 5; ++i) TUNABLEOP_RETURN_IF_ERROR(c.run(p, o));
    TUNABLEOP_RETURN_IF_ERROR(sync());
    std::vector<double> us;
    for (int k = 0; k < rounds; ++k) {
      timer.start();
      for (int i = 0; i < iterations; ++i) TUNABLEOP_RETURN_IF_ERROR(c.run(p, o));
      us.push_back(timer.stop_ms() * 1e3 / iterations);
    }
    return median(us);
  }
};

int fail(const Status& s) {
  if (mpi_launch().rank == 0) fmt::print(stderr, "tunableop allreduce: {}\n", s.to_string());
  return 2;
}

// The problem of one table row: `bytes` of dtype per rank (--residual: the engine's form).
StatusOr<AllReduceParams> row_params(size_t bytes, DType dtype, const std::string& residual, DType round_to,
                                     int world) {
  AllReduceParams p;
  p.dtype = dtype;
  p.count = int64_t(bytes / dtype_size(dtype));
  p.world_size = world;
  if (!residual.empty()) {
    p.epilogue = AllReduceEpilogue::kAddResidual;
    p.round_to = round_to;
  }
  TUNABLEOP_RETURN_IF_ERROR(p.validate());
  return p;
}

std::string table_header(DType dtype, const std::string& residual, DType round_to, const std::string& comm) {
  return fmt::format(
      "all-reduce ({}, sum{}) on {}\n{:<10} {:<18} {:>10}  {}\n", dtype_name(dtype),
      residual.empty() ? "" : fmt::format(", rounded to {} and added to an fp32 residual", dtype_name(round_to)), comm,
      "size", "candidate", "us/call", "");
}

// `mpirun -np N tunableop allreduce`: one rank per process (its GPU: --gpus' first plus its rank
// on this host), the candidates checked and timed with every rank taking part
// (time_all_reduce_candidates); rank 0 prints. With --tune the op decides as the engine's
// processes would (rank 0 measures, every rank runs its choice).
int run_table_across_processes(const AllReduceArgs& a, DType dtype, const std::vector<size_t>& sizes, DType round_to,
                               int first_gpu) {
  auto mpi = MpiSession::start();
  if (!mpi.is_ok()) return fail(mpi.status());
  const bool lead = (*mpi)->rank() == 0;
  Context ctx(a.device == "cpu" ? Device::cpu() : Device::cuda(first_gpu + (*mpi)->local_rank()));
  (void)ctx.config().set(Setting::kSearchEffort, a.effort);
  if (a.tune) {
    (void)ctx.config().set(Setting::kEnabled, true);
    (void)ctx.config().set(Setting::kTuning, true);
  }
  auto comm = make_process_communicator(ctx, (*mpi)->data());
  if (!comm.is_ok()) return fail(comm.status());
  Communicator& c = **comm;
  if (lead) fmt::print("{}", table_header(dtype, a.residual, round_to, c.describe()));
  for (size_t bytes : sizes) {
    auto p = row_params(bytes, dtype, a.residual, round_to, c.world_size());
    if (!p.is_ok()) return fail(p.status());
    std::string chosen;
    if (a.tune) {  // on zeroed buffers of this rank
      const int me = c.own_rank();
      auto in = c.alloc(me, std::max<size_t>(p->bytes(), 16));
      auto out = c.alloc(me, std::max<size_t>(p->output_bytes(), 16));
      Status st = in.is_ok() ? out.status() : in.status();
      const std::vector<uint8_t> zeros(std::max(p->bytes(), p->output_bytes()) + 16, 0);
      if (st.is_ok()) st = c.copy_to_device(me, *in, zeros.data(), p->bytes());
      if (st.is_ok()) st = c.copy_to_device(me, *out, zeros.data(), p->output_bytes());
      if (st.is_ok()) st = all_reduce(ctx, *p, AllReduceOperands::for_rank(c, me, *in, *out, c.stream(me)));
      if (st.is_ok()) st = c.synchronize(me, nullptr);
      chosen = st.is_ok() ? all_reduce_solution(c, *p) : "";
      if (!st.is_ok() && lead) fmt::print("{:<10} the op could not decide: {}\n", size_name(bytes), st.message());
      if (in.is_ok()) c.free(me, *in);
      if (out.is_ok()) c.free(me, *out);
    }
    auto rows = time_all_reduce_candidates(ctx, c, *p, a.effort, a.iterations, a.rounds);
    if (!rows.is_ok()) return fail(rows.status());
    double best = 0;
    std::string fastest;
    for (const auto& r : *rows)
      if (r.status.is_ok() && (fastest.empty() || r.us < best)) best = r.us, fastest = r.name;
    for (const auto& r : *rows) {
      const std::string cell = r.status.is_ok() ? fmt::format("{:>10.2f}", r.us)
                                                : fmt::format("{:>10}  {}", r.status.is_unsupported() ? "-" : "FAILED",
                                                              r.status.message().substr(0, 90));
      const std::string mark =
          r.name == chosen ? "  <- chosen (tuned)" : (r.name == fastest ? "  <- fastest here" : "");
      fmt::print("{:<10} {:<18} {}{}\n", size_name(bytes), r.name, cell, mark);
    }
    if (a.tune && lead) fmt::print("{:<10} chosen: {}\n", size_name(bytes), chosen.empty() ? "(none)" : chosen);
  }
  if (a.tune && lead) fmt::print("results file: {}\n", ctx.results_path());
  return 0;
}

int run_table(const AllReduceArgs& a) {
  auto dtype = parse_dtype(a.dtype);
  if (!dtype.is_ok()) return fail(dtype.status());
  auto sizes = parse_sizes(a.sizes);
  if (!sizes.is_ok()) return fail(sizes.status());
  StatusOr<DType> round_to = DType::kF32;
  if (!a.residual.empty()) round_to = parse_dtype(a.residual);
  if (!round_to.is_ok()) return fail(round_to.status());
  std::vector<int> devices;
  if (a.device == "cpu") {
    devices.assign(size_t(std::max(a.ranks, 1)), 0);
  } else {
    std::stringstream ss(a.gpus);
    for (std::string t; std::getline(ss, t, ',');) {
      if (t.empty() || t.find_first_not_of("0123456789") != std::string::npos)
        return fail(Status::invalid_argument("--gpus: '" + t + "' is not a GPU number"));
      devices.push_back(std::stoi(t));
    }
  }
  if (mpi_launch().size > 1)
    return run_table_across_processes(a, *dtype, *sizes, *round_to, devices.empty() ? 0 : devices[0]);
  Context ctx(a.device == "cpu" ? Device::cpu() : Device::cuda(devices.empty() ? 0 : devices[0]));
  (void)ctx.config().set(Setting::kSearchEffort, a.effort);
  if (a.tune) {
    (void)ctx.config().set(Setting::kEnabled, true);
    (void)ctx.config().set(Setting::kTuning, true);
  }
  auto comm = make_communicator(ctx, devices);
  if (!comm.is_ok()) return fail(comm.status());
  Communicator& c = **comm;
  fmt::print("{}", table_header(*dtype, a.residual, *round_to, c.describe()));
  std::unique_ptr<Timer> timer = c.make_timer();
  for (size_t bytes : *sizes) {
    auto params = row_params(bytes, *dtype, a.residual, *round_to, c.world_size());
    if (!params.is_ok()) return fail(params.status());
    const AllReduceParams& p = *params;
    // Refused before anything is allocated (`--sizes 8192M` on the CPU was OOM-killed): the host
    // copies of every rank's input, the fp64 reference, two outputs to compare, and on the CPU
    // the ranks' own input and output buffers.
    const CheckedInt ranks = p.world_size, in_bytes = int64_t(p.bytes()), out_bytes = int64_t(p.output_bytes());
    CheckedInt host = ranks * in_bytes + CheckedInt(p.count) * int64_t(sizeof(double)) + out_bytes * 2;
    if (a.device == "cpu") host += ranks * (in_bytes + out_bytes);
    if (Status st = check_available_memory(
            host, fmt::format("an all-reduce of {} over {} ranks", size_name(bytes), p.world_size));
        !st.is_ok())
      return fail(st);
    Buffers b(c, p);
    if (Status st = b.make(); !st.is_ok()) return fail(st);
    std::string chosen;
    if (a.tune) {
      Status st = all_reduce(ctx, p, b.operands());
      if (st.is_ok()) st = b.sync();
      chosen = st.is_ok() ? all_reduce_solution(c, p) : "";
      if (!st.is_ok()) fmt::print("{:<10} the op could not decide: {}\n", size_name(bytes), st.message());
    }
    double best = 0;
    std::string fastest;
    std::vector<std::pair<std::string, std::string>> rows;
    for (const AllReduceCandidate& cand : OpTools<AllReduceOp>::candidates(ctx, p, a.effort)) {
      std::string cell;
      Status st = b.check(cand);
      if (st.is_ok()) {
        auto us = b.time(cand, *timer, a.iterations, a.rounds);
        if (us.is_ok()) {
          cell = fmt::format("{:>10.2f}", *us);
          if (fastest.empty() || *us < best) best = *us, fastest = cand.name;
        } else {
          st = us.status();
        }
      }
      if (!st.is_ok()) {
        cell = fmt::format("{:>10}  {}", st.is_unsupported() ? "-" : "FAILED", st.message().substr(0, 90));
        (void)c.recover();
      }
      rows.emplace_back(cand.name, cell);
    }
    for (const auto& [name, cell] : rows) {
      std::string mark = name == chosen ? "  <- chosen (tuned)" : (name == fastest ? "  <- fastest here" : "");
      fmt::print("{:<10} {:<18} {}{}\n", size_name(bytes), name, cell, mark);
    }
    if (a.tune) fmt::print("{:<10} chosen: {}\n", size_name(bytes), chosen.empty() ? "(none)" : chosen);
  }
  if (a.tune) fmt::print("results file: {}\n", ctx.results_path());
  return 0;
}

}  // namespace

void add_all_reduce_command(CLI::App& app) {
  auto a = std::make_shared<AllReduceArgs>();
  CLI::App* c = app.add_subcommand("allreduce", "All-reduce latency per candidate and message size (the op's table)");
  c->add_option("--device", a->device, "cuda or cpu")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  c->add_option("--gpus", a->gpus, "GPUs of the communicator, a comma list")->capture_default_str();
  c->add_option("--ranks", a->ranks, "cpu: host-thread ranks")->check(CLI::Range(1, 8))->capture_default_str();
  c->add_option("--dtype", a->dtype, "bf16, fp16, fp32 or fp64")->capture_default_str();
  c->add_option("--sizes", a->sizes, "message sizes per rank in bytes (K, M suffixes)")->capture_default_str();
  c->add_option("--residual", a->residual,
                "the engine's row-parallel form: the sum rounded to this dtype (bf16, fp32) and added to an fp32 "
                "residual");
  c->add_option("--iterations", a->iterations, "back-to-back calls per timed sample")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  c->add_option("--rounds", a->rounds, "timed samples (median)")->check(CLI::Range(1, 1000))->capture_default_str();
  c->add_option("--effort", a->effort, "search effort: which candidates (2: all)")
      ->check(CLI::Range(0, 2))
      ->capture_default_str();
  c->add_flag("--tune", a->tune, "also let the op decide (results file, tuning on a miss) and mark its choice");
  c->callback([a]() {
    if (int rc = run_table(*a); rc != 0) std::exit(rc);
  });
}

}  // namespace tunableop::cli

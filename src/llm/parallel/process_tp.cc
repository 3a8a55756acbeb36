#include "llm/parallel/process_tp.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "llm/cpu/cpu_device.h"
#include "llm/model.h"
#include "llm/parallel/tp_engine.h"
#include "llm/parallel/tp_layout.h"
#include "tunableop/all_reduce.h"

namespace tunableop::llm {
namespace {

// The calls rank 0 sends. kEnd: the run is over (rank 0's engine destroyed).
enum class Call : int32_t {
  kEnd = 0,
  kPrefill,
  kDecode,
  kDecodeAhead,
  kCollectAhead,
  kProfileDecode,
  kProfilePrefill,
  kPrefillSlots,
  kDecodeSlots,
  kReleaseSlot,
  kWarmUpSlots,
  kCopyBandwidth,
  kSetTunableOp,
};

// One broadcast per call when its arguments are small (a decode step's tokens), two otherwise.
struct Header {
  static constexpr size_t kInline = 240;
  Call call = Call::kEnd;
  int32_t pad = 0;
  uint64_t bytes = 0;              // of the payload: inline, or in a broadcast that follows
  uint8_t inline_data[kInline]{};  // the payload when bytes <= kInline
};

// A call's arguments as bytes (both ends run the call from them, rank 0 included: one code path).
class Writer {
 public:
  Writer& i64(int64_t v) { return raw(&v, sizeof(v)); }
  Writer& ids(const int32_t* p, int64_t n) {
    i64(n);
    return raw(p, size_t(n) * sizeof(int32_t));
  }
  Writer& ids(const std::vector<int32_t>& v) { return ids(v.data(), int64_t(v.size())); }
  Writer& raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
    return *this;
  }
  std::vector<uint8_t> bytes;
};

class Reader {
 public:
  explicit Reader(const std::vector<uint8_t>& b) : p_(b.data()), end_(b.data() + b.size()) {}
  int64_t i64() {
    int64_t v = 0;
    raw(&v, sizeof(v));
    return v;
  }
  std::vector<int32_t> ids() {
    const int64_t n = i64();
    std::vector<int32_t> v;
    if (n < 0 || size_t(n) > size_t(end_ - p_) / sizeof(int32_t)) {
      ok_ = false;
      return v;
    }
    v.resize(size_t(n));
    raw(v.data(), size_t(n) * sizeof(int32_t));
    return v;
  }
  void raw(void* out, size_t n) {
    if (size_t(end_ - p_) < n) {
      ok_ = false;
      std::memset(out, 0, n);
      return;
    }
    std::memcpy(out, p_, n);
    p_ += n;
  }
  bool ok() const { return ok_; }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
  bool ok_ = true;
};

void write_prompts(Writer& w, const std::vector<std::vector<int32_t>>& prompts) {
  w.i64(int64_t(prompts.size()));
  for (const auto& p : prompts) w.ids(p);
}
std::vector<std::vector<int32_t>> read_prompts(Reader& r) {
  std::vector<std::vector<int32_t>> out(size_t(std::max<int64_t>(std::min<int64_t>(r.i64(), 1 << 20), 0)));
  for (auto& p : out) p = r.ids();
  return out;
}
void write_sampling(Writer& w, const SamplingRow* rows, size_t n) {
  w.i64(rows ? int64_t(n) : 0);
  if (rows) w.raw(rows, n * sizeof(SamplingRow));
}
std::vector<SamplingRow> read_sampling(Reader& r) {
  std::vector<SamplingRow> rows(size_t(std::max<int64_t>(std::min<int64_t>(r.i64(), 1 << 20), 0)));
  if (!rows.empty()) r.raw(rows.data(), rows.size() * sizeof(SamplingRow));
  return rows;
}

// What a rank reports after each call: its status, the tokens it picked (their count and a
// digest: every rank must pick the same), and a number (the copy bandwidth).
struct Report {
  int32_t code = 0;
  int32_t pad = 0;
  int64_t count = 0;
  uint64_t digest = 0;
  double value = 0;
};

uint64_t digest(const std::vector<int32_t>& ids) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (int32_t v : ids)
    for (int b = 0; b < 4; ++b) h = (h ^ ((uint32_t(v) >> (8 * b)) & 0xffu)) * 1099511628211ull;
  return h;
}

// The result of one call on this rank.
struct Outcome {
  Outcome() = default;
  explicit Outcome(Status s) : status(std::move(s)) {}
  Status status;
  std::vector<int32_t> tokens;
  double value = 0;
  std::vector<ProfileSpan> spans;
};

class ProcessTp final : public ProcessTpEngine {
 public:
  ProcessTp(const ModelConfig& full, std::unique_ptr<Engine> local, std::unique_ptr<Communicator> comm, Context& ctx,
            ProcessGroup& group, double fail_timeout_s, std::string all_reduce)
      : full_(full),
        comm_(std::move(comm)),
        local_(std::move(local)),
        ctx_(ctx),
        group_(group),
        fail_timeout_s_(fail_timeout_s),
        all_reduce_(std::move(all_reduce)) {}

  ~ProcessTp() override {
    if (group_.rank() == 0 && !broken_) (void)send(Call::kEnd, {});
    local_.reset();  // before the communicator its all-reduce uses
  }

  // The sizes of every rank as built (collective: made once, after every rank built its engine).
  Status gather_sizes() {
    const KvCacheStats kv = local_->kv_cache_stats();
    const int64_t mine[5] = {local_->weight_bytes(), kv.allocated, kv.bytes_per_position, kv.static_bytes,
                             local_->slot_pages()};
    std::vector<int64_t> all(size_t(5 * group_.size()));
    TUNABLEOP_RETURN_IF_ERROR(group_.all_gather(mine, all.data(), sizeof(mine)));
    slot_pages_ = mine[4];
    for (int r = 0; r < group_.size(); ++r) {
      for (int i = 0; i < 4; ++i) sizes_[i] += all[size_t(5 * r + i)];
      slot_pages_ = std::min(slot_pages_, all[size_t(5 * r + 4)]);
    }
    return Status::ok();
  }

  int rank() const override { return group_.rank(); }
  int world() const override { return group_.size(); }

  const ModelConfig& config() const override { return full_; }
  const EngineOptions& options() const override { return local_->options(); }
  std::string device_name() const override {
    return fmt::format("tensor parallel over {} processes: rank 0 {}{}", group_.size(), local_->device_name(),
                       all_reduce_.empty() ? "" : "; all-reduce over " + all_reduce_);
  }
  LinearOp& linear() override { return local_->linear(); }
  std::vector<int64_t> sequence_lengths() const override { return local_->sequence_lengths(); }
  int64_t padded_prompt_length() const override { return local_->padded_prompt_length(); }
  int64_t weight_bytes() const override { return sizes_[0]; }  // every rank's: what one step reads
  KvCacheStats kv_cache_stats() const override {
    KvCacheStats s = local_->kv_cache_stats();  // positions: every rank holds its kv heads of each
    s.allocated = sizes_[1];
    s.bytes_per_position = sizes_[2];
    s.static_bytes = sizes_[3];
    return s;
  }
  Status last_logits(std::vector<float>* out) override { return local_->last_logits(out); }
  std::string kernel_choices() const override { return local_->kernel_choices(); }
  int64_t slot_length(int64_t slot) const override { return local_->slot_length(slot); }
  std::vector<int64_t> decode_buckets() const override { return local_->decode_buckets(); }
  // The fewest of any rank (pools sized by each GPU's free memory may differ): a slot the
  // scheduler admits fits on every rank.
  int64_t slot_pages() const override { return slot_pages_; }
  void* stream() const override { return local_->stream(); }
  bool decode_ahead_supported() const override { return local_->decode_ahead_supported(); }

  // --- The calls every rank runs.
  Status prefill(const std::vector<std::vector<int32_t>>& prompts, std::vector<int32_t>* next) override {
    Writer w;
    write_prompts(w, prompts);
    return tokens_of(lead(Call::kPrefill, w), next);
  }
  Status decode(const std::vector<int32_t>& tokens, std::vector<int32_t>* next) override {
    Writer w;
    w.ids(tokens);
    return tokens_of(lead(Call::kDecode, w), next);
  }
  Status decode_ahead(const std::vector<int32_t>* tokens) override {
    Writer w;
    w.i64(tokens ? 1 : 0);
    if (tokens) w.ids(*tokens);
    return lead(Call::kDecodeAhead, w).status;
  }
  Status collect_ahead(std::vector<int32_t>* next) override { return tokens_of(lead(Call::kCollectAhead, {}), next); }
  StatusOr<std::vector<ProfileSpan>> profile_decode(const std::vector<int32_t>& tokens,
                                                    std::vector<int32_t>* next) override {
    Writer w;
    w.ids(tokens);
    Outcome o = lead(Call::kProfileDecode, w);
    TUNABLEOP_RETURN_IF_ERROR(tokens_of(o, next));
    return std::move(o.spans);
  }
  StatusOr<std::vector<ProfileSpan>> profile_prefill(const std::vector<std::vector<int32_t>>& prompts,
                                                     std::vector<int32_t>* next, double* host_ms) override {
    Writer w;
    write_prompts(w, prompts);
    Outcome o = lead(Call::kProfilePrefill, w);
    TUNABLEOP_RETURN_IF_ERROR(tokens_of(o, next));
    if (host_ms) *host_ms = o.value;
    return std::move(o.spans);
  }
  Status prefill_slots(const std::vector<SlotChunk>& chunks, const SamplingRow* sampling,
                       std::vector<int32_t>* next) override {
    Writer w;
    w.i64(int64_t(chunks.size()));
    for (const SlotChunk& c : chunks) w.i64(c.slot).ids(c.tokens, c.count);
    write_sampling(w, sampling, chunks.size());
    return tokens_of(lead(Call::kPrefillSlots, w), next);
  }
  Status decode_slots(const std::vector<int64_t>& slots, const std::vector<int32_t>& tokens,
                      const SamplingRow* sampling, std::vector<int32_t>* next) override {
    Writer w;
    w.i64(int64_t(slots.size()));
    for (int64_t s : slots) w.i64(s);
    w.ids(tokens);
    write_sampling(w, sampling, slots.size());
    return tokens_of(lead(Call::kDecodeSlots, w), next);
  }
  void release_slot(int64_t slot) override {
    Writer w;
    w.i64(slot);
    (void)lead(Call::kReleaseSlot, w);
  }
  Status warm_up_slots(const std::vector<int64_t>& prefill_rows) override {
    Writer w;
    w.i64(int64_t(prefill_rows.size()));
    for (int64_t r : prefill_rows) w.i64(r);
    return lead(Call::kWarmUpSlots, w).status;
  }
  // Every rank's device measured at once; their sum (the ranks' aggregate ceiling).
  StatusOr<double> copy_bandwidth_gbps() override {
    Outcome o = lead(Call::kCopyBandwidth, {});
    if (!o.status.is_ok()) return o.status;
    return o.value;
  }
  Status set_tunableop(bool tuned) override {
    Writer w;
    w.i64(tuned ? 1 : 0);
    return lead(Call::kSetTunableOp, w).status;
  }

  Status follow() override {
    if (group_.rank() == 0) return Status::internal("rank 0 leads: it drives its engine, it does not follow");
    for (;;) {
      Header h;
      std::vector<uint8_t> payload;
      Status st = receive(&h, &payload);
      if (!st.is_ok()) {
        broken_ = true;
        return st;
      }
      if (h.call == Call::kEnd) return Status::ok();
      Outcome o = run(h.call, payload);
      (void)report(o);
      if (broken_) return Status::unavailable("the tensor-parallel group ended: " + group_error_.message());
    }
  }

 private:
  Status send(Call call, const std::vector<uint8_t>& payload) {
    Header h;
    h.call = call;
    h.bytes = payload.size();
    if (!payload.empty() && payload.size() <= Header::kInline)
      std::memcpy(h.inline_data, payload.data(), payload.size());
    TUNABLEOP_RETURN_IF_ERROR(group_.broadcast(&h, sizeof(h), 0));
    if (payload.size() <= Header::kInline) return Status::ok();
    return group_.broadcast(const_cast<uint8_t*>(payload.data()), payload.size(), 0);
  }
  Status receive(Header* h, std::vector<uint8_t>* payload) {
    TUNABLEOP_RETURN_IF_ERROR(group_.broadcast(h, sizeof(*h), 0));
    if (h->bytes > (uint64_t(1) << 34)) return Status::internal("a tensor-parallel call of more than 16 GiB");
    if (h->bytes <= Header::kInline) {
      payload->assign(h->inline_data, h->inline_data + h->bytes);
      return Status::ok();
    }
    payload->resize(size_t(h->bytes));
    return group_.broadcast(payload->data(), payload->size(), 0);
  }

  // Rank 0: the call sent, run here, every rank's report checked.
  Outcome lead(Call call, const Writer& w) {
    if (group_.rank() != 0) return Outcome(Status::internal("only rank 0 drives the tensor-parallel engine"));
    if (broken_) return Outcome(Status::unavailable("the tensor-parallel group ended: " + group_error_.message()));
    if (Status st = send(call, w.bytes); !st.is_ok()) {
      broken_ = true;
      group_error_ = st;
      return Outcome(st);
    }
    Outcome o = run(call, w.bytes);
    o.status = report(o);
    return o;
  }

  static Status tokens_of(const Outcome& o, std::vector<int32_t>* next) {
    if (o.status.is_ok() && next) *next = o.tokens;
    return o.status;
  }

  // One call on this rank's engine.
  Outcome run(Call call, const std::vector<uint8_t>& payload) {
    Reader r(payload);
    Outcome o;
    switch (call) {
      case Call::kPrefill: {
        auto prompts = read_prompts(r);
        if (r.ok()) o.status = local_->prefill(prompts, &o.tokens);
        break;
      }
      case Call::kDecode: {
        auto tokens = r.ids();
        if (r.ok()) o.status = local_->decode(tokens, &o.tokens);
        break;
      }
      case Call::kDecodeAhead: {
        const bool has = r.i64() != 0;
        auto tokens = has ? r.ids() : std::vector<int32_t>();
        if (r.ok()) o.status = local_->decode_ahead(has ? &tokens : nullptr);
        break;
      }
      case Call::kCollectAhead: o.status = local_->collect_ahead(&o.tokens); break;
      case Call::kProfileDecode: {
        auto tokens = r.ids();
        if (!r.ok()) break;
        auto spans = local_->profile_decode(tokens, &o.tokens);
        o.status = spans.status();
        if (spans.is_ok()) o.spans = std::move(spans.value());
        break;
      }
      case Call::kProfilePrefill: {
        auto prompts = read_prompts(r);
        if (!r.ok()) break;
        auto spans = local_->profile_prefill(prompts, &o.tokens, &o.value);
        o.status = spans.status();
        if (spans.is_ok()) o.spans = std::move(spans.value());
        break;
      }
      case Call::kPrefillSlots: {
        std::vector<int64_t> slots(size_t(std::max<int64_t>(std::min<int64_t>(r.i64(), 1 << 20), 0)));
        std::vector<std::vector<int32_t>> tokens(slots.size());
        for (size_t i = 0; i < slots.size(); ++i) slots[i] = r.i64(), tokens[i] = r.ids();
        auto sampling = read_sampling(r);
        if (!r.ok()) break;
        std::vector<SlotChunk> chunks;
        for (size_t i = 0; i < slots.size(); ++i)
          chunks.push_back({slots[i], tokens[i].data(), int64_t(tokens[i].size())});
        o.status = local_->prefill_slots(chunks, sampling.empty() ? nullptr : sampling.data(), &o.tokens);
        break;
      }
      case Call::kDecodeSlots: {
        std::vector<int64_t> slots(size_t(std::max<int64_t>(std::min<int64_t>(r.i64(), 1 << 20), 0)));
        for (int64_t& s : slots) s = r.i64();
        auto tokens = r.ids();
        auto sampling = read_sampling(r);
        if (r.ok())
          o.status = local_->decode_slots(slots, tokens, sampling.empty() ? nullptr : sampling.data(), &o.tokens);
        break;
      }
      case Call::kReleaseSlot: {
        const int64_t slot = r.i64();
        if (r.ok()) local_->release_slot(slot);
        break;
      }
      case Call::kWarmUpSlots: {
        std::vector<int64_t> rows(size_t(std::max<int64_t>(std::min<int64_t>(r.i64(), 1 << 20), 0)));
        for (int64_t& x : rows) x = r.i64();
        if (r.ok()) o.status = local_->warm_up_slots(rows);
        break;
      }
      case Call::kCopyBandwidth: {
        auto gbps = local_->copy_bandwidth_gbps();
        o.status = gbps.status();
        if (gbps.is_ok()) o.value = *gbps;
        break;
      }
      case Call::kSetTunableOp: {
        const bool tuned = r.i64() != 0;
        if (!r.ok()) break;
        (void)ctx_.config().set(Setting::kEnabled, tuned);
        if (tuned) (void)ctx_.config().set(Setting::kTuning, true);
        break;
      }
      case Call::kEnd: break;
    }
    if (!r.ok()) o.status = Status::internal("a tensor-parallel call from rank 0 was cut short");
    return o;
  }

  // Every rank's outcome of the call: ok, or the first failing rank's error (every rank returns
  // it); rank 0 also checks that every rank picked the same tokens, and sums the values.
  Status report(Outcome& o) {
    Report mine{int32_t(o.status.code()), 0, int64_t(o.tokens.size()), digest(o.tokens), o.value};
    std::vector<Report> all(size_t(group_.size()));
    // A rank that failed alone may have left the others inside a collective of the model: it
    // waits for their reports only so long, then ends the job.
    Status g = group_.all_gather(&mine, all.data(), sizeof(Report),
                                 o.status.is_ok() ? ProcessGroup::kForever : fail_timeout_s_);
    if (!g.is_ok()) {
      broken_ = true;
      group_error_ = o.status.is_ok()
                         ? g
                         : Status(o.status.code(),
                                  fmt::format("tensor-parallel rank {} failed: {}; the other ranks did not finish the "
                                              "call within {} s (they wait in a collective for this rank): ending "
                                              "the job",
                                              group_.rank(), o.status.message(), fail_timeout_s_));
      group_.abort(group_error_);
      return group_error_;
    }
    for (int q = 0; q < group_.size(); ++q) {
      if (all[size_t(q)].code == 0) continue;
      auto msg = broadcast_string(group_, q == group_.rank() ? o.status.message() : std::string(), q);
      if (!msg.is_ok()) {
        broken_ = true;
        group_error_ = msg.status();
        return msg.status();
      }
      if (q == group_.rank()) return o.status;
      return Status(StatusCode(all[size_t(q)].code), fmt::format("tensor-parallel rank {}: {}", q, *msg));
    }
    double total = 0;
    for (int q = 0; q < group_.size(); ++q) {
      total += all[size_t(q)].value;
      if (all[size_t(q)].count != mine.count || all[size_t(q)].digest != mine.digest)
        return Status::internal(fmt::format(
            "tensor-parallel ranks {} and {} picked different tokens (their logits differ: an all-reduce gave "
            "different sums)",
            group_.rank(), q));
    }
    o.value = total;
    return Status::ok();
  }

  ModelConfig full_;                    // the whole model (the local engine's is its shard)
  std::unique_ptr<Communicator> comm_;  // outlives the local engine, whose all-reduce uses it
  std::unique_ptr<Engine> local_;
  Context& ctx_;
  ProcessGroup& group_;
  double fail_timeout_s_;
  std::string all_reduce_;
  int64_t sizes_[4] = {0, 0, 0, 0};  // every rank's weight bytes, KV allocated, per position, static
  int64_t slot_pages_ = 0;
  bool broken_ = false;
  Status group_error_;
};

// This rank's engine over its shard.
StatusOr<std::unique_ptr<Engine>> make_rank_engine(const ModelSpec& spec, uint64_t seed, const EngineOptions& options,
                                                   Context& ctx, std::shared_ptr<const TensorParallelLayout> layout,
                                                   int rank, Communicator& comm) {
  const std::string name = spec.builtin ? "builtin:" + spec.preset : spec.dir;
  if (ctx.device().kind == DeviceKind::kCuda) {
    std::shared_ptr<const ModelWeights> host;
    if (!spec.builtin) {  // read as this rank's shard only
      auto w = load_model_shard(spec.dir, *layout, rank);
      if (!w.is_ok()) return w.status();
      host = std::make_shared<const ModelWeights>(std::move(w.value()));
    }
    auto dev = make_cuda_tp_device(spec, seed, options, ctx, layout, rank, host);
    if (!dev.is_ok()) return dev.status();
    (*dev)->set_tensor_parallel(rank_parallelism(*layout, rank, comm, ctx, **dev));
    return make_engine(std::move(dev.value()), options, tunableop_linear(ctx), tunableop_gemm(ctx),
                       tunableop_attention(ctx));
  }
  std::shared_ptr<const ModelWeights> shard;
  if (spec.builtin) {
    TUNABLEOP_RETURN_IF_ERROR(check_weights_fit(layout->local_config(rank), name));
    shard = std::make_shared<const ModelWeights>(random_model_shard(*layout, rank, seed, name));
  } else {
    auto w = load_model_shard(spec.dir, *layout, rank);
    if (!w.is_ok()) return w.status();
    shard = std::make_shared<const ModelWeights>(std::move(w.value()));
  }
  std::unique_ptr<DeviceKernels> dev = make_cpu_device(shard, options.max_seq);
  dev->set_tensor_parallel(rank_parallelism(*layout, rank, comm, ctx, *dev));
  return make_engine(std::move(dev), options, tunableop_linear(ctx), tunableop_gemm(ctx), tunableop_attention(ctx));
}

}  // namespace

StatusOr<std::unique_ptr<ProcessTpEngine>> make_process_tp_engine(const ModelSpec& spec, uint64_t seed, int64_t layers,
                                                                  EngineOptions options, Context& ctx,
                                                                  ProcessGroup& group, ProcessGroup& data) {
  if (group.size() != data.size() || group.rank() != data.rank())
    return Status::internal("tensor parallelism: the call and data groups must hold the same processes");
  const int world = group.size();
  // Rank 0 says whether it builds at all (cancel_process_tp: it failed before).
  int32_t go = 1;
  TUNABLEOP_RETURN_IF_ERROR(group.broadcast(&go, sizeof(go), 0));
  if (!go) return Status::unavailable("rank 0 ended before it built its engine (its message says why)");
  // Rank 0's options, seed and depth for every rank (rank 0 sized them from its prompts).
  static_assert(std::is_trivially_copyable_v<EngineOptions>, "EngineOptions go to every rank as bytes");
  TUNABLEOP_RETURN_IF_ERROR(group.broadcast(&options, sizeof(options), 0));
  TUNABLEOP_RETURN_IF_ERROR(group.broadcast(&seed, sizeof(seed), 0));
  TUNABLEOP_RETURN_IF_ERROR(group.broadcast(&layers, sizeof(layers), 0));
  std::shared_ptr<const TensorParallelLayout> layout;
  Status st = world >= 2 && world <= kMaxRanks
                  ? Status::ok()
                  : Status::invalid_argument(
                        fmt::format("tensor parallelism over 2 to {} processes, not {}", kMaxRanks, world));
  auto config = spec_config(spec, layers);
  if (st.is_ok()) st = config.status();
  if (st.is_ok()) st = prepare_engine_options(*config, spec.builtin ? "builtin:" + spec.preset : spec.dir, &options);
  if (st.is_ok()) {
    auto l = TensorParallelLayout::make(*config, world);
    st = l.status();
    if (l.is_ok()) layout = std::make_shared<const TensorParallelLayout>(std::move(l.value()));
  }
  TUNABLEOP_RETURN_IF_ERROR(agree(group, st));
  auto comm = make_process_communicator(ctx, data);
  TUNABLEOP_RETURN_IF_ERROR(agree(group, comm.status()));
  auto local = make_rank_engine(spec, seed, options, ctx, layout, group.rank(), **comm);
  TUNABLEOP_RETURN_IF_ERROR(agree(group, local.status()));
  const std::string all_reduce = (*comm)->describe();
  auto e = std::make_unique<ProcessTp>(layout->full(), std::move(local.value()), std::move(comm.value()), ctx, group,
                                       ProcessTpEngine::kFailTimeoutS, all_reduce);
  TUNABLEOP_RETURN_IF_ERROR(e->gather_sizes());
  return std::unique_ptr<ProcessTpEngine>(std::move(e));
}

Status cancel_process_tp(ProcessGroup& group) {
  if (group.rank() != 0) return Status::internal("only rank 0 cancels");
  int32_t go = 0;
  return group.broadcast(&go, sizeof(go), 0);
}

std::unique_ptr<ProcessTpEngine> wrap_process_tp(std::unique_ptr<Engine> local, Context& ctx, ProcessGroup& group,
                                                 double fail_timeout_s) {
  const ModelConfig config = local->config();
  auto e = std::make_unique<ProcessTp>(config, std::move(local), nullptr, ctx, group, fail_timeout_s, "");
  (void)e->gather_sizes();
  return e;
}

}  // namespace tunableop::llm

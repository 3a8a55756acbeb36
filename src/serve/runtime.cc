// The engine runtime: one thread owns the engine and the scheduler; submit() hands requests
// over through an inbox. Each turn of the loop takes the inbox, lets the scheduler plan a step,
// runs it (Engine::prefill_slots / decode_slots, sampling where the logits are), and hands the
// tokens to the requests' channels (their readers woken by a ChannelWaker thread). When there
// is nothing to run it tunes, one problem at a time, what the requests met untuned
// (docs/serve.md, "Tuning policy").
#include "serve/runtime.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "llm/sampling.h"
#include "llm/tune_recorded.h"
#include "serve/channel_waker.h"
#include "serve/scheduler.h"

namespace tunableop::serve {
namespace {

using llm::Engine;
using llm::SamplingRow;

class Runtime final : public Backend {
 public:
  Runtime(std::unique_ptr<Engine> engine, Context& ctx, RuntimeOptions o, SchedulerOptions so)
      : engine_(std::move(engine)), ctx_(ctx), o_(std::move(o)), scheduler_(so) {}

  ~Runtime() override { stop(); }

  // Warm-up (and start-up tuning), then the loop thread.
  Status start() {
    const Options opt = ctx_.config().snapshot();
    tuning_ = o_.tune && opt.enabled;
    if (tuning_) TUNABLEOP_RETURN_IF_ERROR(ctx_.config().set(Setting::kTuning, true));
    std::vector<int64_t> prefill_rows;
    for (int64_t n = 64; n < o_.prefill_tokens; n *= 2) prefill_rows.push_back(n);
    prefill_rows.push_back(o_.prefill_tokens);
    progress(fmt::format("warming up: decode at batch {} and prefill passes of {} tokens{}",
                         fmt::join(engine_->decode_buckets(), ","), fmt::join(prefill_rows, ","),
                         tuning_ ? ", tuning what the results file lacks" : ""));
    const auto t0 = Clock::now();
    TUNABLEOP_RETURN_IF_ERROR(engine_->warm_up_slots(prefill_rows));
    progress(fmt::format("warm-up done in {:.1f} s", std::chrono::duration<double>(Clock::now() - t0).count()));
    if (tuning_) {
      // From here on a problem not in the results runs its Default at once and is recorded;
      // the loop tunes it when no request is waiting.
      TUNABLEOP_RETURN_IF_ERROR(ctx_.config().set(Setting::kTuning, false));
      ctx_.start_recording_choices();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.ready = true;
    }
    publish_stats();
    thread_ = std::thread([this] { loop(); });
    return Status::ok();
  }

  StatusOr<std::shared_ptr<Channel>> submit(GenerationRequest r) override {
    TUNABLEOP_RETURN_IF_ERROR(validate(r));
    auto seq = std::make_unique<Sequence>();
    seq->channel = std::make_shared<Channel>();
    std::shared_ptr<Channel> ch = seq->channel;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (draining_ || stopping_) return Status::unavailable("the server is shutting down");
      if (int64_t(inbox_.size()) + waiting_ >= o_.max_waiting) {
        ++stats_.requests_rejected;
        return Status::resource_exhausted(
            fmt::format("the server's queue is full ({} requests waiting): try again later", o_.max_waiting));
      }
      seq->id = next_id_++;
      seq->seed = r.sampling.seed ? *r.sampling.seed : llm::mix64(o_.seed + seq->id);
      seq->request = std::move(r);
      inbox_.push_back(std::move(seq));
      ++stats_.requests_waiting;
    }
    cv_.notify_all();
    return ch;
  }

  RuntimeStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  int64_t vocab_size() const override { return engine_->config().vocab_size; }
  int64_t max_context() const override { return engine_->options().max_seq; }

  void drain(std::chrono::milliseconds grace) override {
    std::unique_lock<std::mutex> lock(mu_);
    draining_ = true;
    stats_.draining = true;
    cv_.notify_all();
    const bool done = idle_cv_.wait_for(lock, grace, [this] { return loop_idle_ && inbox_.empty(); });
    if (!done) cancel_all_ = true;
    cv_.notify_all();
    while (!(loop_idle_ && inbox_.empty())) idle_cv_.wait_for(lock, std::chrono::milliseconds(100));
    lock.unlock();
    stop();
  }

 private:
  void progress(const std::string& line) {
    if (o_.progress) o_.progress(line);
  }

  Status validate(const GenerationRequest& r) const {
    const int64_t V = engine_->config().vocab_size, ctx_len = max_context();
    if (r.prompt.empty()) return Status::invalid_argument("the prompt is empty");
    for (size_t i = 0; i < r.prompt.size(); ++i) {
      if (r.prompt[i] < 0 || r.prompt[i] >= V) {
        return Status::invalid_argument(
            fmt::format("prompt token {} (at {}) is outside the vocabulary [0, {})", r.prompt[i], i, V));
      }
    }
    if (r.max_tokens < 1) return Status::invalid_argument("max_tokens must be >= 1");
    if (int64_t(r.prompt.size()) + r.max_tokens > ctx_len) {
      return Status::invalid_argument(
          fmt::format("the prompt ({} tokens) plus max_tokens ({}) exceeds the model's context of {} tokens",
                      r.prompt.size(), r.max_tokens, ctx_len));
    }
    SamplingRow row;
    row.temperature = float(r.sampling.temperature);
    row.top_k = int32_t(std::min<int64_t>(r.sampling.top_k, INT32_MAX));
    row.top_p = float(r.sampling.top_p);
    if (r.sampling.top_k < 0 || r.sampling.top_k > INT32_MAX) return Status::invalid_argument("top_k out of range");
    return llm::validate_sampling_row(row, V);
  }

  // The loop thread.
  void loop() {
    std::vector<int64_t> freed;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        while (!inbox_.empty()) {
          std::unique_ptr<Sequence> s = std::move(inbox_.front());
          inbox_.pop_front();
          std::shared_ptr<Channel> ch = s->channel;
          if (Status st = scheduler_.admit(std::move(s)); !st.is_ok()) ch->finish(FinishReason::kError, st);
        }
        if (cancel_all_) {
          scheduler_.finish_all(FinishReason::kCancelled, Status::unavailable("the server is shutting down"), &freed);
          cancel_all_ = false;
        }
        if (stopping_) break;
      }
      release(&freed);
      StepPlan plan = scheduler_.plan(&freed);
      release(&freed);
      release(&plan.freed_slots);
      if (plan.kind == StepPlan::Kind::kIdle) {
        last_call_end_.reset();  // a host turn is timed between two busy steps only
        publish_stats();
        // Tuning waits for a quiet second: a request that arrives while a problem is tuned waits
        // for that problem (up to about a second), and a burst's gaps are shorter than that.
        const bool quiet = Clock::now() - last_busy_ >= kQuietBeforeTuning;
        if (tuning_ && !draining_ && quiet && tune_one()) continue;
        std::unique_lock<std::mutex> lock(mu_);
        loop_idle_ = scheduler_.idle();
        idle_cv_.notify_all();
        cv_.wait_for(lock, std::chrono::milliseconds(50),
                     [this] { return !inbox_.empty() || stopping_ || cancel_all_; });
        loop_idle_ = false;
        continue;
      }
      run(plan, &freed);
      release(&freed);
      publish_stats();
      last_busy_ = Clock::now();
    }
    std::lock_guard<std::mutex> lock(mu_);
    loop_idle_ = true;
    idle_cv_.notify_all();
  }

  void release(std::vector<int64_t>* slots) {
    for (int64_t s : *slots) engine_->release_slot(s);
    slots->clear();
  }

  static SamplingRow sampling_row(const Sequence& s) {
    SamplingRow r;
    r.temperature = float(s.request.sampling.temperature);
    r.top_k = int32_t(s.request.sampling.top_k);
    r.top_p = float(s.request.sampling.top_p);
    r.seed = s.seed;
    r.counter = uint64_t(std::max<int64_t>(s.generated(), 0));
    return r;
  }

  void run(const StepPlan& plan, std::vector<int64_t>* freed) {
    std::vector<int32_t> next;
    std::vector<SamplingRow> rows;
    Status st;
    const Clock::time_point call_start = Clock::now();
    if (last_call_end_) {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.host_turn.observe(seconds(*last_call_end_, call_start));
    }
    if (plan.kind == StepPlan::Kind::kDecode) {
      std::vector<int64_t> slots;
      std::vector<int32_t> tokens;
      for (const Sequence* s : plan.decode) {
        slots.push_back(s->slot);
        tokens.push_back(s->tokens.back());
        rows.push_back(sampling_row(*s));
      }
      st = engine_->decode_slots(slots, tokens, rows.data(), &next);
    } else {
      std::vector<Engine::SlotChunk> chunks;
      for (const Chunk& c : plan.prefill) {
        chunks.push_back({c.seq->slot, c.seq->tokens.data() + c.start, c.count});
        rows.push_back(sampling_row(*c.seq));
        prompt_tokens_ += uint64_t(c.count);
      }
      st = engine_->prefill_slots(chunks, rows.data(), &next);
    }
    const Clock::time_point call_end = Clock::now();
    last_call_end_ = call_end;
    if (!st.is_ok()) {
      ctx_.log().warn("serve: a step failed: " + st.to_string());
      scheduler_.fail(plan, st, freed);
      failed_ += plan.decode.size() + plan.prefill.size();
      return;
    }
    ++steps_;
    const Clock::time_point now = Clock::now();
    std::vector<Outcome> outcomes = scheduler_.complete(plan, next, o_.eos_ids, now, freed, &to_wake_);
    waker_.post(&to_wake_);  // the readers wake while the loop goes on to the next step
    std::lock_guard<std::mutex> lock(mu_);
    stats_.steps = steps_;  // with its timing, so that a copy of the stats counts both or neither
    if (plan.kind == StepPlan::Kind::kDecode) {
      stats_.decode_step.observe(seconds(call_start, call_end));
      stats_.decode_rows += uint64_t(plan.decode.size());
      stats_.decode_padded_rows += uint64_t(engine_->decode_bucket(int64_t(plan.decode.size())));
    } else {
      stats_.prefill_step.observe(seconds(call_start, call_end));
    }
    for (Outcome& o : outcomes) {
      if (!o.appended) continue;
      ++stats_.generation_tokens;
      const Sequence& s = *o.seq;
      if (s.generated() == 1 && s.preemptions == 0) stats_.ttft.observe(seconds(s.request.arrival, now));
      if (o.finished == FinishReason::kNone) continue;
      ++stats_.requests_finished;
      stats_.e2e.observe(seconds(s.request.arrival, now));
      if (s.generated() > 1) stats_.tpot.observe(seconds(s.first_token_time, now) / double(s.generated() - 1));
    }
  }

  static double seconds(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  }

  // Tunes one recorded problem the results lack; false when there is none left.
  bool tune_one() {
    for (const auto& [op, params] : ctx_.stop_recording_choices()) {
      if (!ctx_.results().contains(op, params) && llm::tunable_from_key(op) && !tried_.count(op + "," + params)) {
        pending_.push_back({op, params});
        tried_.insert(op + "," + params);
      }
    }
    ctx_.start_recording_choices();
    while (!pending_.empty()) {
      auto [op, params] = pending_.front();
      pending_.pop_front();
      if (ctx_.results().contains(op, params)) continue;
      ctx_.log().log(1, "serve: tuning " + op + "," + params + " while idle");
      auto won = llm::tune_recorded(ctx_, op, params, engine_->stream());
      if (won.is_ok()) {
        ++tuned_;
        ctx_.log().log(1, "serve: " + op + "," + params + " -> " + *won);
      } else {
        ctx_.log().warn("serve: tuning " + op + "," + params + " failed: " + won.status().to_string());
      }
      return true;
    }
    return false;
  }

  void publish_stats() {
    const llm::KvCacheStats kv = engine_->kv_cache_stats();
    std::lock_guard<std::mutex> lock(mu_);
    waiting_ = scheduler_.waiting();
    stats_.requests_running = scheduler_.running();
    stats_.requests_waiting = waiting_ + int64_t(inbox_.size());
    stats_.kv_pages_total = engine_->slot_pages();
    stats_.kv_pages_used = stats_.kv_pages_total - kv.free_pages;
    stats_.kv_pages_peak = std::max(stats_.kv_pages_peak, stats_.kv_pages_used);
    stats_.kv_page_size = kv.page_size;
    stats_.prompt_tokens = prompt_tokens_;
    stats_.preemptions = scheduler_.preemptions();
    stats_.steps = steps_;
    stats_.requests_failed = failed_;
    stats_.requests_cancelled = scheduler_.cancelled();
    stats_.tuned_problems = tuned_;
    stats_.untuned_problems = pending_.size();
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    std::vector<int64_t> freed;
    scheduler_.finish_all(FinishReason::kCancelled, Status::unavailable("the server stopped"), &freed);
    for (auto& s : inbox_) s->channel->finish(FinishReason::kCancelled, Status::unavailable("the server stopped"));
    inbox_.clear();
    idle_cv_.notify_all();
  }

  std::unique_ptr<Engine> engine_;
  Context& ctx_;
  RuntimeOptions o_;
  Scheduler scheduler_;  // the loop thread's
  std::thread thread_;
  mutable std::mutex mu_;  // guards what follows
  std::condition_variable cv_, idle_cv_;
  std::deque<std::unique_ptr<Sequence>> inbox_;
  RuntimeStats stats_;
  int64_t waiting_ = 0;
  uint64_t next_id_ = 1;
  // Written under mu_, read anywhere.
  std::atomic<bool> draining_{false}, stopping_{false}, cancel_all_{false};
  bool loop_idle_ = false;
  // The loop thread's (read by publish_stats under mu_).
  bool tuning_ = false;
  static constexpr std::chrono::seconds kQuietBeforeTuning{1};
  Clock::time_point last_busy_ = Clock::now();
  uint64_t prompt_tokens_ = 0, steps_ = 0, failed_ = 0, tuned_ = 0;
  std::optional<Clock::time_point> last_call_end_;  // the last engine call's end, while busy
  std::deque<std::pair<std::string, std::string>> pending_;
  std::set<std::string> tried_;
  std::vector<std::shared_ptr<Channel>> to_wake_;  // the loop's: channels a step appended to
  ChannelWaker waker_;
};

}  // namespace

StatusOr<std::unique_ptr<Backend>> make_runtime(std::unique_ptr<llm::Engine> engine, Context& ctx, RuntimeOptions o) {
  if (!engine) return Status::invalid_argument("make_runtime: no engine");
  if (!engine->slots_supported())
    return Status::invalid_argument("the server needs the engine's paged KV cache (--kv-cache paged)");
  const llm::EngineOptions& eo = engine->options();
  if (o.max_running <= 0) o.max_running = eo.max_batch;
  if (o.max_running > eo.max_batch) {
    return Status::invalid_argument(
        fmt::format("max_running {} exceeds the engine's max_batch {}", o.max_running, eo.max_batch));
  }
  SchedulerOptions so;
  so.max_running = o.max_running;
  so.max_waiting = o.max_waiting;
  so.prefill_tokens = o.prefill_tokens;
  so.max_context = eo.max_seq;
  so.page_size = engine->kv_cache_stats().page_size;
  so.pages = engine->slot_pages();
  so.watermark_pages = std::min<int64_t>(so.pages / 100, so.pages - 1);
  TUNABLEOP_RETURN_IF_ERROR(so.validate());
  auto rt = std::make_unique<Runtime>(std::move(engine), ctx, std::move(o), so);
  TUNABLEOP_RETURN_IF_ERROR(rt->start());
  return std::unique_ptr<Backend>(std::move(rt));
}

}  // namespace tunableop::serve

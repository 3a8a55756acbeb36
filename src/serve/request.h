// What the HTTP front end (serve/http) and the engine runtime (serve/runtime) hand each other.
// The front end parses and validates a request, tokenizes it and submits token ids; the runtime
// schedules it into the continuous batch and streams the new ids back through the request's
// Channel; the front end detokenizes, matches stop strings (cancelling the request when one
// appears) and writes JSON or server-sent events. Nothing here knows HTTP or a device.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tunableop/status.h"

namespace tunableop::serve {

using Clock = std::chrono::steady_clock;

struct SamplingParams {
  double temperature = 1.0;      // 0: greedy (the engine's argmax)
  int64_t top_k = 0;             // 0: every token
  double top_p = 1.0;            // (0, 1]
  std::optional<uint64_t> seed;  // absent: the runtime draws one
};

struct GenerationRequest {
  std::vector<int32_t> prompt;  // token ids, BOS included when the model wants one
  int64_t max_tokens = 16;      // new tokens at most (>= 1)
  SamplingParams sampling;
  bool ignore_eos = false;                   // generate max_tokens whatever comes
  std::vector<int32_t> stop_ids;             // ids that end the sequence besides the model's EOS (kept in the output)
  Clock::time_point arrival = Clock::now();  // when the server received it (TTFT counts from here)
};

enum class FinishReason { kNone, kStop, kLength, kCancelled, kError };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "cancelled", "error"

// One request's stream of new token ids, written by the runtime, read by one front-end thread.
class Channel {
 public:
  struct Update {
    std::vector<int32_t> tokens;  // new since the last take()
    bool finished = false;
    FinishReason reason = FinishReason::kNone;
    Status error;  // kError: why (a device fault, a sequence that cannot fit)
  };
  // Runtime side. push() appends and wakes the reader; append() only appends, and wake() wakes
  // the reader later: the runtime's loop appends a step's tokens and hands the wake-ups (one
  // futex call each, 256 of them after a full decode step) to a ChannelWaker thread, so that
  // they do not hold up the next step (docs/serve.md, "The engine runtime").
  void push(int32_t token);
  void append(int32_t token);
  void wake();
  void finish(FinishReason reason, Status error = Status::ok());
  // Front-end side: waits until something is new or `timeout` passes; returns what is new
  // (empty and not finished on a timeout).
  Update take(std::chrono::milliseconds timeout);
  // Front end: the client went away or a stop string matched. The runtime frees the sequence's
  // KV pages at its next step and finishes the channel with kCancelled (unless it ended first).
  void cancel();
  bool cancelled() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int32_t> pending_;
  bool finished_ = false, cancelled_ = false;
  FinishReason reason_ = FinishReason::kNone;
  Status error_;
};

// Latency histogram with fixed upper bounds in seconds (Prometheus' cumulative buckets).
struct Histogram {
  std::vector<double> bounds;    // ascending upper bounds; +Inf is implicit
  std::vector<uint64_t> counts;  // per bucket (not cumulative), bounds.size() + 1
  double sum = 0;
  uint64_t count = 0;
  static Histogram latency();  // 1 ms .. 60 s
  static Histogram step();     // 100 us .. 10 s, finer around a decode step's 5-50 ms
  static Histogram with_bounds(std::vector<double> upper);
  void observe(double seconds);
};

// What /metrics shows; a consistent copy taken under the runtime's lock.
struct RuntimeStats {
  int64_t requests_running = 0, requests_waiting = 0;
  int64_t kv_pages_used = 0, kv_pages_total = 0, kv_page_size = 0;
  int64_t kv_pages_peak = 0;  // the most kv_pages_used has been
  uint64_t requests_finished = 0, requests_cancelled = 0, requests_rejected = 0, requests_failed = 0;
  uint64_t prompt_tokens = 0, generation_tokens = 0;
  uint64_t preemptions = 0, steps = 0;
  uint64_t tuned_problems = 0, untuned_problems = 0;  // tuned off the request path / still waiting for it
  Histogram ttft = Histogram::latency(), tpot = Histogram::latency(), e2e = Histogram::latency();
  // Where a busy loop's time goes (docs/serve.md, "Metrics"): each engine call (sampling and the
  // tokens' download included), and the loop's own turn between two calls while busy (admission,
  // planning, handing tokens to the requests' channels).
  Histogram decode_step = Histogram::step(), prefill_step = Histogram::step(), host_turn = Histogram::step();
  uint64_t decode_rows = 0, decode_padded_rows = 0;  // sequences decoded; rows of the batch sizes run
  bool ready = false, draining = false;
};

// The engine runtime as the front end sees it (serve/runtime.h implements it; tests fake it).
class Backend {
 public:
  virtual ~Backend() = default;
  // Queues the request. Errors: kInvalidArgument (an id out of range, prompt + max_tokens past
  // the context: the message says which; HTTP 400), kResourceExhausted (the waiting queue is
  // full: 429), kUnavailable (not ready, or draining: 503).
  virtual StatusOr<std::shared_ptr<Channel>> submit(GenerationRequest request) = 0;
  virtual RuntimeStats stats() const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual int64_t max_context() const = 0;  // prompt + new tokens of one sequence at most
  // Stops admitting (submit answers kUnavailable), lets running requests finish (cancelling those
  // still running after `grace`), then returns.
  virtual void drain(std::chrono::milliseconds grace) = 0;
};

}  // namespace tunableop::serve

// The continuous batch's scheduler: which sequences run in the next engine step, and what
// happens to them afterwards. Pure host logic, no engine and no clock: the runtime
// (serve/runtime.cc) asks plan() for a step, runs it on the engine, and hands the new tokens to
// complete(); tests drive it alone.
//
// Policy (docs/serve.md, "Scheduler"):
//   - Admission is first come, first served while a slot is free and the KV pool holds the
//     sequence's tokens plus a watermark; the queue head that does not fit blocks the ones
//     behind it (no overtaking, so no starvation).
//   - Each step is either a decode step (every decoding sequence, one token each) or a prefill
//     pass (prompt chunks of admitted sequences, in admission order, up to `prefill_tokens`
//     tokens and `prefill_sequences` chunks);
//     while both kinds have work they alternate, so a long prompt delays a running sequence by
//     at most one chunk, and new prompts wait at most one decode step.
//   - When a decode step needs pages the pool does not have, the most recently admitted
//     sequences are preempted: their pages are freed and they go back to the front of the
//     queue, to be prefilled again over their prompt and what they generated (recompute).
//   - A finished or cancelled sequence frees its slot and pages at once.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "serve/request.h"

namespace tunableop::serve {

struct SchedulerOptions {
  int64_t max_running = 8;        // sequences holding a slot (prefilling or decoding)
  int64_t max_waiting = 1024;     // queue length beyond which admit() refuses
  int64_t prefill_tokens = 2048;  // prompt tokens in one prefill pass at most
  // Chunks in one prefill pass at most (each runs its own attention call per layer).
  int64_t prefill_sequences = 32;
  int64_t max_context = 2048;  // positions one sequence may hold (prompt + generated)
  int64_t page_size = 64;      // KV positions per page
  int64_t pages = 0;           // pages in the pool
  // Pages kept free at admission (room for the running sequences to grow before preemption).
  int64_t watermark_pages = 0;
  Status validate() const;
};

// One sequence as the scheduler tracks it.
struct Sequence {
  uint64_t id = 0;
  GenerationRequest request;
  std::shared_ptr<Channel> channel;
  uint64_t seed = 0;            // request.sampling.seed, or drawn by the runtime
  std::vector<int32_t> tokens;  // prompt, then every generated token
  int64_t prompt_len = 0;       // of the original prompt
  int64_t computed = 0;         // leading tokens whose keys and values are in the cache
  int64_t slot = -1;            // engine slot while admitted
  int64_t admitted_order = 0;   // preemption takes the largest first
  int64_t preemptions = 0;
  Clock::time_point first_token_time{}, last_token_time{};
  bool has_first_token = false;
  int64_t generated() const { return int64_t(tokens.size()) - prompt_len; }
  bool decoding() const { return slot >= 0 && computed + 1 == int64_t(tokens.size()); }
};

// A prompt chunk of one sequence in a prefill pass: tokens[start, start + count).
struct Chunk {
  Sequence* seq = nullptr;
  int64_t start = 0, count = 0;
  bool last() const { return start + count == int64_t(seq->tokens.size()); }  // the pass samples its next token
};

struct StepPlan {
  enum class Kind { kIdle, kDecode, kPrefill } kind = Kind::kIdle;
  std::vector<Sequence*> decode;  // kDecode: each feeds tokens.back() at position computed
  std::vector<Chunk> prefill;     // kPrefill
  // Sequences whose pages were taken back to make room for this step (already back in the
  // queue); the runtime frees their engine slots before running the step.
  std::vector<int64_t> freed_slots;
};

// What a step's tokens did to a sequence.
struct Outcome {
  Sequence* seq = nullptr;
  bool appended = false;  // a new token was appended (decode, or a prefill's last chunk)
  FinishReason finished = FinishReason::kNone;
  std::unique_ptr<Sequence> done;  // a finished sequence, handed over (seq points into it)
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerOptions o);
  const SchedulerOptions& options() const { return o_; }

  // Queues a sequence (request already validated). kResourceExhausted when the queue is full.
  Status admit(std::unique_ptr<Sequence> seq);
  // The next step; sequences cancelled through their channel are dropped first (their slots in
  // `cancelled_slots`, their channels finished with kCancelled).
  StepPlan plan(std::vector<int64_t>* cancelled_slots);
  // After the engine ran `plan`: `next[i]` is the token chosen for plan.decode[i] (decode) or
  // for plan.prefill[i] (prefill; used only where the chunk is the last). Appends tokens,
  // decides which sequences finished (EOS or stop id unless ignore_eos, max_tokens, the
  // context), finishes their channels, frees their slots (returned in `freed_slots`). With
  // `to_wake`, new tokens are appended to the channels without waking their readers, and the
  // channels are listed there for the caller to wake (Channel::append / wake); finished
  // channels are woken at once either way.
  std::vector<Outcome> complete(const StepPlan& plan, const std::vector<int32_t>& next,
                                const std::vector<int32_t>& eos_ids, Clock::time_point now,
                                std::vector<int64_t>* freed_slots,
                                std::vector<std::shared_ptr<Channel>>* to_wake = nullptr);
  // The step failed on the engine: every sequence in it finishes with the error.
  void fail(const StepPlan& plan, const Status& error, std::vector<int64_t>* freed_slots);
  // Every sequence, running or waiting, finishes with `reason` (drain past its grace, shutdown).
  void finish_all(FinishReason reason, const Status& error, std::vector<int64_t>* freed_slots);

  int64_t running() const { return int64_t(running_.size()); }
  int64_t waiting() const { return int64_t(waiting_.size()); }
  int64_t pages_used() const { return pages_used_; }
  uint64_t preemptions() const { return preemptions_; }
  uint64_t cancelled() const { return cancelled_; }
  bool idle() const { return running_.empty() && waiting_.empty(); }
  // Pages a sequence of `positions` cached positions holds.
  int64_t pages_for(int64_t positions) const { return (positions + o_.page_size - 1) / o_.page_size; }

 private:
  void admit_waiting();
  bool reserve_decode_pages(StepPlan* plan);
  void preempt(Sequence* s, StepPlan* plan);
  void release(Sequence* s, std::vector<int64_t>* freed_slots);
  std::unique_ptr<Sequence> drop(Sequence* s);
  int64_t held_pages(const Sequence& s) const { return pages_held_[size_t(s.slot)]; }

  SchedulerOptions o_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;  // admission order
  std::vector<int64_t> free_slots_;
  std::vector<int64_t> pages_held_;  // per slot: pages the scheduler has counted for it
  int64_t pages_used_ = 0;
  int64_t next_order_ = 0;
  uint64_t preemptions_ = 0, cancelled_ = 0;
  bool last_was_decode_ = false;
};

}  // namespace tunableop::serve

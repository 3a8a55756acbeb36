#include "serve/scheduler.h"

#include <algorithm>

namespace tunableop::serve {

Status SchedulerOptions::validate() const {
  auto positive = [](int64_t v, const char* name) -> Status {
    if (v < 1) return Status::invalid_argument(std::string(name) + " must be >= 1, got " + std::to_string(v));
    return Status::ok();
  };
  TUNABLEOP_RETURN_IF_ERROR(positive(max_running, "max_running"));
  TUNABLEOP_RETURN_IF_ERROR(positive(max_waiting, "max_waiting"));
  TUNABLEOP_RETURN_IF_ERROR(positive(prefill_tokens, "prefill_tokens"));
  TUNABLEOP_RETURN_IF_ERROR(positive(max_context, "max_context"));
  TUNABLEOP_RETURN_IF_ERROR(positive(page_size, "page_size"));
  TUNABLEOP_RETURN_IF_ERROR(positive(pages, "KV pages"));
  TUNABLEOP_RETURN_IF_ERROR(positive(prefill_sequences, "prefill_sequences"));
  if (watermark_pages < 0 || watermark_pages >= pages) {
    return Status::invalid_argument("watermark_pages must be in [0, pages)");
  }
  // One sequence at its longest must fit the pool, else it could never finish.
  if ((max_context + page_size - 1) / page_size > pages) {
    return Status::invalid_argument("a sequence of max_context " + std::to_string(max_context) + " positions needs " +
                                    std::to_string((max_context + page_size - 1) / page_size) +
                                    " KV pages; the pool has " + std::to_string(pages));
  }
  return Status::ok();
}

Scheduler::Scheduler(SchedulerOptions o) : o_(o), pages_held_(size_t(std::max<int64_t>(o.max_running, 0)), 0) {
  for (int64_t s = o_.max_running - 1; s >= 0; --s) free_slots_.push_back(s);
}

Status Scheduler::admit(std::unique_ptr<Sequence> seq) {
  if (int64_t(waiting_.size()) >= o_.max_waiting) {
    return Status::resource_exhausted("the server's queue is full (" + std::to_string(o_.max_waiting) +
                                      " requests waiting): try again later");
  }
  seq->prompt_len = int64_t(seq->request.prompt.size());
  seq->tokens = seq->request.prompt;
  waiting_.push_back(std::move(seq));
  return Status::ok();
}

void Scheduler::admit_waiting() {
  while (!waiting_.empty() && !free_slots_.empty()) {
    Sequence& s = *waiting_.front();
    // The whole of its tokens (and the first decode position) must fit beside the watermark.
    const int64_t need = pages_for(int64_t(s.tokens.size()) + 1);
    const int64_t free = o_.pages - pages_used_;
    if (need + (running_.empty() ? 0 : o_.watermark_pages) > free) break;
    s.slot = free_slots_.back();
    free_slots_.pop_back();
    // Its prompt's pages are counted now (the engine takes them chunk by chunk), so a prefill
    // never runs out; decode growth beyond them is counted step by step.
    pages_held_[size_t(s.slot)] = pages_for(int64_t(s.tokens.size()));
    pages_used_ += pages_held_[size_t(s.slot)];
    s.computed = 0;
    s.admitted_order = next_order_++;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
}

void Scheduler::release(Sequence* s, std::vector<int64_t>* freed_slots) {
  if (s->slot < 0) return;
  pages_used_ -= pages_held_[size_t(s->slot)];
  pages_held_[size_t(s->slot)] = 0;
  free_slots_.push_back(s->slot);
  if (freed_slots) freed_slots->push_back(s->slot);
  s->slot = -1;
}

std::unique_ptr<Sequence> Scheduler::drop(Sequence* s) {
  auto it = std::find_if(running_.begin(), running_.end(), [s](const auto& p) { return p.get() == s; });
  if (it == running_.end()) return nullptr;
  std::unique_ptr<Sequence> owned = std::move(*it);
  running_.erase(it);
  return owned;
}

void Scheduler::preempt(Sequence* s, StepPlan* plan) {
  release(s, &plan->freed_slots);
  s->computed = 0;
  ++s->preemptions;
  ++preemptions_;
  auto it = std::find_if(running_.begin(), running_.end(), [s](const auto& p) { return p.get() == s; });
  waiting_.push_front(std::move(*it));
  running_.erase(it);
}

// Every decoding sequence needs its next position's page; the latest admitted give theirs back
// until the others fit. Returns false when nothing is left to decode.
bool Scheduler::reserve_decode_pages(StepPlan* plan) {
  for (;;) {
    int64_t need = 0;
    for (const auto& s : running_) {
      if (s->decoding()) need += std::max<int64_t>(0, pages_for(s->computed + 1) - held_pages(*s));
    }
    if (pages_used_ + need <= o_.pages) break;
    // The most recently admitted sequence goes back to the queue (prefilling ones first: they
    // have the least work to redo).
    Sequence* victim = nullptr;
    for (const auto& s : running_) {
      if (!victim || s->admitted_order > victim->admitted_order) victim = s.get();
    }
    if (!victim) return false;
    preempt(victim, plan);
  }
  for (const auto& s : running_) {
    if (!s->decoding()) continue;
    int64_t& held = pages_held_[size_t(s->slot)];
    const int64_t want = pages_for(s->computed + 1);
    if (want > held) pages_used_ += want - held, held = want;
    plan->decode.push_back(s.get());
  }
  return !plan->decode.empty();
}

StepPlan Scheduler::plan(std::vector<int64_t>* cancelled_slots) {
  // Cancelled sequences leave first, wherever they are.
  for (size_t i = 0; i < running_.size();) {
    Sequence* s = running_[i].get();
    if (s->channel && s->channel->cancelled()) {
      release(s, cancelled_slots);
      s->channel->finish(FinishReason::kCancelled);
      ++cancelled_;
      running_.erase(running_.begin() + ptrdiff_t(i));
    } else {
      ++i;
    }
  }
  for (size_t i = 0; i < waiting_.size();) {
    if (waiting_[i]->channel && waiting_[i]->channel->cancelled()) {
      waiting_[i]->channel->finish(FinishReason::kCancelled);
      ++cancelled_;
      waiting_.erase(waiting_.begin() + ptrdiff_t(i));
    } else {
      ++i;
    }
  }
  admit_waiting();

  StepPlan plan;
  const bool any_decoding = std::any_of(running_.begin(), running_.end(), [](const auto& s) { return s->decoding(); });
  const bool any_prefill = std::any_of(running_.begin(), running_.end(), [](const auto& s) { return !s->decoding(); });
  // Alternate while both have work; otherwise whichever has.
  const bool decode_now = any_decoding && (!any_prefill || !last_was_decode_);
  if (decode_now && reserve_decode_pages(&plan)) {
    plan.kind = StepPlan::Kind::kDecode;
    last_was_decode_ = true;
    return plan;
  }
  // Prefill: chunks in admission order within the token and layout budgets. Pages for a chunk
  // were counted at admission (the whole prompt), so nothing can run out here.
  int64_t tokens = 0;
  for (const auto& s : running_) {
    if (s->decoding() || s->slot < 0) continue;
    const int64_t left = int64_t(s->tokens.size()) - s->computed;
    const int64_t take = std::min(left, o_.prefill_tokens - tokens);
    if (take <= 0 || int64_t(plan.prefill.size()) >= o_.prefill_sequences) break;
    plan.prefill.push_back(Chunk{s.get(), s->computed, take});
    tokens += take;
  }
  if (!plan.prefill.empty()) {
    plan.kind = StepPlan::Kind::kPrefill;
    last_was_decode_ = false;
  } else if (any_decoding && reserve_decode_pages(&plan)) {
    plan.kind = StepPlan::Kind::kDecode;
    last_was_decode_ = true;
  }
  return plan;
}

std::vector<Outcome> Scheduler::complete(const StepPlan& plan, const std::vector<int32_t>& next,
                                         const std::vector<int32_t>& eos_ids, Clock::time_point now,
                                         std::vector<int64_t>* freed_slots,
                                         std::vector<std::shared_ptr<Channel>>* to_wake) {
  std::vector<Outcome> out;
  auto append = [&](Sequence* s, int32_t token) {
    Outcome o{s, true, FinishReason::kNone, nullptr};
    s->tokens.push_back(token);
    if (s->channel && to_wake) {
      s->channel->append(token);
      to_wake->push_back(s->channel);
    } else if (s->channel) {
      s->channel->push(token);
    }
    if (!s->has_first_token) s->has_first_token = true, s->first_token_time = now;
    s->last_token_time = now;
    const GenerationRequest& r = s->request;
    const bool eos = std::find(eos_ids.begin(), eos_ids.end(), token) != eos_ids.end();
    const bool stop = std::find(r.stop_ids.begin(), r.stop_ids.end(), token) != r.stop_ids.end();
    if (stop || (eos && !r.ignore_eos)) {
      o.finished = FinishReason::kStop;
    } else if (s->generated() >= r.max_tokens || int64_t(s->tokens.size()) >= o_.max_context) {
      o.finished = FinishReason::kLength;
    }
    out.push_back(std::move(o));
  };
  if (plan.kind == StepPlan::Kind::kDecode) {
    for (size_t i = 0; i < plan.decode.size(); ++i) {
      Sequence* s = plan.decode[i];
      ++s->computed;
      append(s, next[i]);
    }
  } else if (plan.kind == StepPlan::Kind::kPrefill) {
    for (size_t i = 0; i < plan.prefill.size(); ++i) {
      const Chunk& c = plan.prefill[i];
      c.seq->computed = c.start + c.count;
      if (c.last())
        append(c.seq, next[i]);
      else
        out.push_back(Outcome{c.seq, false, FinishReason::kNone, nullptr});
    }
  }
  for (Outcome& o : out) {
    if (o.finished == FinishReason::kNone) continue;
    release(o.seq, freed_slots);
    if (o.seq->channel) o.seq->channel->finish(o.finished);
    o.done = drop(o.seq);
  }
  return out;
}

void Scheduler::fail(const StepPlan& plan, const Status& error, std::vector<int64_t>* freed_slots) {
  std::vector<Sequence*> hit = plan.decode;
  for (const Chunk& c : plan.prefill) hit.push_back(c.seq);
  for (Sequence* s : hit) {
    release(s, freed_slots);
    if (s->channel) s->channel->finish(FinishReason::kError, error);
    drop(s);
  }
}

void Scheduler::finish_all(FinishReason reason, const Status& error, std::vector<int64_t>* freed_slots) {
  for (const auto& s : running_) {
    release(s.get(), freed_slots);
    if (s->channel) s->channel->finish(reason, error);
  }
  running_.clear();
  for (const auto& s : waiting_) {
    if (s->channel) s->channel->finish(reason, error);
  }
  waiting_.clear();
}

}  // namespace tunableop::serve

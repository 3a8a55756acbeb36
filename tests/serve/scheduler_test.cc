// The continuous batch's scheduler alone (no engine): admission in arrival order within slots
// and KV pages, prefill chunks within the token and layout budgets, decode and prefill
// alternating, preemption when decode runs out of pages, cancellation and finishing that give
// slots and pages back at once.
#include "serve/scheduler.h"

#include <gtest/gtest.h>

#include <map>

namespace tunableop::serve {
namespace {

SchedulerOptions small(int64_t running = 4, int64_t pages = 64, int64_t page = 4) {
  SchedulerOptions o;
  o.max_running = running;
  o.max_waiting = 8;
  o.prefill_tokens = 16;
  o.prefill_sequences = 8;
  o.max_context = 64;
  o.page_size = page;
  o.pages = pages;
  o.watermark_pages = 0;
  return o;
}

std::unique_ptr<Sequence> request(int64_t prompt, int64_t max_tokens, std::shared_ptr<Channel>* ch = nullptr) {
  auto s = std::make_unique<Sequence>();
  s->request.prompt.assign(size_t(prompt), 1);
  s->request.max_tokens = max_tokens;
  s->channel = std::make_shared<Channel>();
  if (ch) *ch = s->channel;
  return s;
}

// Runs plans to completion with a fake engine that always answers token 7; returns each step's kind.
struct Driver {
  Scheduler& s;
  std::vector<int32_t> eos;
  std::vector<int64_t> freed;
  std::string kinds;
  int64_t run(int max_steps = 1000) {
    int64_t steps = 0;
    for (; steps < max_steps; ++steps) {
      std::vector<int64_t> cancelled;
      StepPlan p = s.plan(&cancelled);
      freed.insert(freed.end(), cancelled.begin(), cancelled.end());
      freed.insert(freed.end(), p.freed_slots.begin(), p.freed_slots.end());
      if (p.kind == StepPlan::Kind::kIdle) break;
      kinds += p.kind == StepPlan::Kind::kDecode ? 'd' : 'p';
      const size_t n = p.kind == StepPlan::Kind::kDecode ? p.decode.size() : p.prefill.size();
      s.complete(p, std::vector<int32_t>(n, 7), eos, Clock::now(), &freed);
    }
    return steps;
  }
};

TEST(Scheduler, ChunksAPromptAndAlternatesWithDecode) {
  Scheduler s(small());
  std::shared_ptr<Channel> a, b;
  ASSERT_TRUE(s.admit(request(4, 3, &a)).is_ok());
  std::vector<int64_t> none;
  StepPlan p = s.plan(&none);
  ASSERT_EQ(p.kind, StepPlan::Kind::kPrefill);
  ASSERT_EQ(p.prefill.size(), 1u);
  s.complete(p, {7}, {}, Clock::now(), &none);
  // A 40-token prompt arrives: it is prefilled 16 tokens at a time, each chunk after a decode step.
  ASSERT_TRUE(s.admit(request(40, 2, &b)).is_ok());
  Driver d{s, {}, {}, ""};
  d.run();
  EXPECT_EQ(d.kinds.substr(0, 5), "dpdpp") << d.kinds;  // a finishes after its 2 decode steps
  auto ua = a->take(std::chrono::milliseconds(0)), ub = b->take(std::chrono::milliseconds(0));
  EXPECT_EQ(ua.tokens.size(), 3u);
  EXPECT_EQ(ua.reason, FinishReason::kLength);
  EXPECT_EQ(ub.tokens.size(), 2u);
  EXPECT_TRUE(s.idle());
  EXPECT_EQ(s.pages_used(), 0);
}

// With a wake list (the runtime's way), a step's tokens are in the channels and the channels
// are listed for waking, once per appended token; a chunk that is not its prompt's last adds
// nothing; a finished sequence's channel is finished at once.
TEST(Scheduler, ListsTheChannelsToWakeWhenAsked) {
  Scheduler s(small());
  std::shared_ptr<Channel> a, b;
  ASSERT_TRUE(s.admit(request(4, 1, &a)).is_ok());
  ASSERT_TRUE(s.admit(request(20, 3, &b)).is_ok());  // 12 of its 20 tokens fit the pass beside a's 4
  std::vector<int64_t> freed;
  StepPlan p = s.plan(&freed);
  ASSERT_EQ(p.kind, StepPlan::Kind::kPrefill);
  ASSERT_EQ(p.prefill.size(), 2u);
  ASSERT_FALSE(p.prefill[1].last());  // b's prompt does not fit the 16-token pass whole
  std::vector<std::shared_ptr<Channel>> to_wake;
  s.complete(p, {7, 9}, {}, Clock::now(), &freed, &to_wake);
  ASSERT_EQ(to_wake.size(), 1u);
  EXPECT_EQ(to_wake[0], a);
  Channel::Update ua = a->take(std::chrono::milliseconds(0));
  EXPECT_EQ(ua.tokens, std::vector<int32_t>{7});
  EXPECT_TRUE(ua.finished);  // max_tokens 1: finished in the same step
  EXPECT_EQ(ua.reason, FinishReason::kLength);
  to_wake.clear();
  p = s.plan(&freed);
  ASSERT_EQ(p.kind, StepPlan::Kind::kPrefill);  // b's last chunk
  s.complete(p, {8}, {}, Clock::now(), &freed, &to_wake);
  ASSERT_EQ(to_wake.size(), 1u);
  EXPECT_EQ(to_wake[0], b);
  Channel::Update ub = b->take(std::chrono::milliseconds(0));
  EXPECT_EQ(ub.tokens, std::vector<int32_t>{8});
  EXPECT_FALSE(ub.finished);
}

TEST(Scheduler, PacksShortPromptsWithinTheBudgets) {
  Scheduler s(small(8));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(s.admit(request(5, 1)).is_ok());
  std::vector<int64_t> none;
  StepPlan p = s.plan(&none);
  ASSERT_EQ(p.kind, StepPlan::Kind::kPrefill);
  // 16 tokens: three whole prompts and one token of the fourth.
  ASSERT_EQ(p.prefill.size(), 4u);
  EXPECT_EQ(p.prefill[3].count, 1);
  EXPECT_FALSE(p.prefill[3].last());
  int64_t total = 0;
  for (const Chunk& c : p.prefill) total += c.count;
  EXPECT_EQ(total, 16);
}

TEST(Scheduler, APassTakesAtMostPrefillSequencesChunks) {
  SchedulerOptions o = small(8);
  o.prefill_sequences = 2;
  Scheduler s(o);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(s.admit(request(2, 1)).is_ok());
  std::vector<int64_t> none;
  StepPlan p = s.plan(&none);
  ASSERT_EQ(p.prefill.size(), 2u);
}

TEST(Scheduler, AdmissionIsFirstComeFirstServedWithinSlotsAndPages) {
  // 10 pages of 4: a 30-token prompt takes 8 (its 30 positions and the first decode position).
  Scheduler s(small(4, 10, 4));
  ASSERT_TRUE(s.admit(request(30, 4)).is_ok());
  ASSERT_TRUE(s.admit(request(12, 4)).is_ok());  // needs 4 pages: waits behind the first
  ASSERT_TRUE(s.admit(request(2, 4)).is_ok());   // would fit, but does not overtake
  std::vector<int64_t> none;
  StepPlan p = s.plan(&none);
  EXPECT_EQ(s.running(), 1);
  EXPECT_EQ(s.waiting(), 2);
  ASSERT_EQ(p.prefill.size(), 1u);
  EXPECT_EQ(p.prefill[0].count, 16);
}

TEST(Scheduler, QueueLimitIsAnError) {
  Scheduler s(small());
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(s.admit(request(3, 1)).is_ok());
  const Status st = s.admit(request(3, 1));
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
}

TEST(Scheduler, DecodeOutOfPagesPreemptsTheLatestAndRecomputesIt) {
  // 6 pages of 4 positions: two sequences of 8-token prompts (3 pages each at admission with the
  // watermark 0) grow past their pages; the later one is preempted, re-prefilled later over its
  // prompt and what it had generated, and both still produce all their tokens.
  SchedulerOptions o = small(2, 6, 4);
  o.max_context = 20;
  ASSERT_TRUE(o.validate().is_ok());
  Scheduler s(o);
  std::shared_ptr<Channel> a, b;
  ASSERT_TRUE(s.admit(request(8, 10, &a)).is_ok());
  ASSERT_TRUE(s.admit(request(7, 10, &b)).is_ok());
  Driver d{s, {}, {}, ""};
  d.run();
  EXPECT_GE(s.preemptions(), 1u);
  auto ua = a->take(std::chrono::milliseconds(0)), ub = b->take(std::chrono::milliseconds(0));
  EXPECT_EQ(ua.tokens.size(), 10u);
  EXPECT_EQ(ub.tokens.size(), 10u);  // tokens already streamed are never sent twice
  EXPECT_EQ(s.pages_used(), 0);
}

TEST(Scheduler, StopsAtEosUnlessIgnoredAndAtStopIdsAlways) {
  Scheduler s(small());
  std::shared_ptr<Channel> a, b, c;
  ASSERT_TRUE(s.admit(request(3, 5, &a)).is_ok());
  auto ignoring = request(3, 5, &b);
  ignoring->request.ignore_eos = true;
  ASSERT_TRUE(s.admit(std::move(ignoring)).is_ok());
  auto stopping = request(3, 5, &c);
  stopping->request.ignore_eos = true;
  stopping->request.stop_ids = {7};
  ASSERT_TRUE(s.admit(std::move(stopping)).is_ok());
  Driver d{s, {7}, {}, ""};  // the fake engine always answers 7, which is EOS
  d.run();
  auto ua = a->take(std::chrono::milliseconds(0));
  auto ub = b->take(std::chrono::milliseconds(0));
  auto uc = c->take(std::chrono::milliseconds(0));
  EXPECT_EQ(ua.tokens.size(), 1u);
  EXPECT_EQ(ua.reason, FinishReason::kStop);
  EXPECT_EQ(ub.tokens.size(), 5u);
  EXPECT_EQ(ub.reason, FinishReason::kLength);
  EXPECT_EQ(uc.tokens.size(), 1u);
  EXPECT_EQ(uc.reason, FinishReason::kStop);
}

TEST(Scheduler, CancellationFreesSlotAndPagesAtTheNextPlan) {
  Scheduler s(small(1));
  std::shared_ptr<Channel> a, b;
  ASSERT_TRUE(s.admit(request(6, 50, &a)).is_ok());
  ASSERT_TRUE(s.admit(request(6, 1, &b)).is_ok());
  std::vector<int64_t> none;
  StepPlan p = s.plan(&none);
  s.complete(p, {7}, {}, Clock::now(), &none);
  EXPECT_GT(s.pages_used(), 0);
  EXPECT_EQ(s.waiting(), 1);  // one slot only
  a->cancel();
  std::vector<int64_t> cancelled;
  p = s.plan(&cancelled);
  ASSERT_EQ(cancelled.size(), 1u);
  EXPECT_EQ(a->take(std::chrono::milliseconds(0)).reason, FinishReason::kCancelled);
  // b took the slot in the same plan.
  EXPECT_EQ(s.running(), 1);
  ASSERT_EQ(p.kind, StepPlan::Kind::kPrefill);
  EXPECT_EQ(s.cancelled(), 1u);
}

TEST(Scheduler, FailingAStepFinishesItsSequencesWithTheError) {
  Scheduler s(small());
  std::shared_ptr<Channel> a;
  ASSERT_TRUE(s.admit(request(3, 4, &a)).is_ok());
  std::vector<int64_t> none, freed;
  StepPlan p = s.plan(&none);
  s.fail(p, Status::device_error("boom"), &freed);
  EXPECT_EQ(freed.size(), 1u);
  auto u = a->take(std::chrono::milliseconds(0));
  EXPECT_EQ(u.reason, FinishReason::kError);
  EXPECT_EQ(u.error.message(), "boom");
  EXPECT_TRUE(s.idle());
}

TEST(Scheduler, OptionsAreValidated) {
  SchedulerOptions o = small();
  o.pages = 2;  // a 64-position sequence needs 16 pages of 4
  EXPECT_FALSE(o.validate().is_ok());
  o = small();
  o.prefill_sequences = 0;
  EXPECT_FALSE(o.validate().is_ok());
  EXPECT_TRUE(small().validate().is_ok());
}

}  // namespace
}  // namespace tunableop::serve

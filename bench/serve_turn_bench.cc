// The serve loop's side of handing a decode step's tokens to its requests (issue 26's "host
// turn"): each running request's reader sleeps in Channel::take() between tokens, as the HTTP
// threads do. Two ways, side by side in one run:
//   BM_HandTokens/inline: Channel::push, each wake-up on the loop thread (the runtime before
//     ChannelWaker);
//   BM_HandTokens/waker: Channel::append, then one post to a ChannelWaker that wakes the readers
//     on its own thread (the runtime now).
// Between iterations (not timed) the loop sleeps 2 ms, the engine step's stand-in, so that the
// readers are asleep again when the next step's tokens come. Arg: running requests.
#include <benchmark/benchmark.h>

#include <thread>

#include "serve/channel_waker.h"

namespace tunableop::serve {
namespace {

struct Readers {
  explicit Readers(int n) {
    for (int i = 0; i < n; ++i) channels.push_back(std::make_shared<Channel>());
    for (auto& c : channels) {
      threads.emplace_back([c] {
        while (!c->take(std::chrono::milliseconds(1000)).finished) {
        }
      });
    }
  }
  ~Readers() {
    for (auto& c : channels) c->finish(FinishReason::kLength);
    for (auto& t : threads) t.join();
  }
  std::vector<std::shared_ptr<Channel>> channels;
  std::vector<std::thread> threads;
};

void hand_tokens(benchmark::State& state, bool use_waker) {
  Readers readers(int(state.range(0)));
  ChannelWaker waker;
  std::vector<std::shared_ptr<Channel>> to_wake;
  int32_t token = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    state.ResumeTiming();
    ++token;
    if (use_waker) {
      for (auto& c : readers.channels) {
        c->append(token);
        to_wake.push_back(c);
      }
      waker.post(&to_wake);
    } else {
      for (auto& c : readers.channels) c->push(token);
    }
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_HandTokens_inline(benchmark::State& state) { hand_tokens(state, false); }
void BM_HandTokens_waker(benchmark::State& state) { hand_tokens(state, true); }
BENCHMARK(BM_HandTokens_inline)->Arg(64)->Arg(256)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_HandTokens_waker)->Arg(64)->Arg(256)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace tunableop::serve

BENCHMARK_MAIN();

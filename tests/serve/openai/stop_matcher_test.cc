// Stop strings over text that arrives in arbitrary pieces: the released text is the full text
// cut at the earliest match, however it was split.
#include "serve/openai/stop_matcher.h"

#include <gtest/gtest.h>

#include <random>

namespace tunableop::serve::openai {
namespace {

// Feeds `text` cut at `cuts` and returns what was released and whether it stopped.
std::pair<std::string, bool> run(const std::vector<std::string>& stops, const std::string& text,
                                 const std::vector<size_t>& cuts, bool include = false) {
  StopMatcher m(stops, include);
  std::string out;
  size_t at = 0;
  for (size_t c : cuts) {
    auto r = m.put(text.substr(at, c - at));
    out += r.text;
    at = c;
    if (r.stopped) return {out, true};
  }
  auto r = m.put(text.substr(at));
  out += r.text;
  if (r.stopped) return {out, true};
  return {out + m.flush(), false};
}

TEST(StopMatcher, CutsAtTheMatchAcrossPieces) {
  EXPECT_EQ(run({"STOP"}, "abc STOP def", {}), std::make_pair(std::string("abc "), true));
  EXPECT_EQ(run({"STOP"}, "abc STOP def", {5, 6, 7}), std::make_pair(std::string("abc "), true));
  EXPECT_EQ(run({"STOP"}, "abc STOP def", {5, 6, 7}, true), std::make_pair(std::string("abc STOP"), true));
  EXPECT_EQ(run({"STOP"}, "abc STO", {5}), std::make_pair(std::string("abc STO"), false));  // flushed at the end
  EXPECT_EQ(run({"\n\n"}, "line\n\nnext", {4, 5}), std::make_pair(std::string("line"), true));
}

TEST(StopMatcher, HoldsBackOnlyWhatCouldStillMatch) {
  StopMatcher m({"world"});
  EXPECT_EQ(m.put("hello wor").text, "hello ");
  EXPECT_EQ(m.put("m").text, "worm");  // "worm" cannot become "world"
  EXPECT_EQ(m.put(" w").text, " ");
  auto r = m.put("orld!");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "");
  EXPECT_EQ(m.matched(), "world");
  EXPECT_TRUE(m.put("more").text.empty());  // nothing after a match
}

TEST(StopMatcher, EarliestMatchWins) {
  EXPECT_EQ(run({"cd", "b"}, "abcd", {}), std::make_pair(std::string("a"), true));
  EXPECT_EQ(run({"bcd", "cd"}, "abcd", {2}), std::make_pair(std::string("a"), true));
  // Overlapping prefixes: "aab" inside "aaab".
  EXPECT_EQ(run({"aab"}, "xaaab", {2, 3, 4}), std::make_pair(std::string("xa"), true));
}

TEST(StopMatcher, MultibyteStopStrings) {
  const std::string text = "caf\xc3\xa9 \xe2\x9c\x93 done";  // "café ✓ done"
  for (size_t cut = 1; cut < text.size(); ++cut) {
    auto r = run({"\xe2\x9c\x93"}, text, {cut});
    EXPECT_EQ(r.first, "caf\xc3\xa9 ") << cut;
    EXPECT_TRUE(r.second);
  }
}

// Any split of any text gives the one-shot answer.
TEST(StopMatcher, RandomSplitsAgreeWithOneShot) {
  std::mt19937 g(7);
  const std::vector<std::string> stops = {"ab", "bba", "aaaa", "c"};
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text;
    const int n = int(g() % 20);
    for (int i = 0; i < n; ++i) text += "abc"[g() % 3 == 0 ? 2 : g() % 2];
    // One-shot: the earliest match of any stop.
    size_t best = std::string::npos;
    for (const auto& s : stops) best = std::min(best, text.find(s));
    const std::string want = best == std::string::npos ? text : text.substr(0, best);
    std::vector<size_t> cuts;
    for (size_t i = 1; i < text.size(); ++i)
      if (g() % 3 == 0) cuts.push_back(i);
    auto r = run(stops, text, cuts);
    EXPECT_EQ(r.first, want) << text;
    EXPECT_EQ(r.second, best != std::string::npos) << text;
  }
}

}  // namespace
}  // namespace tunableop::serve::openai

// The prefill graph policy (llm/prefill_graphs.h): eager first, captured second, replayed after;
// every eager run drops all graphs; a results change makes a shape eager again.
#include "llm/prefill_graphs.h"

#include <gtest/gtest.h>

#include <string>

namespace tunableop::llm {
namespace {

using Graphs = PrefillGraphs<std::string>;
using Action = Graphs::Action;

TEST(PrefillGraphs, EagerThenCaptureThenReplay) {
  Graphs g;
  const PrefillShape s{1, 2048, false, true};
  EXPECT_EQ(g.next(s, 5), Action::kEager);
  g.ran_eagerly(s, 6);  // the eager run tuned: version 5 -> 6
  EXPECT_EQ(g.next(s, 6), Action::kCapture);
  g.captured(s, "graph of s");
  EXPECT_EQ(g.next(s, 6), Action::kReplay);
  EXPECT_EQ(g.graph(s), "graph of s");
  EXPECT_EQ(g.graphs(), 1u);
}

TEST(PrefillGraphs, ShapesDifferInEveryField) {
  Graphs g;
  const PrefillShape s{2, 64, true, true};
  g.ran_eagerly(s, 1);
  g.captured(s, "s");
  for (PrefillShape other : {PrefillShape{1, 64, true, true}, PrefillShape{2, 72, true, true},
                             PrefillShape{2, 64, false, true}, PrefillShape{2, 64, true, false}})
    EXPECT_EQ(g.next(other, 1), Action::kEager);
  EXPECT_EQ(g.next(s, 1), Action::kReplay);
}

TEST(PrefillGraphs, AnEagerRunDropsEveryGraph) {
  Graphs g;
  const PrefillShape a{1, 16, false, false}, b{1, 32, false, false};
  g.ran_eagerly(a, 0);
  g.captured(a, "a");
  EXPECT_EQ(g.next(b, 0), Action::kEager);
  g.ran_eagerly(b, 0);  // b may have grown a buffer a's graph points at
  EXPECT_EQ(g.graphs(), 0u);
  EXPECT_EQ(g.next(a, 0), Action::kEager);
  EXPECT_EQ(g.next(b, 0), Action::kCapture);
}

TEST(PrefillGraphs, ANewResultsVersionMakesTheShapeEagerAgain) {
  Graphs g;
  const PrefillShape s{1, 2048, false, true};
  g.ran_eagerly(s, 3);
  EXPECT_EQ(g.next(s, 4), Action::kEager) << "a capture must only record what an eager run set up";
  g.ran_eagerly(s, 4);
  g.captured(s, "v4");
  EXPECT_EQ(g.next(s, 4), Action::kReplay);
  EXPECT_EQ(g.next(s, 5), Action::kEager) << "the graph holds the choices of version 4";
  g.clear();
  EXPECT_EQ(g.next(s, 4), Action::kEager);
}

}  // namespace
}  // namespace tunableop::llm

// When a prefill runs eagerly, is captured as a graph, or replays one (issue 12): the policy,
// apart from CUDA, so that the CPU tests check it and the CUDA device only captures and launches.
//
// The first prefill of a shape runs eagerly: it tunes, sizes workspaces and activation buffers,
// builds cuDNN plans. The second one of the same shape, served by the same TunableOp results, is
// captured (not run) and launched; later ones replay that graph. So a single prompt never pays
// for a capture, and a capture only records what an eager run has already set up. Every eager
// prefill drops all graphs: it may have grown a buffer or a workspace that a graph points at (a
// new shape is the only thing that does), so a workload alternating between new shapes stays
// eager. A graph whose results version differs from the current one is stale (a new tuning, the
// in-context check switching a choice): the shape runs eagerly again.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

namespace tunableop::llm {

struct PrefillShape {
  int64_t batch = 0, tokens = 0;  // tokens: the padded length
  bool ragged = false;            // some prompt shorter than `tokens`
  bool tunableop = false;         // TunableOp on (served choices) or off (Default)
  auto operator<=>(const PrefillShape&) const = default;
};

template <class Graph>
class PrefillGraphs {
 public:
  enum class Action { kEager, kCapture, kReplay };

  // What to do for a prefill of `shape` when the results are at `version` (0 with TunableOp off).
  Action next(const PrefillShape& shape, uint64_t version) const {
    auto it = seen_.find(shape);
    if (it == seen_.end() || it->second.eager_version != version) return Action::kEager;
    return it->second.graph ? Action::kReplay : Action::kCapture;
  }
  // After an eager run: every graph is dropped, and the shape is remembered with the version the
  // run left (its own tuning included: that is what the next prefill is served).
  void ran_eagerly(const PrefillShape& shape, uint64_t version_after) {
    seen_.clear();
    seen_[shape].eager_version = version_after;
  }
  // After kCapture: the graph to replay from now on.
  void captured(const PrefillShape& shape, Graph g) { seen_.at(shape).graph = std::move(g); }
  // The graph of kReplay (or of kCapture, once captured).
  const Graph& graph(const PrefillShape& shape) const { return *seen_.at(shape).graph; }
  void clear() { seen_.clear(); }
  size_t graphs() const {
    size_t n = 0;
    for (const auto& [shape, e] : seen_) n += e.graph.has_value();
    return n;
  }

 private:
  struct Entry {
    uint64_t eager_version = 0;
    std::optional<Graph> graph;
  };
  std::map<PrefillShape, Entry> seen_;
};

}  // namespace tunableop::llm

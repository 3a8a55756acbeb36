#include "backends/cpu/shared/provider_registration.h"

#include <algorithm>

namespace tunableop::cpu_shared {

std::vector<int> thread_counts(int cores, int library_max) {
  if (library_max > 0) cores = std::min(cores, library_max);
  cores = std::max(cores, 1);
  std::vector<int> counts = {cores, std::max(1, cores / 2), 1};
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

}  // namespace tunableop::cpu_shared

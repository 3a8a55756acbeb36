// What the interposer test programs share: whether the engine library is mapped into this process.
#pragma once

#include <fstream>
#include <string>

namespace interpose_test {

inline bool engine_loaded() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (line.find("libtunableop_interpose") != std::string::npos) return true;
  return false;
}

}  // namespace interpose_test

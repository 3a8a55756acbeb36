// A fresh scratch directory per test (results files and the like), removed with everything in
// it when the object dies. Unique per process, object and moment, so parallel tests never meet.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>

namespace tunableop::testing {

class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag = "test") {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("tunableop-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" +
             std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace tunableop::testing

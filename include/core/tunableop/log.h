// Verbose logging for the tuner and dispatch (levels 0-3, the seed's tree format).
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <string>

namespace tunableop {

class Logger {
 public:
  using Sink = std::function<void(const std::string& line)>;
  Logger();  // writes to stderr
  void set_level(int level) { level_ = level; }
  int level() const { return level_; }
  void set_sink(Sink sink);
  // Prints `line` when the current level is >= `level`. Thread-safe.
  void log(int level, const std::string& line);
  void warn(const std::string& line);  // always printed, prefixed "tunableop: warning: "

 private:
  std::atomic<int> level_{0};  // set by dispatch while other threads log
  std::mutex mu_;
  Sink sink_;
};

}  // namespace tunableop

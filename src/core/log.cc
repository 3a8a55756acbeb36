#include "tunableop/log.h"

#include <cstdio>

namespace tunableop {

Logger::Logger() {
  sink_ = [](const std::string& line) {
    std::fputs(line.c_str(), stderr);
    std::fputc('\n', stderr);
  };
}

void Logger::set_sink(Sink sink) {
  std::lock_guard<std::mutex> lock(mu_);
  sink_ = std::move(sink);
}

void Logger::log(int level, const std::string& line) {
  if (level > level_) return;
  std::lock_guard<std::mutex> lock(mu_);
  sink_(line);
}

void Logger::warn(const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  sink_("tunableop: warning: " + line);
}

}  // namespace tunableop

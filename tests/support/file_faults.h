// File-system faults for tests, made without root or mounts (CI runs in a container): a FIFO
// where a file should be, and a full disk simulated with RLIMIT_FSIZE (with SIGXFSZ ignored, a
// write past the limit fails with EFBIG after writing what fits, as a full disk fails with
// ENOSPC after a short write).
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <cstdint>
#include <string>

namespace tunableop::testing {

inline bool make_fifo(const std::string& path) { return ::mkfifo(path.c_str(), 0644) == 0; }

// Limits the size of files this process writes to `bytes` for its lifetime.
class ScopedFileSizeLimit {
 public:
  explicit ScopedFileSizeLimit(uint64_t bytes) {
    old_handler_ = ::signal(SIGXFSZ, SIG_IGN);
    ::getrlimit(RLIMIT_FSIZE, &old_);
    rlimit lim = old_;
    lim.rlim_cur = rlim_t(bytes);
    ::setrlimit(RLIMIT_FSIZE, &lim);
  }
  ~ScopedFileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    ::signal(SIGXFSZ, old_handler_);
  }
  ScopedFileSizeLimit(const ScopedFileSizeLimit&) = delete;
  ScopedFileSizeLimit& operator=(const ScopedFileSizeLimit&) = delete;

 private:
  rlimit old_{};
  sighandler_t old_handler_ = SIG_DFL;
};

}  // namespace tunableop::testing

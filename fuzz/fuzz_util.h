// Shared by the fuzz targets: a scratch directory per process (under /dev/shm when it exists,
// so the file round trips cost no disk I/O) and a check that aborts with a message, which
// libFuzzer reports as a finding with the input that caused it.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace tunableop::fuzz {

inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    namespace fs = std::filesystem;
    fs::path base = fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    fs::path d = base / ("tunableop-fuzz-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d.string();
  }();
  return dir;
}

// Empties the scratch directory (files a previous input left, e.g. ".env-" siblings).
inline void clear_scratch() {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(scratch_dir(), ec)) std::filesystem::remove_all(e, ec);
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// An input of two parts: 2 bytes little-endian give the first part's length L (cut to what is
// there), the next L bytes are the first part, the rest the second. False for fewer than 2 bytes.
inline bool split_input(const uint8_t* data, size_t size, std::string& first, std::string& second) {
  if (size < 2) return false;
  const size_t len = std::min<size_t>(size - 2, size_t(data[0]) | size_t(data[1]) << 8);
  first.assign(reinterpret_cast<const char*>(data + 2), len);
  second.assign(reinterpret_cast<const char*>(data + 2 + len), size - 2 - len);
  return true;
}

#define FUZZ_CHECK(cond, ...)                                 \
  do {                                                        \
    if (!(cond)) {                                            \
      std::fprintf(stderr, "fuzz check failed: %s: ", #cond); \
      std::fprintf(stderr, __VA_ARGS__);                      \
      std::fprintf(stderr, "\n");                             \
      std::abort();                                           \
    }                                                         \
  } while (0)

}  // namespace tunableop::fuzz

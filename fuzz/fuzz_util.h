// Shared by the fuzz targets: a scratch directory per process (under /dev/shm when it exists,
// so the file round trips cost no disk I/O) and a check that aborts with a message, which
// libFuzzer reports as a finding with the input that caused it.
#pragma once

#include <unistd.h>

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

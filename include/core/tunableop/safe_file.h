// Opening, reading and replacing the files a user names (results file, .stats sidecar, untuned
// file, merge output, suite files, model files, CSV outputs) without ever blocking on a FIFO or a
// device, and without ever replacing something that is not a regular file.
//
// Every open is O_NONBLOCK first: open(2) on a FIFO blocks until the other end opens, and a read
// from a terminal or a device can block forever. Then fstat decides: only a regular file goes on
// (O_NONBLOCK is cleared again; it means nothing for regular files). Anything else is an IoError
// naming what the path is ("is a FIFO, not a regular file").
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "tunableop/status.h"

namespace tunableop {

// "regular file", "directory", "FIFO", "character device", "block device", "socket",
// "symbolic link".
const char* file_type_name(mode_t mode);

// open(2) `flags` (O_CREAT creates with 0666 & ~umask), but only onto a regular file. NotFound
// when the file does not exist and O_CREAT is not given; IoError otherwise. The fd has
// O_CLOEXEC.
StatusOr<int> open_regular(const std::string& path, int flags);

// Ok when a file of `size` bytes can be read into memory here (a quarter of host memory: the
// text and what is parsed from it must fit); otherwise an error naming the path and both sizes.
Status check_readable_size(uint64_t size, const std::string& path);

// Reads a whole regular file (config.json, suite files, index files). NotFound when it does
// not exist.
StatusOr<std::string> read_regular_file(const std::string& path);

// Writes a file so that PATH holds the old content or the new one, never a mix, and a failure
// (disk full, a file size limit) leaves PATH as it was: the data goes to a new temporary file
// beside PATH, is synced, and commit() renames it over PATH.
//
// PATH must be a regular file (its permission bits are kept) or not exist. A symbolic link is
// refused, not followed: renaming onto it would replace the link itself and leave its target
// stale, and writing through it could replace a file elsewhere; the message names the target so
// the caller can pass that path instead. A directory, FIFO, socket or device is refused too.
class AtomicFileWriter {
 public:
  static StatusOr<AtomicFileWriter> create(const std::string& path);
  AtomicFileWriter(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&&) = delete;
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter();  // removes the temporary file unless committed

  // Appends data; the first failure sticks and is returned again by commit().
  Status write(std::string_view data);
  Status commit();
  const std::string& path() const { return path_; }

 private:
  AtomicFileWriter(std::string path, std::string tmp, int fd) : path_(std::move(path)), tmp_(std::move(tmp)), fd_(fd) {}
  void discard();
  std::string path_, tmp_;
  int fd_ = -1;
  Status error_;
};

// Ok when PATH may be replaced by AtomicFileWriter (a regular file, or nothing yet); the error
// says what it is otherwise. Lets a command check every output before doing any work.
Status check_replaceable(const std::string& path);

// PATH made absolute against the current directory (unchanged when it starts with '/'): a file
// a process names once stays the same file after the process chdir()s.
std::string absolute_path(const std::string& path);

// AtomicFileWriter in one call.
Status replace_regular_file(const std::string& path, std::string_view data);

}  // namespace tunableop

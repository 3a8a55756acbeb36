// An advisory flock(2) lock held on an open file, plus the small I/O helpers that go with it.
//
// The lock is taken on the data file itself, never on a "<file>.lock" sidecar: the results file
// is only ever appended to, so its inode is stable and no litter is left behind. Two processes
// that create the file at the same moment both open the same inode (O_CREAT without O_EXCL), and
// whoever wins the lock writes first. A file that is replaced (rename) or removed while we wait
// for the lock is detected after locking (the path no longer names our inode) and reopened, so
// a lock is always held on the file the path names now.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "tunableop/status.h"

namespace tunableop {

class FileLock {
 public:
  enum class Mode { kShared, kExclusive };

  // Opens `path` with open(2) `flags` (O_CREAT creates it with mode 0666 & ~umask) and locks it,
  // blocking until the lock is granted. Without O_CREAT a missing file is NotFound.
  static StatusOr<FileLock> acquire(const std::string& path, int flags, Mode mode);

  FileLock() = default;
  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  void release();  // unlocks and closes now (the destructor does the same)

 private:
  FileLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
};

// "PATH: what: strerror(errno)" for Status messages.
std::string errno_message(const std::string& path, const char* what, int err);

// Reads bytes [offset, offset + size) of `fd` (short only at end of file).
StatusOr<std::string> read_range(int fd, const std::string& path, size_t offset, size_t size);

// Size of the open file; IoError naming `path` when it is not a regular file.
StatusOr<size_t> regular_file_size(int fd, const std::string& path);

// Writes all of `data` at the end of an O_APPEND fd. One write(2) call in the normal case, so
// the bytes land as one unit and a process killed right after this returns loses nothing;
// a short write (disk full, signal) is continued, not retried from the start.
Status append_all(int fd, const std::string& path, const std::string& data);

// append_all() for text lines, for a file of `size_now` bytes held under an exclusive lock.
// The kernel copies a write page by page and a SIGKILL can land between two pages, so a line
// crossing a page boundary could be torn by a dying writer and damage the file for everyone.
// When `data` would cross one, it is preceded by a blank line (spaces, '\n') that fills the
// page: the tear can then only cut padding, which readers skip as a blank line.
Status append_unsplit(int fd, const std::string& path, size_t size_now, const std::string& data);

// Reads a whole file under a shared lock. nullopt when it does not exist; IoError when it
// cannot be read (permissions, a directory, ...).
StatusOr<std::optional<std::string>> read_file_shared(const std::string& path);

}  // namespace tunableop

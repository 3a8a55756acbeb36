#include "core/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "tunableop/safe_file.h"

namespace tunableop {

std::string errno_message(const std::string& path, const char* what, int err) {
  return fmt::format("{}: {}: {}", path, what, std::strerror(err));
}

StatusOr<FileLock> FileLock::acquire(const std::string& path, int flags, Mode mode) {
  const int op = mode == Mode::kExclusive ? LOCK_EX : LOCK_SH;
  // Bounded only to turn a pathological rename storm into an error instead of a hang.
  for (int attempt = 0; attempt < 1000; ++attempt) {
    // Never blocks on a FIFO and never locks anything but a regular file (safe_file.h).
    auto opened = open_regular(path, flags);
    if (!opened.is_ok()) return opened.status();
    int fd = *opened;
    int rc;
    do {
      rc = ::flock(fd, op);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      int err = errno;
      ::close(fd);
      return Status::io_error(errno_message(path, "cannot lock", err));
    }
    // While we waited, another process may have replaced or removed the file; a lock on the old
    // inode would then protect nothing, so check that the path still names what we hold.
    struct stat held {
    }, named{};
    if (::fstat(fd, &held) != 0) {
      int err = errno;
      ::close(fd);
      return Status::io_error(errno_message(path, "cannot stat", err));
    }
    if (::stat(path.c_str(), &named) == 0 && named.st_dev == held.st_dev && named.st_ino == held.st_ino) {
      return FileLock(fd, path);
    }
    int err = errno;
    ::close(fd);
    if (!(flags & O_CREAT) && err == ENOENT) return Status::not_found(errno_message(path, "cannot open", err));
  }
  return Status::io_error(fmt::format("{}: the file keeps being replaced; cannot lock it", path));
}

FileLock::FileLock(FileLock&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) { other.fd_ = -1; }

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

FileLock::~FileLock() { release(); }

void FileLock::release() {
  if (fd_ >= 0) {
    // close() drops the flock too, but unlocking first makes the hand-over explicit even if
    // the descriptor was duplicated (fork) and lives on elsewhere.
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
    fd_ = -1;
  }
}

StatusOr<std::string> read_range(int fd, const std::string& path, size_t offset, size_t size) {
  std::string out(size, '\0');
  size_t got = 0;
  while (got < size) {
    ssize_t n = ::pread(fd, out.data() + got, size - got, static_cast<off_t>(offset + got));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::io_error(errno_message(path, "cannot read", errno));
    }
    if (n == 0) break;  // the file shrank under us: return what is there
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  return out;
}

StatusOr<size_t> regular_file_size(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::io_error(errno_message(path, "cannot stat", errno));
  if (S_ISDIR(st.st_mode)) return Status::io_error(fmt::format("{}: is a directory, not a results file", path));
  if (!S_ISREG(st.st_mode)) return Status::io_error(fmt::format("{}: not a regular file", path));
  return static_cast<size_t>(st.st_size);
}

Status append_all(int fd, const std::string& path, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::io_error(errno_message(path, "cannot write", errno));
    }
    if (n == 0) return Status::io_error(path + ": cannot write: no progress");
    done += static_cast<size_t>(n);
  }
  return Status::ok();
}

Status append_unsplit(int fd, const std::string& path, size_t size_now, const std::string& data) {
  // Page-cache pages are 4 KiB-aligned on every Linux target we build for (larger folios are
  // aligned multiples of it), so 4 KiB boundaries are the only places a copy can stop.
  constexpr size_t kPage = 4096;
  size_t used = size_now % kPage;
  Status st;
  if (data.size() > kPage || used + data.size() <= kPage) {
    st = append_all(fd, path, data);
  } else {
    size_t pad = kPage - used;
    std::string padded(pad - 1, ' ');
    padded += '\n';
    padded += data;
    st = append_all(fd, path, padded);
  }
  // Disk full or a file size limit after part of the line went out: cut the partial line off
  // again (we hold the exclusive lock, so nobody appended after it), so the file stays whole.
  if (!st.is_ok() && ::ftruncate(fd, static_cast<off_t>(size_now)) != 0) {
    return Status(st.code(),
                  st.message() + fmt::format("; and cannot remove the partial line: {}", std::strerror(errno)));
  }
  return st;
}

StatusOr<std::optional<std::string>> read_file_shared(const std::string& path) {
  auto lock = FileLock::acquire(path, O_RDONLY, FileLock::Mode::kShared);
  if (!lock.is_ok()) {
    if (lock.status().code() == StatusCode::kNotFound) return std::optional<std::string>();
    return lock.status();
  }
  auto size = regular_file_size(lock->fd(), path);
  if (!size.is_ok()) return size.status();
  TUNABLEOP_RETURN_IF_ERROR(check_readable_size(*size, path));
  auto text = read_range(lock->fd(), path, 0, *size);
  if (!text.is_ok()) return text.status();
  return std::optional<std::string>(std::move(text).value());
}

}  // namespace tunableop

#include "tunableop/safe_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>

#include <fmt/format.h>

#include "core/file_lock.h"
#include "tunableop/checked_size.h"

namespace tunableop {

const char* file_type_name(mode_t mode) {
  if (S_ISREG(mode)) return "regular file";
  if (S_ISDIR(mode)) return "directory";
  if (S_ISFIFO(mode)) return "FIFO";
  if (S_ISCHR(mode)) return "character device";
  if (S_ISBLK(mode)) return "block device";
  if (S_ISSOCK(mode)) return "socket";
  if (S_ISLNK(mode)) return "symbolic link";
  return "special file";
}

namespace {

Status not_regular(const std::string& path, mode_t mode) {
  return Status::io_error(fmt::format("{}: is a {}, not a regular file", path, file_type_name(mode)));
}

}  // namespace

StatusOr<int> open_regular(const std::string& path, int flags) {
  // Look before opening: opening some devices has side effects even with O_NONBLOCK.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return not_regular(path, st.st_mode);
  int fd;
  do {
    fd = ::open(path.c_str(), flags | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0666);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT && !(flags & O_CREAT)) return Status::not_found(errno_message(path, "cannot open", err));
    // Replaced by something else between the stat and the open (ENXIO: a FIFO without reader).
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return not_regular(path, st.st_mode);
    if (err == EISDIR) return Status::io_error(fmt::format("{}: is a directory, not a regular file", path));
    return Status::io_error(errno_message(path, "cannot open", err));
  }
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return Status::io_error(errno_message(path, "cannot stat", err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return not_regular(path, st.st_mode);
  }
  int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) (void)::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  return fd;
}

Status check_readable_size(uint64_t size, const std::string& path) {
  const uint64_t limit = host_memory_bytes() / 4;
  if (size <= limit) return Status::ok();
  return Status::io_error(
      fmt::format("{}: {} is too large to read (at most {} here: a quarter of this machine's memory)", path,
                  format_bytes(size), format_bytes(limit)));
}

StatusOr<std::string> read_regular_file(const std::string& path) {
  auto fd = open_regular(path, O_RDONLY);
  if (!fd.is_ok()) return fd.status();
  auto size = regular_file_size(*fd, path);
  Status st = size.is_ok() ? check_readable_size(*size, path) : size.status();
  if (!st.is_ok()) {
    ::close(*fd);
    return st;
  }
  auto text = read_range(*fd, path, 0, *size);
  ::close(*fd);
  return text;
}

Status check_replaceable(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::ok();
    return Status::io_error(errno_message(path, "cannot stat", errno));
  }
  if (S_ISLNK(st.st_mode)) {
    char target[PATH_MAX + 1];
    ssize_t n = ::readlink(path.c_str(), target, PATH_MAX);
    std::string to = n >= 0 ? std::string(target, size_t(n)) : std::string("?");
    return Status::io_error(fmt::format(
        "{}: is a symbolic link (to '{}'); it is not replaced: give the path of the file to replace", path, to));
  }
  if (!S_ISREG(st.st_mode))
    return Status::io_error(
        fmt::format("{}: is a {}, not a regular file; it is not replaced", path, file_type_name(st.st_mode)));
  return Status::ok();
}

StatusOr<AtomicFileWriter> AtomicFileWriter::create(const std::string& path) {
  TUNABLEOP_RETURN_IF_ERROR(check_replaceable(path));
  static std::atomic<unsigned> counter{0};
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string tmp = fmt::format("{}.tmp-{}-{}", path, ::getpid(), counter++);
    // O_EXCL | O_NOFOLLOW: never write through something planted under the temporary name.
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) {
      if (errno == EEXIST || errno == EINTR) continue;
      return Status::io_error(errno_message(tmp, "cannot create a temporary file beside the output", errno));
    }
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      // The replacement keeps the replaced file's owner (where allowed) and permission bits.
      (void)!::fchown(fd, st.st_uid, st.st_gid);
      (void)::fchmod(fd, st.st_mode & 07777);
    }
    return AtomicFileWriter(path, tmp, fd);
  }
  return Status::io_error(fmt::format("{}: cannot find a free temporary name beside it", path));
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& o) noexcept
    : path_(std::move(o.path_)), tmp_(std::move(o.tmp_)), fd_(o.fd_), error_(std::move(o.error_)) {
  o.fd_ = -1;
  o.tmp_.clear();
}

AtomicFileWriter::~AtomicFileWriter() { discard(); }

void AtomicFileWriter::discard() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  tmp_.clear();
}

Status AtomicFileWriter::write(std::string_view data) {
  if (!error_.is_ok()) return error_;
  if (fd_ < 0) return error_ = Status::internal(path_ + ": written after commit");
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd_, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return error_ = Status::io_error(errno_message(path_, "cannot write (left unchanged)", errno));
    }
    if (n == 0) return error_ = Status::io_error(path_ + ": cannot write (left unchanged): no progress");
    done += size_t(n);
  }
  return Status::ok();
}

Status AtomicFileWriter::commit() {
  if (error_.is_ok() && fd_ < 0) error_ = Status::internal(path_ + ": committed twice");
  if (error_.is_ok() && ::fsync(fd_) != 0)
    error_ = Status::io_error(errno_message(path_, "cannot sync (left unchanged)", errno));
  if (error_.is_ok()) {
    int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) error_ = Status::io_error(errno_message(path_, "cannot write (left unchanged)", errno));
  }
  // Checked again right before the rename: what PATH is may have changed while we wrote.
  if (error_.is_ok()) error_ = check_replaceable(path_);
  if (error_.is_ok() && ::rename(tmp_.c_str(), path_.c_str()) != 0)
    error_ = Status::io_error(errno_message(path_, "cannot replace", errno));
  if (!error_.is_ok()) {
    discard();
    return error_;
  }
  tmp_.clear();
  // Make the rename itself durable (best effort: some file systems refuse fsync on directories).
  std::string dir = path_.find('/') == std::string::npos ? "." : path_.substr(0, path_.rfind('/') + 1);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return Status::ok();
}

Status replace_regular_file(const std::string& path, std::string_view data) {
  auto w = AtomicFileWriter::create(path);
  if (!w.is_ok()) return w.status();
  TUNABLEOP_RETURN_IF_ERROR(w->write(data));
  return w->commit();
}

std::string absolute_path(const std::string& path) {
  if (path.empty() || path.front() == '/') return path;
  std::string cwd(PATH_MAX, '\0');
  if (::getcwd(cwd.data(), cwd.size()) == nullptr) return path;  // unreachable cwd: keep it relative
  cwd.resize(std::char_traits<char>::length(cwd.c_str()));
  return cwd + (cwd.back() == '/' ? "" : "/") + path;
}

}  // namespace tunableop

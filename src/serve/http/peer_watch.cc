#include "serve/http/peer_watch.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>

namespace tunableop::serve::http {

namespace {

// Port and numeric host of an address, as cpp-httplib formats a request's (getnameinfo,
// NI_NUMERICHOST), so the strings compare equal for the same address.
bool endpoint_is(const sockaddr_storage& a, socklen_t len, const std::string& host, int port) {
  int p = -1;
  if (a.ss_family == AF_INET) {
    p = ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
  } else if (a.ss_family == AF_INET6) {
    p = ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
  } else {
    return false;
  }
  if (p != port) return false;
  char buf[NI_MAXHOST];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST) != 0)
    return false;
  return host == buf;
}

}  // namespace

int find_connection_socket(const std::string& local_addr, int local_port, const std::string& remote_addr,
                           int remote_port) {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return -1;
  int found = -1;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    struct stat st;
    if (fstat(int(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage local{}, peer{};
    socklen_t llen = sizeof local, plen = sizeof peer;
    if (getsockname(int(fd), reinterpret_cast<sockaddr*>(&local), &llen) != 0) continue;
    if (!endpoint_is(local, llen, local_addr, local_port)) continue;
    if (getpeername(int(fd), reinterpret_cast<sockaddr*>(&peer), &plen) != 0) continue;
    if (!endpoint_is(peer, plen, remote_addr, remote_port)) continue;
    found = int(fd);
    break;
  }
  closedir(dir);
  return found;
}

PeerWatch::PeerWatch(std::string local_addr, int local_port, std::string remote_addr, int remote_port)
    : local_addr_(std::move(local_addr)),
      remote_addr_(std::move(remote_addr)),
      local_port_(local_port),
      remote_port_(remote_port) {}

bool PeerWatch::gone() {
  if (fd_ == -2) fd_ = find_connection_socket(local_addr_, local_port_, remote_addr_, remote_port_);
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace tunableop::serve::http

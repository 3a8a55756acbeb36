#include "serve/http/peer_watch.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tunableop::serve::http {

int tcp_state(const std::string& local_addr, int local_port, const std::string& remote_addr, int remote_port) {
  struct {
    nlmsghdr nlh;
    inet_diag_req_v2 req;
  } msg{};
  const bool v6 = local_addr.find(':') != std::string::npos;
  msg.req.sdiag_family = v6 ? AF_INET6 : AF_INET;
  if (inet_pton(msg.req.sdiag_family, local_addr.c_str(), msg.req.id.idiag_src) != 1 ||
      inet_pton(msg.req.sdiag_family, remote_addr.c_str(), msg.req.id.idiag_dst) != 1)
    return -1;
  msg.nlh.nlmsg_len = sizeof msg;
  msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  msg.nlh.nlmsg_flags = NLM_F_REQUEST;  // one socket, found by its exact addresses
  msg.req.sdiag_protocol = IPPROTO_TCP;
  msg.req.idiag_states = ~0u;
  msg.req.id.idiag_sport = htons(uint16_t(local_port));
  msg.req.id.idiag_dport = htons(uint16_t(remote_port));
  msg.req.id.idiag_cookie[0] = msg.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;

  const int fd = ::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0) return -1;
  timeval tv{1, 0};  // the kernel answers at once; never block a handler on it
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  int state = -1;
  alignas(nlmsghdr) char buf[1024];
  if (::send(fd, &msg, sizeof msg, 0) == ssize_t(sizeof msg)) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    const auto* h = reinterpret_cast<const nlmsghdr*>(buf);
    if (n >= ssize_t(NLMSG_LENGTH(sizeof(inet_diag_msg))) && NLMSG_OK(h, size_t(n)) &&
        h->nlmsg_type == SOCK_DIAG_BY_FAMILY) {
      state = reinterpret_cast<const inet_diag_msg*>(NLMSG_DATA(h))->idiag_state;
    } else if (n >= ssize_t(NLMSG_LENGTH(sizeof(nlmsgerr))) && NLMSG_OK(h, size_t(n)) && h->nlmsg_type == NLMSG_ERROR &&
               reinterpret_cast<const nlmsgerr*>(NLMSG_DATA(h))->error == -ENOENT) {
      state = -2;
    }
  }
  ::close(fd);
  return state;
}

PeerWatch::PeerWatch(std::string local_addr, int local_port, std::string remote_addr, int remote_port)
    : local_addr_(std::move(local_addr)),
      remote_addr_(std::move(remote_addr)),
      local_port_(local_port),
      remote_port_(remote_port) {}

bool PeerWatch::gone() {
  if (unavailable_) return false;
  const int state = tcp_state(local_addr_, local_port_, remote_addr_, remote_port_);
  // A socket that was found once and no longer is: a reset took it out of the kernel's table.
  if (state == -2 && seen_) return true;
  if (state < 0) {
    unavailable_ = true;  // cannot ask, or these addresses never matched a socket
    return false;
  }
  seen_ = true;
  // The peer sent FIN (CLOSE_WAIT), or a reset closed the socket: nobody reads the answer.
  return state == TCP_CLOSE_WAIT || state == TCP_CLOSE || state == TCP_LAST_ACK;
}

}  // namespace tunableop::serve::http

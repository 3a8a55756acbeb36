// Whether the client of a request that is still being answered has gone away. cpp-httplib
// hands a handler the connection's addresses but not its socket, and only notices a closed
// connection when a write fails; a request waiting in the queue, or a non-streamed one, writes
// nothing until its end. So the watch asks the kernel for the state of the server's side of this
// TCP connection, named by its four addresses (netlink sock_diag, as `ss` does: no file
// descriptor of another thread is touched): once the peer has closed it (CLOSE_WAIT) or reset it,
// nobody will read the answer.
#pragma once

#include <string>

namespace tunableop::serve::http {

class PeerWatch {
 public:
  PeerWatch(std::string local_addr, int local_port, std::string remote_addr, int remote_port);
  // True once the peer has closed or reset the connection; false while it is open, or when the
  // kernel cannot be asked (then only a failed write tells).
  bool gone();

 private:
  std::string local_addr_, remote_addr_;
  int local_port_, remote_port_;
  bool unavailable_ = false;  // sock_diag refused, or never found the socket: not asked again
  bool seen_ = false;         // found once
};

// The TCP state (TCP_ESTABLISHED = 1, TCP_CLOSE_WAIT = 8, ...) of this host's socket bound to
// local_addr:local_port and connected to remote_addr:remote_port (numeric IPv4 or IPv6
// addresses); -2 when the kernel has no such socket, -1 when it cannot be asked.
int tcp_state(const std::string& local_addr, int local_port, const std::string& remote_addr, int remote_port);

}  // namespace tunableop::serve::http

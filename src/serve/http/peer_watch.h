// Whether the client of a request that is still being answered has gone away. cpp-httplib
// hands a handler the connection's addresses but not its socket, and only notices a closed
// connection when a write fails; a request waiting in the queue, or a non-streamed one, writes
// nothing until its end. So the watch finds this process's socket with the request's four
// addresses (once, under /proc/self/fd: the socket stays open while its handler runs) and polls
// it for the peer's close (POLLRDHUP) without reading anything.
#pragma once

#include <string>

namespace tunableop::serve::http {

class PeerWatch {
 public:
  PeerWatch(std::string local_addr, int local_port, std::string remote_addr, int remote_port);
  // True once the peer has closed or reset the connection; false while it is open or when the
  // socket cannot be found (then only a failed write tells).
  bool gone();

 private:
  std::string local_addr_, remote_addr_;
  int local_port_, remote_port_;
  int fd_ = -2;  // -2: not looked up yet; -1: not found
};

// The socket of this process whose local and peer addresses are these ("127.0.0.1", 8000), or -1.
int find_connection_socket(const std::string& local_addr, int local_port, const std::string& remote_addr,
                           int remote_port);

}  // namespace tunableop::serve::http

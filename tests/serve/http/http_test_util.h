// Talking to an in-process HttpServer: cpp-httplib's client for whole and streamed requests,
// and a raw socket for what a well-behaved client never does (stall, vanish mid-request).
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tunableop::serve::testing {

struct Streamed {
  bool sent = false;
  int status = 0;
  httplib::Headers headers;
  std::string raw;                     // the body as it came
  std::vector<std::string> events;     // each event's data ("[DONE]" included)
  std::vector<nlohmann::json> chunks;  // the JSON events
};

// POSTs `body` and reads the answer as server-sent events. `keep_reading(events so far)` false
// closes the connection early (a client that goes away mid-stream).
inline Streamed post_stream(int port, const std::string& path, const std::string& body,
                            std::function<bool(const Streamed&)> keep_reading = {},
                            const httplib::Headers& headers = {}) {
  Streamed s;
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(std::chrono::seconds(20));
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.headers = headers;
  req.headers.emplace("Content-Type", "application/json");
  req.body = body;
  std::string pending;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    s.raw.append(data, n);
    pending.append(data, n);
    for (size_t end; (end = pending.find("\n\n")) != std::string::npos;) {
      std::string ev = pending.substr(0, end);
      pending.erase(0, end + 2);
      EXPECT_EQ(ev.rfind("data: ", 0), 0u) << ev;
      std::string data_part = ev.substr(6);
      s.events.push_back(data_part);
      if (data_part != "[DONE]") s.chunks.push_back(nlohmann::json::parse(data_part));
    }
    return !keep_reading || keep_reading(s);
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  s.sent = cli.send(req, res, err);
  s.status = res.status;
  s.headers = res.headers;
  if (s.raw.empty()) s.raw = res.body;
  return s;
}

// A plain TCP connection to the server.
class RawConnection {
 public:
  explicit RawConnection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RawConnection() { close(); }
  bool connected() const { return connected_; }
  bool send(const std::string& s) { return ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == ssize_t(s.size()); }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // Reads until the server closes the connection (true) or `timeout` passes (false).
  bool wait_closed(std::chrono::milliseconds timeout, std::string* got = nullptr) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char buf[4096];
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, int(left.count())) <= 0) return false;
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return true;
      if (got) got->append(buf, size_t(n));
    }
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// Polls `cond` every few ms until it holds (true) or `timeout` passes.
inline bool eventually(const std::function<bool()>& cond, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!cond()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace tunableop::serve::testing

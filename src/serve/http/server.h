// The OpenAI-compatible HTTP front end (cpp-httplib): POST /v1/completions and
// /v1/chat/completions (JSON or server-sent events), GET /v1/models, /health and /metrics, over
// a Backend (serve/request.h). One thread per connection from a fixed pool; each request's
// handler submits to the runtime and then waits on its Channel, polling for news and for a
// client that went away (whose request it cancels, so the runtime frees its pages).
//
// The server can listen before the model is ready: until attach(), /health answers 503 and the
// API 503 "loading", so a slow warm-up is visible to a load balancer.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "serve/openai/served_model.h"
#include "serve/request.h"
#include "tunableop/status.h"

namespace tunableop::serve::http {

struct HttpOptions {
  std::string host = "127.0.0.1";  // loopback unless told otherwise
  int port = 8000;                 // 0: any free port (port() says which)
  std::string api_key;             // non-empty: every request needs "Authorization: Bearer KEY"
  int threads = 256;               // connections served at once; more wait for a thread
  // A client that sends nothing for this long while its request is being read, or reads nothing
  // for this long while its answer is being written, is dropped (and its request cancelled).
  std::chrono::milliseconds read_timeout{10000};
  std::chrono::milliseconds write_timeout{10000};
  std::chrono::seconds keep_alive_timeout{5};
  size_t max_body_bytes = size_t(4) << 20;  // larger bodies: 413
  int listen_backlog = 1024;                // connections the kernel queues before accept
  // How often a handler waiting on the runtime looks for a client that went away.
  std::chrono::milliseconds poll_interval{50};
  // stop(): how long completions in flight get to end before their requests are cancelled.
  std::chrono::milliseconds stop_grace{5000};
};

class HttpServer {
 public:
  explicit HttpServer(HttpOptions options);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds host:port and serves on a thread of its own. Ignores SIGPIPE process-wide (a client
  // that closes its connection must not kill the server; cpp-httplib writes without
  // MSG_NOSIGNAL).
  Status start();
  int port() const;
  // From now on requests go to `backend` (which must outlive stop()).
  void attach(Backend& backend, openai::ServedModel model);
  // Answers new requests 503, lets the completions in flight end (up to stop_grace: call it
  // after Backend::drain() and they only have their last events to write), then cancels what
  // remains, stops accepting and joins the threads. Idempotent.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tunableop::serve::http

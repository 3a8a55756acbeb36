// The route handlers of HttpServer (server.cc installs them). Internal to serve/http: it is the
// one header here that includes cpp-httplib.
#pragma once

#include <httplib.h>

#include <atomic>
#include <memory>

#include "serve/http/server.h"
#include "serve/openai/api_error.h"
#include "serve/openai/request_params.h"
#include "serve/openai/served_model.h"
#include "serve/request.h"

namespace tunableop::serve::http {

// What the handlers serve once attach() ran; immutable.
struct Served {
  Backend* backend = nullptr;
  openai::ServedModel model;
};

// What every handler reads: the options, whether the server is stopping (waiting handlers
// then cancel their requests and return), and the count of completions in flight (a handler
// running, or a stream still being written), which stop() waits on.
struct HandlerEnv {
  const HttpOptions* options = nullptr;
  const std::atomic<bool>* stopping = nullptr;
  std::atomic<int>* in_flight = nullptr;
};

// Counts one completion in flight for as long as it lives.
class InFlight {
 public:
  explicit InFlight(std::atomic<int>& n) : n_(n) { ++n_; }
  ~InFlight() { --n_; }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  std::atomic<int>& n_;
};

void send_error(httplib::Response& res, const openai::ApiError& e);

// POST /v1/completions and /v1/chat/completions: parse, check, submit, then answer as one JSON
// body or as server-sent events.
void handle_completion(const HandlerEnv& env, std::shared_ptr<const Served> served, openai::Endpoint endpoint,
                       const httplib::Request& req, httplib::Response& res);

}  // namespace tunableop::serve::http

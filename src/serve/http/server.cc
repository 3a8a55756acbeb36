#include "serve/http/server.h"

#include <fmt/format.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>
#include <thread>

#include "serve/http/auth.h"
#include "serve/http/handlers.h"
#include "serve/http/metrics.h"
#include "serve/openai/responses.h"

namespace tunableop::serve::http {

namespace {

// cpp-httplib listens with a backlog of 5 (a compile-time constant of the shared library): a
// burst of connections beyond it waits for SYN retransmits (1 s, then 3 s). Listening again on
// the bound socket with a larger backlog is how POSIX lets it grow.
class Listener : public httplib::Server {
 public:
  void widen_backlog(int backlog) {
    const socket_t s = svr_sock_;
    if (s != INVALID_SOCKET) ::listen(s, backlog);
  }
};

// The routes and the methods each allows; any other method on them is 405.
struct Route {
  const char* path;
  const char* method;
};
constexpr Route kRoutes[] = {{"/v1/completions", "POST"},
                             {"/v1/chat/completions", "POST"},
                             {"/v1/models", "GET"},
                             {"/health", "GET"},
                             {"/metrics", "GET"}};

std::string status_phrase(int status) {
  switch (status) {
    case 400: return "malformed HTTP request";
    case 404: return "not found";
    case 413: return "the request body is too large";
    case 414: return "the request URI is too long";
    default: return fmt::format("HTTP {}", status);
  }
}

}  // namespace

struct HttpServer::Impl {
  explicit Impl(HttpOptions o) : options(std::move(o)) { env = {&options, &stopping, &in_flight}; }

  HttpOptions options;
  Listener svr;
  std::thread thread;
  int port = -1;
  std::atomic<bool> accepting{true};  // false once stop() began: new requests get 503
  std::atomic<bool> stopping{false};  // waiting handlers cancel and return
  std::atomic<int> in_flight{0};
  HandlerEnv env;
  mutable std::mutex mu;
  std::shared_ptr<const Served> served;  // under mu; null until attach()
  std::mutex counts_mu;
  ResponseCounts counts;

  std::shared_ptr<const Served> current() const {
    std::lock_guard<std::mutex> lock(mu);
    return served;
  }

  // Runs `fn(served)` once attached; before, 503 "loading".
  template <class Fn>
  void with_model(httplib::Response& res, Fn fn) {
    auto s = current();
    if (!s || !accepting.load()) {
      openai::ApiError e;
      e.http_status = 503;
      e.type = "service_unavailable";
      e.message = !accepting.load() ? "the server is shutting down" : "the model is loading";
      return send_error(res, e);
    }
    fn(s);
  }

  void health(httplib::Response& res) {
    auto s = current();
    const char* state = "loading";
    if (!accepting.load()) {
      state = "stopping";
    } else if (s) {
      const RuntimeStats st = s->backend->stats();
      state = st.draining ? "draining" : st.ready ? "ok" : "starting";
    }
    res.status = std::strcmp(state, "ok") == 0 ? 200 : 503;
    res.set_content(fmt::format("{{\"status\": \"{}\"}}", state), "application/json");
  }

  void metrics(httplib::Response& res) {
    auto s = current();
    RuntimeStats st;
    if (s) st = s->backend->stats();
    ResponseCounts c;
    {
      std::lock_guard<std::mutex> lock(counts_mu);
      c = counts;
    }
    res.set_content(prometheus_text(st, c), "text/plain; version=0.0.4");
  }

  void install_routes() {
    auto completion = [this](openai::Endpoint ep) {
      return [this, ep](const httplib::Request& req, httplib::Response& res) {
        with_model(res, [&](std::shared_ptr<const Served> s) { handle_completion(env, std::move(s), ep, req, res); });
      };
    };
    svr.Post("/v1/completions", completion(openai::Endpoint::kCompletions));
    svr.Post("/v1/chat/completions", completion(openai::Endpoint::kChat));
    svr.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      with_model(res, [&](std::shared_ptr<const Served> s) {
        res.set_content(openai::models_body(s->model), "application/json");
      });
    });
    svr.Get("/health", [this](const httplib::Request&, httplib::Response& res) { health(res); });
    svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) { metrics(res); });
    for (const Route& r : kRoutes) {
      auto not_allowed = [r](const httplib::Request& req, httplib::Response& res) {
        openai::ApiError e;
        e.http_status = 405;
        e.message = fmt::format("{} does not take {}: use {}", r.path, req.method, r.method);
        res.set_header("Allow", r.method);
        send_error(res, e);
      };
      if (std::strcmp(r.method, "GET") == 0) {
        svr.Post(r.path, not_allowed);
      } else {
        svr.Get(r.path, not_allowed);
      }
      svr.Put(r.path, not_allowed);
      svr.Patch(r.path, not_allowed);
      svr.Delete(r.path, not_allowed);
      svr.Options(r.path, not_allowed);
    }

    // --api-key: checked before the body is read.
    svr.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (options.api_key.empty() || bearer_matches(req.get_header_value("Authorization"), options.api_key))
        return httplib::Server::HandlerResponse::Unhandled;
      openai::ApiError e;
      e.http_status = 401;
      e.code = "invalid_api_key";
      e.message = req.has_header("Authorization") ? "the API key is not valid"
                                                  : "this server needs an API key: Authorization: Bearer KEY";
      res.set_header("WWW-Authenticate", "Bearer");
      // The body (if any) is left unread: the connection cannot be reused.
      res.set_header("Connection", "close");
      send_error(res, e);
      return httplib::Server::HandlerResponse::Handled;
    });
    // cpp-httplib's own answers (404, 413, a malformed request) get an OpenAI error body too.
    svr.set_error_handler(
        httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
          if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
          openai::ApiError e;
          e.http_status = res.status;
          if (res.status == 404) {
            e.type = "not_found_error";
            e.message = fmt::format("no route {} {}", req.method, req.path.substr(0, 256));
          } else if (res.status == 413) {
            e.message = fmt::format("the request body is larger than {} bytes", options.max_body_bytes);
          } else {
            e.message = status_phrase(res.status);
          }
          res.set_content(openai::error_body(e), "application/json");
          return httplib::Server::HandlerResponse::Handled;
        }));
    svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      openai::ApiError e;
      e.http_status = 500;
      e.type = "internal_error";
      e.message = "internal error";
      try {
        if (ep) std::rethrow_exception(ep);
      } catch (const std::exception& x) {
        e.message = std::string("internal error: ") + x.what();
      } catch (...) {
      }
      send_error(res, e);
    });
    svr.set_logger([this](const httplib::Request&, const httplib::Response& res) {
      std::lock_guard<std::mutex> lock(counts_mu);
      ++counts[res.status];
    });
  }
};

HttpServer::HttpServer(HttpOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

HttpServer::~HttpServer() { stop(); }

Status HttpServer::start() {
  if (impl_->thread.joinable()) return Status::invalid_argument("the HTTP server is already started");
  std::signal(SIGPIPE, SIG_IGN);
  Impl& m = *impl_;
  const HttpOptions& o = m.options;
  if (o.threads < 1) return Status::invalid_argument(fmt::format("HTTP threads must be >= 1 (got {})", o.threads));
  m.install_routes();
  const size_t threads = size_t(o.threads);
  m.svr.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  m.svr.set_read_timeout(o.read_timeout);
  m.svr.set_write_timeout(o.write_timeout);
  m.svr.set_keep_alive_timeout(o.keep_alive_timeout.count());
  m.svr.set_keep_alive_max_count(1000);
  m.svr.set_payload_max_length(o.max_body_bytes);
  m.svr.set_tcp_nodelay(true);  // stream events are small: Nagle would hold them back
  // cpp-httplib's default also sets SO_REUSEPORT, which lets a second server bind the same port
  // and silently share its connections: only SO_REUSEADDR (a restart may reuse the port at once).
  m.svr.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  errno = 0;
  if (o.port == 0) {
    m.port = m.svr.bind_to_any_port(o.host);
  } else {
    m.port = m.svr.bind_to_port(o.host, o.port) ? o.port : -1;
  }
  if (m.port < 0) {
    const int err = errno;
    return Status::unavailable(fmt::format("cannot listen on {}:{}{}", o.host, o.port,
                                           err ? std::string(": ") + std::strerror(err) : std::string()));
  }
  m.svr.widen_backlog(o.listen_backlog);
  auto returned = std::make_shared<std::atomic<bool>>(false);
  m.thread = std::thread([&m, returned] {
    m.svr.listen_after_bind();
    *returned = true;
  });
  // stop() only stops a server that runs: wait until it does (or until it gave up).
  while (!m.svr.is_running() && !*returned) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (*returned) {
    m.thread.join();
    return Status::unavailable(fmt::format("cannot serve on {}:{}", o.host, m.port));
  }
  return Status::ok();
}

int HttpServer::port() const { return impl_->port; }

void HttpServer::attach(Backend& backend, openai::ServedModel model) {
  auto s = std::make_shared<Served>();
  s->backend = &backend;
  s->model = std::move(model);
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->served = std::move(s);
}

void HttpServer::stop() {
  Impl& m = *impl_;
  if (!m.thread.joinable()) return;
  // cpp-httplib stops calling a stream's content provider once the server stops: let the
  // completions in flight end first (after Backend::drain() their requests have finished and
  // only their last events remain to be written), within stop_grace.
  m.accepting = false;
  const auto deadline = std::chrono::steady_clock::now() + m.options.stop_grace;
  while (m.in_flight.load() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  m.stopping = true;
  m.svr.stop();
  m.thread.join();
}

}  // namespace tunableop::serve::http

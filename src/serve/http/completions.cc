// POST /v1/completions and /v1/chat/completions. Nothing is sent until the runtime has news:
// an error before the first token (a sequence that cannot fit, a device fault) still gets its
// own status code; after that, a stream reports an error as an event before `data: [DONE]`.
#include <fmt/format.h>

#include <chrono>

#include "serve/http/handlers.h"
#include "serve/http/peer_watch.h"
#include "serve/openai/generation_output.h"
#include "serve/openai/json_fields.h"
#include "serve/openai/prepare.h"
#include "serve/openai/responses.h"

namespace tunableop::serve::http {

namespace {

using openai::GenerationOutput;
using Delta = GenerationOutput::Delta;

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Why collect() gave up: the client went away (nobody to answer) or the server is stopping.
enum class Wait { kNews, kGone, kStopping };

// Adds the runtime's news to `acc` until the request ends (until_end) or there is something to
// send. Every poll interval without news (and no more often) it checks the client's connection
// and the server's stop flag, cancelling the request when either says so.
Wait collect(const HandlerEnv& env, GenerationOutput& out, PeerWatch& watch, Delta& acc, bool until_end) {
  const auto interval = env.options->poll_interval;
  auto last_check = Clock::now();
  for (;;) {
    Delta d = out.next(interval);
    acc.text += d.text;
    acc.ids.insert(acc.ids.end(), d.ids.begin(), d.ids.end());
    if (d.finished) {
      acc.finished = true;
      acc.reason = d.reason;
      acc.error = std::move(d.error);
      return Wait::kNews;
    }
    if (!until_end && (!acc.text.empty() || !acc.ids.empty())) return Wait::kNews;
    if (Clock::now() - last_check < interval) continue;
    last_check = Clock::now();
    if (env.stopping->load()) {
      out.cancel();
      return Wait::kStopping;
    }
    if (watch.gone()) {
      out.cancel();
      return Wait::kGone;
    }
  }
}

void send_abandoned(httplib::Response& res, Wait why) {
  openai::ApiError e;
  if (why == Wait::kStopping) {
    e.http_status = 503;
    e.type = "service_unavailable";
    e.message = "the server is shutting down";
  } else {
    e.http_status = 499;  // nginx's "client closed request": nobody reads it; counted in /metrics
    e.message = "the client closed the connection";
  }
  send_error(res, e);
}

// What one stream's content provider keeps between calls.
struct StreamState {
  std::shared_ptr<InFlight> in_flight;    // until the stream's last byte is written
  std::shared_ptr<GenerationOutput> out;  // its destructor cancels a request left unfinished
  std::shared_ptr<PeerWatch> watch;
  openai::ResponseMeta meta;
  Delta pending;
  bool first = true;
  bool include_usage = false;
};

// Writes what `st.pending` holds; returns false when the client cannot be written to.
bool write_pending(StreamState& st, httplib::DataSink& sink, bool* ended) {
  auto send = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
  Delta& p = st.pending;
  *ended = false;
  const bool failed = p.finished && !p.error.is_ok();
  const bool content = !p.text.empty() || (st.meta.return_token_ids && !p.ids.empty());
  if (content || (p.finished && !failed)) {
    const FinishReason reason = p.finished && !failed ? p.reason : FinishReason::kNone;
    if (!send(openai::chunk_event(st.meta, p.text, p.ids, reason, st.first, st.out->prompt()))) return false;
    st.first = false;
  }
  if (p.finished) {
    if (failed && !send(openai::error_event(openai::error_from_status(p.error)))) return false;
    if (!failed && st.include_usage &&
        !send(openai::usage_event(st.meta, int64_t(st.out->prompt().size()), st.out->completion_tokens())))
      return false;
    if (!send(std::string(openai::kDoneEvent))) return false;
    sink.done();
    *ended = true;
  }
  p = Delta{};
  return true;
}

}  // namespace

void send_error(httplib::Response& res, const openai::ApiError& e) {
  res.status = e.http_status;
  if (e.http_status == 429 || e.http_status == 503) res.set_header("Retry-After", "1");
  res.set_content(openai::error_body(e), "application/json");
}

void handle_completion(const HandlerEnv& env, std::shared_ptr<const Served> served, openai::Endpoint endpoint,
                       const httplib::Request& req, httplib::Response& res) {
  const auto arrival = Clock::now();
  auto in_flight = std::make_shared<InFlight>(*env.in_flight);
  auto body = openai::parse_json_object(req.body);
  if (!body.ok()) return send_error(res, body.error());
  auto params =
      endpoint == openai::Endpoint::kChat ? openai::parse_chat_params(*body) : openai::parse_completion_params(*body);
  if (!params.ok()) return send_error(res, params.error());
  auto generation = openai::prepare_generation(*params, served->model, arrival);
  if (!generation.ok()) return send_error(res, generation.error());
  std::vector<int32_t> prompt = generation->prompt;
  auto channel = served->backend->submit(std::move(generation.value()));
  if (!channel.is_ok()) return send_error(res, openai::error_from_status(channel.status()));

  auto out = std::make_shared<GenerationOutput>(served->model, *params, std::move(prompt), std::move(channel.value()));
  auto watch = std::make_shared<PeerWatch>(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
  openai::ResponseMeta meta;
  meta.id = openai::new_response_id(endpoint);
  meta.created = unix_now();
  meta.model = served->model.name;
  meta.endpoint = endpoint;
  // Without a tokenizer there is no text: the ids are the answer.
  meta.return_token_ids = params->return_token_ids || !served->model.tokenizer;

  Delta first;
  if (Wait w = collect(env, *out, *watch, first, /*until_end=*/!params->stream); w != Wait::kNews)
    return send_abandoned(res, w);
  if (first.finished && !first.error.is_ok()) return send_error(res, openai::error_from_status(first.error));
  if (!params->stream) {
    res.set_content(openai::completion_body(meta, first.text, first.reason, out->prompt(), out->ids()),
                    "application/json");
    return;
  }

  auto st = std::make_shared<StreamState>();
  st->in_flight = std::move(in_flight);
  st->out = out;
  st->watch = watch;
  st->meta = std::move(meta);
  st->pending = std::move(first);
  st->include_usage = params->include_usage;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");  // proxies: do not hold events back
  const HandlerEnv env_copy = env;
  res.set_chunked_content_provider("text/event-stream", [st, env_copy](size_t, httplib::DataSink& sink) {
    bool ended = false;
    if (!write_pending(*st, sink, &ended)) {
      st->out->cancel();  // the client stopped reading or went away
      return false;
    }
    if (ended) return true;
    // Returning true without writing makes cpp-httplib call again: the next news, or the end.
    return collect(env_copy, *st->out, *st->watch, st->pending, /*until_end=*/false) == Wait::kNews;
  });
}

}  // namespace tunableop::serve::http

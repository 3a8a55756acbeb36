#include "llm/text/text_session.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "llm/text/text_stream.h"

namespace tunableop::llm {

TextSession::TextSession(Engine& engine, const Tokenizer& tokenizer, SpecialTokens special, TextOptions options,
                         std::ostream& out, std::ostream& err)
    : engine_(engine),
      tokenizer_(tokenizer),
      special_(std::move(special)),
      o_(std::move(options)),
      out_(out),
      err_(err),
      selector_(make_token_selector(o_.sampling)) {}

namespace {

std::string join_ids(const std::vector<int32_t>& ids) { return fmt::format("{}", fmt::join(ids, ",")); }

}  // namespace

Status TextSession::generate(const std::vector<std::string>& prompts, bool stream, bool echo) {
  std::vector<std::vector<int32_t>> ids;
  for (const std::string& text : prompts) {
    auto p = encode_prompt(tokenizer_, special_, text);
    if (!p.is_ok()) return p.status();
    ids.push_back(std::move(*p));
  }
  return generate_ids(std::move(ids), echo ? prompts : std::vector<std::string>(prompts.size()), stream);
}

// `echo_texts[i]` is printed before answer i (empty: nothing).
Status TextSession::generate_ids(std::vector<std::vector<int32_t>> ids, const std::vector<std::string>& echo_texts,
                                 bool stream) {
  answers_.assign(ids.size(), {});
  if (int64_t(ids.size()) > engine_.options().max_batch) {
    return Status::invalid_argument(std::to_string(ids.size()) + " prompts, but the engine holds " +
                                    std::to_string(engine_.options().max_batch) + " sequences");
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i].empty()) return Status::invalid_argument("prompt " + std::to_string(i + 1) + " has no tokens");
    answers_[i].prompt_ids = ids[i];
    if (o_.print_prompt_ids) out_ << "prompt ids: " << join_ids(ids[i]) << "\n";
  }
  // Interactive prompts come in any length: an answer is cut where the cache ends, and says so.
  auto fit = max_new_tokens_that_fit(engine_, ids);
  if (!fit.is_ok()) return fit.status();
  StopOptions stop{std::min(o_.max_new_tokens, *fit), special_.eos, o_.ignore_eos};

  std::vector<TextStream> streams;
  for (const auto& p : ids) streams.emplace_back(tokenizer_, TextStream::context_of(p));
  if (stream && !echo_texts.empty()) out_ << echo_texts[0] << std::flush;
  auto on_token = [&](size_t b, int32_t token) -> Status {
    // The stopping EOS decodes to nothing; leaving it out keeps a stray decode error away.
    if (!o_.ignore_eos && special_.is_eos(token)) return Status::ok();
    auto piece = streams[b].put(token);
    if (!piece.is_ok()) return piece.status();
    if (stream && !piece->empty()) out_ << *piece << std::flush;
    return Status::ok();
  };
  auto g = generate_until_stop(engine_, ids, stop, *selector_, on_token);
  if (!g.is_ok()) {
    if (stream) out_ << std::endl;
    return g.status();
  }
  for (size_t b = 0; b < ids.size(); ++b) {
    auto rest = streams[b].finish();
    if (!rest.is_ok()) return rest.status();
    TextAnswer& a = answers_[b];
    a.ids = g->sequences[b].tokens;
    a.text = streams[b].emitted();
    a.stopped_at_eos = g->sequences[b].stopped_at_eos;
    if (stream) {
      out_ << *rest << "\n";
    } else {
      out_ << "[" << b + 1 << "] " << (b < echo_texts.size() ? echo_texts[b] : "") << a.text << "\n";
    }
    if (o_.print_ids) out_ << "ids: " << join_ids(a.ids) << "\n";
  }
  out_ << std::flush;
  if (o_.stats) {
    const int64_t n = g->new_tokens();
    std::string why;
    int eos = 0;
    for (const auto& s : g->sequences) eos += s.stopped_at_eos;
    if (eos == int(ids.size())) {
      why = "stopped at EOS";
    } else if (stop.max_new_tokens < o_.max_new_tokens) {
      why = fmt::format("cut at {} new tokens: the KV cache holds {} positions (--max-seq)", stop.max_new_tokens,
                        engine_.options().max_seq);
    } else {
      why = eos ? fmt::format("{} of {} stopped at EOS, the others at --max-new-tokens", eos, ids.size())
                : "reached --max-new-tokens";
    }
    err_ << fmt::format("[{} new tokens in {:.2f} s ({:.1f} tokens/s), first token after {:.1f} ms; {}]\n", n,
                        g->total_s, g->total_s > 0 ? double(n) / g->total_s : 0.0, g->ttft_s * 1e3, why)
         << std::flush;
  }
  return Status::ok();
}

Status TextSession::run(const std::vector<std::string>& prompts) {
  if (prompts.empty()) return Status::invalid_argument("no prompts");
  return generate(prompts, prompts.size() == 1, o_.echo_prompt);
}

Status TextSession::run_ids(const std::vector<std::vector<int32_t>>& prompts) {
  if (prompts.empty()) return Status::invalid_argument("no prompts");
  return generate_ids(prompts, {}, prompts.size() == 1);
}

Status TextSession::chat(std::istream& in, const ChatTemplate& chat_template, const std::string& system,
                         const std::string& marker) {
  std::vector<ChatMessage> conversation;
  if (!system.empty()) conversation.push_back({"system", system});
  std::string line;
  for (;;) {
    if (!marker.empty()) err_ << marker << std::flush;
    if (!std::getline(in, line)) break;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    conversation.push_back({"user", line});
    Status st = [&]() -> Status {
      auto text = render_chat(chat_template, conversation, true);
      if (!text.is_ok()) return text.status();
      auto ids = tokenizer_.encode(*text);
      if (!ids.is_ok()) return ids.status();
      TUNABLEOP_RETURN_IF_ERROR(generate_ids({std::move(*ids)}, {}, true));
      conversation.push_back({"assistant", answers_[0].text});
      return Status::ok();
    }();
    if (!st.is_ok()) {
      conversation.pop_back();  // the user's turn that got no answer
      err_ << "error: " << st.to_string() << "\n" << std::flush;
    }
  }
  if (!marker.empty()) err_ << "\n" << std::flush;
  if (in.bad()) return Status::io_error("reading the conversation failed");
  return Status::ok();
}

Status TextSession::interactive(std::istream& in, const std::string& marker) {
  std::string line;
  for (;;) {
    if (!marker.empty()) err_ << marker << std::flush;
    if (!std::getline(in, line)) break;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (Status st = generate({line}, true, false); !st.is_ok()) {
      err_ << "error: " << st.to_string() << "\n" << std::flush;
    }
  }
  if (!marker.empty()) err_ << "\n" << std::flush;
  if (in.bad()) return Status::io_error("reading the prompts failed");
  return Status::ok();
}

}  // namespace tunableop::llm

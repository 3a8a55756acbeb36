#include "serve/openai/generation_output.h"

namespace tunableop::serve::openai {

GenerationOutput::GenerationOutput(const ServedModel& model, const CompletionParams& params,
                                   std::vector<int32_t> prompt, std::shared_ptr<Channel> channel)
    : channel_(std::move(channel)), prompt_(std::move(prompt)), tokenizer_(model.tokenizer) {
  if (tokenizer_) text_.emplace(*tokenizer_, llm::TextStream::context_of(prompt_));
  if (!params.stop.empty()) stop_.emplace(params.stop, params.include_stop_str_in_output);
}

GenerationOutput::~GenerationOutput() {
  if (!finished_ && channel_) channel_->cancel();
}

void GenerationOutput::cancel() {
  cancelled_ = true;
  if (channel_) channel_->cancel();
}

void GenerationOutput::finish(Delta& d, FinishReason reason, Status error) {
  finished_ = true;
  d.finished = true;
  d.reason = reason;
  d.error = std::move(error);
}

bool GenerationOutput::add_text(const std::string& piece, Delta& d) {
  if (!stop_) {
    d.text += piece;
    return false;
  }
  auto r = stop_->put(piece);
  d.text += r.text;
  return r.stopped;
}

GenerationOutput::Delta GenerationOutput::next(std::chrono::milliseconds timeout) {
  Delta d;
  if (finished_) {
    d.finished = true;
    return d;
  }
  Channel::Update u = channel_->take(timeout);
  for (int32_t id : u.tokens) {
    ids_.push_back(id);
    d.ids.push_back(id);
    if (!text_) continue;
    auto piece = text_->put(id);
    if (!piece.is_ok()) {
      cancel();
      finish(d, FinishReason::kError, Status::internal("cannot decode the output: " + piece.status().message()));
      return d;
    }
    if (add_text(*piece, d)) {
      // The ids after the one that completed the stop string are dropped, and the runtime
      // stops generating: its pages go back at its next step.
      channel_->cancel();
      finish(d, FinishReason::kStop);
      return d;
    }
  }
  if (!u.finished) return d;
  if (text_) {
    auto tail = text_->finish();
    if (tail.is_ok() && add_text(*tail, d)) {
      finish(d, FinishReason::kStop);
      return d;
    }
  }
  if (stop_) d.text += stop_->flush();
  switch (u.reason) {
    case FinishReason::kStop:
    case FinishReason::kLength: finish(d, u.reason); break;
    case FinishReason::kCancelled:
      // Not by this request's client (it would not be reading): the server cancelled it.
      finish(d, FinishReason::kCancelled,
             cancelled_ ? Status::ok()
                        : Status::unavailable("the request was cancelled by the server (shutting down) after " +
                                              std::to_string(ids_.size()) + " tokens"));
      break;
    default:
      finish(d, FinishReason::kError,
             u.error.is_ok() ? Status::internal("the generation failed without a reason") : u.error);
      break;
  }
  return d;
}

}  // namespace tunableop::serve::openai

// One request's output as its client sees it: the ids the runtime streams through the request's
// Channel, decoded to text (TextStream: never half a UTF-8 character), stop strings matched
// across token boundaries (StopMatcher: held-back text, the output cut at the match, the request
// cancelled so the runtime frees its pages at once), and the end with its finish reason. Knows no
// HTTP: the handlers turn each Delta into a stream chunk or accumulate them into one response.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "llm/text/text_stream.h"
#include "serve/openai/request_params.h"
#include "serve/openai/served_model.h"
#include "serve/openai/stop_matcher.h"
#include "serve/request.h"

namespace tunableop::serve::openai {

class GenerationOutput {
 public:
  GenerationOutput(const ServedModel& model, const CompletionParams& params, std::vector<int32_t> prompt,
                   std::shared_ptr<Channel> channel);
  // A request abandoned before its end (the client went away, an exception) is cancelled.
  ~GenerationOutput();
  GenerationOutput(const GenerationOutput&) = delete;
  GenerationOutput& operator=(const GenerationOutput&) = delete;

  struct Delta {
    std::string text;          // new text (may be empty while held back)
    std::vector<int32_t> ids;  // the new ids this text comes from
    bool finished = false;
    FinishReason reason = FinishReason::kNone;  // when finished: kStop or kLength, else an error:
    Status error;                               // kError: the runtime's; kCancelled by the server: unavailable
  };
  // Waits up to `timeout` for news from the runtime. After the finishing delta, returns empty
  // finished deltas.
  Delta next(std::chrono::milliseconds timeout);
  // The client is gone: the runtime is told to drop the request.
  void cancel();

  bool finished() const { return finished_; }
  const std::vector<int32_t>& prompt() const { return prompt_; }
  const std::vector<int32_t>& ids() const { return ids_; }  // every id delivered so far
  int64_t completion_tokens() const { return int64_t(ids_.size()); }

 private:
  // Text through the stop matcher; true when a stop string ended the output.
  bool add_text(const std::string& piece, Delta& d);
  void finish(Delta& d, FinishReason reason, Status error = Status::ok());

  std::shared_ptr<Channel> channel_;
  std::vector<int32_t> prompt_;
  std::shared_ptr<const llm::Tokenizer> tokenizer_;  // kept alive for text_
  std::optional<llm::TextStream> text_;              // absent without a tokenizer
  std::optional<StopMatcher> stop_;                  // absent without stop strings
  std::vector<int32_t> ids_;
  bool finished_ = false, cancelled_ = false;
};

}  // namespace tunableop::serve::openai

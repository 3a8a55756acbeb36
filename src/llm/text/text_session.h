// Text in, text out on an engine: what `tunableop llm --prompt/--prompt-file/--interactive` runs.
// Prompts are encoded (BOS as the model expects), generated until EOS or the token limit, and
// printed: one prompt streams its answer token by token; a batch of several prints each answer
// when the batch is done. Interactive mode reads one prompt per line until end of input; chat
// mode keeps the conversation and renders it through the model's chat template every turn.
#pragma once

#include <istream>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "llm/engine.h"
#include "llm/text/chat_template.h"
#include "llm/text/generation_loop.h"
#include "llm/text/sampler.h"
#include "llm/text/special_tokens.h"
#include "llm/text/tokenizer.h"

namespace tunableop::llm {

struct TextOptions {
  int64_t max_new_tokens = 256;
  bool ignore_eos = false;
  SamplingOptions sampling;
  bool echo_prompt = true;        // print the prompt before its continuation (never in interactive mode)
  bool print_ids = false;         // a line "ids: ..." (the new ids) after each answer
  bool print_prompt_ids = false;  // a line "prompt ids: ..." before each answer
  bool stats = true;              // a line per answer on the error stream: tokens, TTFT, tokens/s, why it stopped
};

struct TextAnswer {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> ids;  // new tokens (a stopping EOS included)
  std::string text;          // the continuation as printed
  bool stopped_at_eos = false;
};

class TextSession {
 public:
  // `engine` must hold at least as many sequences as run() is given prompts.
  TextSession(Engine& engine, const Tokenizer& tokenizer, SpecialTokens special, TextOptions options, std::ostream& out,
              std::ostream& err);

  // One batch: every prompt generated together.
  Status run(const std::vector<std::string>& prompts);
  // One batch of prompts already encoded (a rendered chat: its BOS is in the ids); nothing echoed.
  Status run_ids(const std::vector<std::vector<int32_t>>& prompts);
  // One prompt per line of `in` until end of input, each answered alone (no history between
  // them; a sampler's random streams go on from answer to answer). An error in one answer is
  // reported on the error stream and the next line is read; `marker` is printed before each.
  Status interactive(std::istream& in, const std::string& marker = "");
  // A conversation: each line of `in` is the user's next message; the conversation so far
  // (`system` first when not empty) goes through the template with the generation prompt, is
  // encoded as it is (the template wrote the special tokens) and answered; the answer joins the
  // conversation. The whole conversation is prefilled each turn. A turn that fails (the
  // template refuses, the cache is full) is reported and left out of the conversation.
  Status chat(std::istream& in, const ChatTemplate& chat_template, const std::string& system,
              const std::string& marker = "");

  // The answers of the last run() or interactive line.
  const std::vector<TextAnswer>& answers() const { return answers_; }

 private:
  Status generate(const std::vector<std::string>& prompts, bool stream, bool echo);
  Status generate_ids(std::vector<std::vector<int32_t>> ids, const std::vector<std::string>& echo_texts, bool stream);
  Engine& engine_;
  const Tokenizer& tokenizer_;
  SpecialTokens special_;
  TextOptions o_;
  std::ostream& out_;
  std::ostream& err_;
  std::unique_ptr<TokenSelector> selector_;
  std::vector<TextAnswer> answers_;
};

}  // namespace tunableop::llm

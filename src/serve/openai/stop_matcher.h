// Stop strings over streamed text. Text arrives in pieces whose boundaries fall anywhere (a stop
// string may span several tokens), so the matcher holds back the longest tail that could still
// grow into a stop string and releases the rest; when a stop string appears, the output ends
// just before it (or just after it, with include_stop). The concatenation of everything
// released equals the full text cut at the earliest match, however the text was split.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tunableop::serve::openai {

class StopMatcher {
 public:
  // `stops`: non-empty strings (valid UTF-8, so a held-back tail always starts on a character
  // boundary).
  explicit StopMatcher(std::vector<std::string> stops, bool include_stop = false);

  struct Result {
    std::string text;      // safe to send now
    bool stopped = false;  // a stop string matched: `text` is the last of the output
  };
  // Adds `piece`; returns what can be released. After a match, further calls release nothing.
  Result put(std::string_view piece);
  // The end of the text: releases whatever is held back.
  std::string flush();

  bool stopped() const { return stopped_; }
  const std::string& matched() const { return matched_; }  // the stop string that matched

 private:
  std::vector<std::string> stops_;
  bool include_stop_;
  std::string held_;
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace tunableop::serve::openai

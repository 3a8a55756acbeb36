#include "serve/openai/served_model.h"

#include <utility>

namespace tunableop::serve::openai {

ChatTemplate rendering(std::shared_ptr<const llm::ChatTemplate> t) {
  return [t = std::move(t)](const std::vector<ChatMessage>& messages) -> StatusOr<std::string> {
    std::vector<llm::ChatMessage> m;
    m.reserve(messages.size());
    for (const auto& x : messages) m.push_back({x.role, x.content});
    return llm::render_chat(*t, m, /*add_generation_prompt=*/true);
  };
}

}  // namespace tunableop::serve::openai

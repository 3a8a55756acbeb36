// The filters, tests, methods and global functions of the chat-template renderer (jinja.h),
// on values already evaluated. Errors carry no location: the evaluator adds the template and
// line. Unknown names are Status::unsupported naming the construct.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "llm/text/jinja_value.h"
#include "tunableop/status.h"

namespace tunableop::llm::jinja {

struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  // Positional argument i, else keyword `name`, else null.
  const Value* get(size_t i, const char* name) const;
};

StatusOr<Value> apply_filter(const std::string& name, const Value& x, const Args& args);
StatusOr<bool> apply_test(const std::string& name, const Value& x, const Args& args);
StatusOr<Value> call_method(const Value& obj, const std::string& name, const Args& args);

// range, namespace, dict, strftime_now (raise_exception is the evaluator's).
bool is_global_function(const std::string& name);
StatusOr<Value> call_global(const std::string& name, const Args& args);

// Python's str.strip family: `chars` null strips white space.
std::string strip(const std::string& s, const Value* chars, bool left, bool right);

// Limits that keep a hostile template from exhausting memory.
constexpr size_t kMaxOutputBytes = size_t(64) << 20;
constexpr size_t kMaxListItems = size_t(1) << 16;
// What one render may cost (jinja.cc's Renderer::charge): about a second of work.
constexpr uint64_t kMaxRenderWork = 20000000;

}  // namespace tunableop::llm::jinja

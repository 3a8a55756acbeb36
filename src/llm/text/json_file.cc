#include "llm/text/json_file.h"

#include <filesystem>

#include "tunableop/safe_file.h"

namespace tunableop::llm {

namespace {
struct TooDeep {};
}  // namespace

StatusOr<nlohmann::json> read_json_object(const std::string& path) {
  auto text = read_regular_file(path);
  if (!text.is_ok()) return text.status();
  try {
    // The callback sees each value's depth as it is parsed: stop at the first one too deep.
    nlohmann::json j = nlohmann::json::parse(*text, [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
      if (depth > kMaxJsonDepth) throw TooDeep{};
      return true;
    });
    if (!j.is_object()) return Status::parse_error(path + ": the top level must be a JSON object");
    return j;
  } catch (const TooDeep&) {
    return Status::parse_error(path + ": nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  } catch (const nlohmann::json::exception& e) {
    return Status::parse_error(path + ": not valid JSON: " + e.what());
  }
}

StatusOr<std::optional<nlohmann::json>> read_optional_json_object(const std::string& dir, const std::string& name) {
  const std::string path = dir + "/" + name;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<nlohmann::json>();
  auto j = read_json_object(path);
  if (!j.is_ok()) return j.status();
  return std::optional<nlohmann::json>(std::move(*j));
}

}  // namespace tunableop::llm

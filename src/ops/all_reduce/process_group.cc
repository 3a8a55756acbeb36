// The collectives every user of a ProcessGroup needs on top of its primitives.
#include <fmt/format.h>

#include <algorithm>

#include "tunableop/process_group.h"

namespace tunableop {

Status agree(ProcessGroup& group, const Status& mine) {
  const int W = group.size();
  const int32_t code = int32_t(mine.code());
  std::vector<int32_t> codes(size_t(W), 0);
  TUNABLEOP_RETURN_IF_ERROR(group.all_gather(&code, codes.data(), sizeof(code)));
  const auto bad = std::find_if(codes.begin(), codes.end(), [](int32_t c) { return c != 0; });
  if (bad == codes.end()) return Status::ok();
  const int q = int(bad - codes.begin());
  auto msg = broadcast_string(group, q == group.rank() ? mine.message() : std::string(), q);
  if (!msg.is_ok()) return msg.status();
  if (q == group.rank()) return mine;
  return Status(StatusCode(*bad), fmt::format("rank {} failed: {}", q, *msg));
}

StatusOr<std::string> broadcast_string(ProcessGroup& group, std::string s, int root) {
  uint64_t n = s.size();
  TUNABLEOP_RETURN_IF_ERROR(group.broadcast(&n, sizeof(n), root));
  s.resize(size_t(n));
  if (n > 0) TUNABLEOP_RETURN_IF_ERROR(group.broadcast(s.data(), size_t(n), root));
  return s;
}

StatusOr<std::vector<std::string>> gather_strings(ProcessGroup& group, const std::string& mine, int root) {
  const size_t W = size_t(group.size());
  const uint64_t n = mine.size();
  std::vector<uint64_t> lens(W, 0);
  TUNABLEOP_RETURN_IF_ERROR(group.all_gather(&n, lens.data(), sizeof(n)));
  const size_t width = size_t(*std::max_element(lens.begin(), lens.end()));
  std::vector<std::string> out;
  if (width == 0) {
    if (group.rank() == root) out.assign(W, "");
    return out;
  }
  std::string padded = mine;
  padded.resize(width, '\0');
  std::string all(group.rank() == root ? W * width : 0, '\0');
  TUNABLEOP_RETURN_IF_ERROR(group.gather(padded.data(), all.empty() ? nullptr : all.data(), width, root));
  if (group.rank() == root)
    for (size_t q = 0; q < W; ++q) out.push_back(all.substr(q * width, size_t(lens[q])));
  return out;
}

}  // namespace tunableop

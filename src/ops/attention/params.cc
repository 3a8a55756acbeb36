// AttentionParams: defaults, validation, spans, work counts and the problem-key strings.
#include "ops/attention/params.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "tunableop/checked_size.h"

namespace tunableop {

namespace {

// Sizes beyond this are refused, so every span below fits int64 with room to spare and a CUDA
// grid dimension never overflows.
constexpr int64_t kMaxDim = int64_t(1) << 31;

bool fits_product(std::initializer_list<int64_t> factors) {
  __int128 prod = 1;
  for (int64_t f : factors) {
    prod *= f;
    if (prod > (__int128(1) << 62)) return false;
  }
  return true;
}

// The values with_defaults() fills in, saturating (the params may not be validated yet); the
// signature leaves out exactly these.
int64_t default_row_stride(const AttentionParams& p) { return (CheckedInt(p.heads) * p.head_dim).value(); }
int64_t default_pages_per_seq(const AttentionParams& p) {
  return p.kv_len > 0 ? p.kv_len / p.page_size + (p.kv_len % p.page_size != 0) : 0;
}
int64_t default_num_pages(const AttentionParams& p) { return (CheckedInt(p.batch) * p.pages_per_seq).value(); }

}  // namespace

double AttentionParams::softmax_scale() const {
  return scale != 0.0 ? scale : 1.0 / std::sqrt(double(head_dim > 0 ? head_dim : 1));
}

AttentionParams AttentionParams::with_defaults() const {
  // Runs before validate() (on a signature read from a file, say): every product saturates
  // (CheckedInt::value) instead of overflowing, and validate() then refuses the result.
  AttentionParams p = *this;
  if (p.q_row_stride == 0) p.q_row_stride = default_row_stride(p);
  if (p.o_row_stride == 0) p.o_row_stride = default_row_stride(p);
  if (!p.paged() && p.max_seq == 0) p.max_seq = p.kv_len;
  if (p.paged()) {
    if (p.pages_per_seq == 0) p.pages_per_seq = default_pages_per_seq(p);
    if (p.num_pages == 0) p.num_pages = default_num_pages(p);
  }
  return p;
}

Status AttentionParams::validate() const {
  auto bad = [](std::string m) { return Status::invalid_argument("attention: " + std::move(m)); };
  if (dtype != DType::kBF16 && dtype != DType::kF16 && dtype != DType::kF32)
    return bad(fmt::format("dtype {} is not bf16, fp16 or fp32", dtype_name(dtype)));
  const std::pair<const char*, int64_t> dims[] = {{"batch", batch}, {"q_len", q_len},       {"kv_len", kv_len},
                                                  {"heads", heads}, {"kv_heads", kv_heads}, {"head_dim", head_dim}};
  for (auto [name, v] : dims)
    if (v < 1 || v > kMaxDim) return bad(fmt::format("{} ({}) must be in 1..{}", name, v, kMaxDim));
  if (heads % kv_heads != 0) return bad(fmt::format("heads ({}) must be a multiple of kv_heads ({})", heads, kv_heads));
  // Tensor-core candidates ask more (64/128/256, multiples of 8) and say so in supports().
  if (head_dim > 512) return bad(fmt::format("head_dim ({}) must be <= 512", head_dim));
  if (causal && q_len > kv_len)
    return bad(fmt::format("causal q_len ({}) exceeds kv_len ({}): queries are the last q_len keys", q_len, kv_len));
  if (!std::isfinite(scale) || scale < 0)
    return bad(fmt::format("scale ({}) must be finite and >= 0 (0: default)", scale));
  if (window < 0 || window > kMaxDim)
    return bad(fmt::format("window ({}) must be in 0..{} (0: none)", window, kMaxDim));
  if (window > 0 && !causal) return bad(fmt::format("window ({}) needs causal attention", window));
  if (!std::isfinite(softcap) || softcap < 0)
    return bad(fmt::format("softcap ({}) must be finite and >= 0 (0: none)", softcap));
  if (q_row_stride < heads * head_dim)
    return bad(fmt::format("q_row_stride ({}) must be >= heads * head_dim ({})", q_row_stride, heads * head_dim));
  if (o_row_stride < heads * head_dim)
    return bad(fmt::format("o_row_stride ({}) must be >= heads * head_dim ({})", o_row_stride, heads * head_dim));
  if (page_size < 0) return bad(fmt::format("page_size ({}) must be >= 0", page_size));
  if (paged()) {
    if (page_size > 4096) return bad(fmt::format("page_size ({}) must be <= 4096", page_size));
    if (pages_per_seq < 1 || pages_per_seq > kMaxDim)
      return bad(fmt::format("pages_per_seq ({}) must be in 1..{}", pages_per_seq, kMaxDim));
    if (pages_per_seq * page_size < kv_len)
      return bad(fmt::format("pages_per_seq ({}) x page_size ({}) holds fewer than kv_len ({}) keys", pages_per_seq,
                             page_size, kv_len));
    if (num_pages < 1 || num_pages > kMaxDim)
      return bad(fmt::format("num_pages ({}) must be in 1..{}", num_pages, kMaxDim));
    if (max_seq != 0) return bad("max_seq applies to the contiguous cache only");
  } else {
    if (max_seq < kv_len) return bad(fmt::format("max_seq ({}) must be >= kv_len ({})", max_seq, kv_len));
    if (pages_per_seq != 0 || num_pages != 0) return bad("pages_per_seq / num_pages need page_size > 0");
  }
  if (!fits_product({batch, q_len, q_row_stride}) || !fits_product({batch, q_len, o_row_stride}) ||
      !fits_product({batch, kv_heads, paged() ? pages_per_seq * page_size : max_seq, head_dim}) ||
      !fits_product({num_pages > 0 ? num_pages : 1, kv_heads, page_size > 0 ? page_size : 1, head_dim}) ||
      !fits_product({batch, heads, q_len, kv_len, head_dim}))
    return bad("sizes overflow 64-bit element counts");
  return Status::ok();
}

int64_t AttentionParams::q_span() const { return ((batch * q_len - 1) * q_row_stride) + heads * head_dim; }
int64_t AttentionParams::o_span() const { return ((batch * q_len - 1) * o_row_stride) + heads * head_dim; }
int64_t AttentionParams::kv_span() const {
  return paged() ? num_pages * kv_heads * page_size * head_dim : batch * kv_heads * max_seq * head_dim;
}

double AttentionParams::flops() const {
  // Visible keys summed over the queries: q_len * kv_len, less the triangle above the diagonal.
  double visible = double(q_len) * double(kv_len);
  if (causal) visible -= double(q_len) * double(q_len - 1) / 2.0;
  if (window > 0 && causal) {
    // Query i (key position kv_len - q_len + i) sees min(position + 1, window) keys: the first
    // `early` queries see their whole prefix, the rest `window` keys each.
    const double first = double(kv_len - q_len + 1);  // keys the first query sees without a window
    const double early = std::clamp(double(window) - first + 1, 0.0, double(q_len));
    visible = early * first + early * (early - 1) / 2.0 + (double(q_len) - early) * double(window);
  }
  return 4.0 * double(batch) * double(heads) * double(head_dim) * visible;
}

double AttentionParams::kv_bytes() const {
  const int64_t keys = window > 0 ? std::min(window, kv_len) : kv_len;
  return 2.0 * double(batch) * double(kv_heads) * double(keys) * double(head_dim) * double(dtype_size(dtype));
}

std::string attention_op_signature(const AttentionParams& p) {
  return fmt::format("AttentionTunableOp_{}_{}", dtype_torch_name(p.dtype), p.causal ? "causal" : "full");
}

std::string attention_params_signature(const AttentionParams& in) {
  const AttentionParams p = in.with_defaults();
  std::string s = fmt::format("b{}_q{}_k{}_h{}_kv{}_d{}", p.batch, p.q_len, p.kv_len, p.heads, p.kv_heads, p.head_dim);
  if (p.paged()) {
    s += fmt::format("_p{}", p.page_size);
    if (p.pages_per_seq != default_pages_per_seq(p)) s += fmt::format("_pp{}", p.pages_per_seq);
    if (p.num_pages != default_num_pages(p)) s += fmt::format("_np{}", p.num_pages);
  } else if (p.max_seq != p.kv_len) {
    s += fmt::format("_ms{}", p.max_seq);
  }
  if (p.var_kv_len) s += "_vk";
  if (p.var_q_len) s += "_vq";
  if (p.q_row_stride != default_row_stride(p)) s += fmt::format("_qs{}", p.q_row_stride);
  if (p.o_row_stride != default_row_stride(p)) s += fmt::format("_os{}", p.o_row_stride);
  if (p.scale != 0.0) s += fmt::format("_sc{}", p.scale);
  if (p.window != 0) s += fmt::format("_w{}", p.window);
  if (p.softcap != 0.0) s += fmt::format("_cap{}", p.softcap);
  return s;
}

StatusOr<AttentionParams> parse_attention_signature(const std::string& op, const std::string& params) {
  auto bad = [&](const std::string& why) {
    return Status::parse_error(fmt::format("cannot read attention problem '{},{}': {}", op, params, why));
  };
  AttentionParams p;
  const std::string prefix = "AttentionTunableOp_";
  if (op.rfind(prefix, 0) != 0) return bad("op must start with " + prefix);
  const std::string rest = op.substr(prefix.size());
  const size_t us = rest.rfind('_');
  if (us == std::string::npos) return bad("op must end with _causal or _full");
  const std::string mode = rest.substr(us + 1);
  if (mode != "causal" && mode != "full") return bad("op must end with _causal or _full");
  p.causal = mode == "causal";
  auto dtype = parse_dtype(rest.substr(0, us));
  if (!dtype.is_ok()) return bad(dtype.status().message());
  p.dtype = *dtype;

  // Fields are <tag><value>, '_'-separated; the tag is the leading letters.
  struct Field {
    const char* tag;
    int64_t* dst;
    bool required;
  };
  Field fields[] = {{"b", &p.batch, true},      {"q", &p.q_len, true},           {"k", &p.kv_len, true},
                    {"h", &p.heads, true},      {"kv", &p.kv_heads, true},       {"d", &p.head_dim, true},
                    {"p", &p.page_size, false}, {"pp", &p.pages_per_seq, false}, {"np", &p.num_pages, false},
                    {"ms", &p.max_seq, false},  {"qs", &p.q_row_stride, false},  {"os", &p.o_row_stride, false},
                    {"w", &p.window, false}};
  std::vector<std::string> seen;
  size_t pos = 0;
  size_t required_seen = 0;
  while (pos <= params.size()) {
    size_t end = params.find('_', pos);
    if (end == std::string::npos) end = params.size();
    const std::string field = params.substr(pos, end - pos);
    size_t letters = 0;
    while (letters < field.size() && field[letters] >= 'a' && field[letters] <= 'z') ++letters;
    const std::string tag = field.substr(0, letters), value = field.substr(letters);
    for (const auto& s : seen)
      if (s == tag) return bad("field '" + tag + "' appears twice");
    seen.push_back(tag);
    if (tag == "vk" && value.empty()) {
      p.var_kv_len = true;
    } else if (tag == "vq" && value.empty()) {
      p.var_q_len = true;
    } else if (tag == "sc" || tag == "cap") {
      const char* first = value.data();
      char* last = nullptr;
      (tag == "sc" ? p.scale : p.softcap) = std::strtod(first, &last);
      if (value.empty() || last != first + value.size())
        return bad(std::string(tag == "sc" ? "scale" : "softcap") + " '" + value + "' is not a number");
    } else {
      Field* f = nullptr;
      for (auto& c : fields)
        if (tag == c.tag) f = &c;
      if (f == nullptr) return bad("unknown field '" + field + "'");
      auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), *f->dst);
      if (value.empty() || ec != std::errc() || ptr != value.data() + value.size() || *f->dst < 1)
        return bad("field '" + field + "' needs a positive integer");
      if (f != &fields[required_seen] && (f->required || required_seen != 6))
        return bad("fields must start with b, q, k, h, kv, d in that order");
      if (f->required) ++required_seen;
    }
    pos = end + 1;
  }
  if (required_seen != 6) return bad("fields b, q, k, h, kv, d are required");
  p = p.with_defaults();
  Status st = p.validate();
  if (!st.is_ok()) return bad(st.message());
  return p;
}

}  // namespace tunableop

// Problem keys in PyTorch TunableOp's layout, and their inverse for offline tuning.
#include <fmt/format.h>

#include <vector>

#include "tunableop/checked_size.h"
#include "tunableop/gemm.h"

namespace tunableop {

namespace {

bool dense_ld(const GemmParams& p) {
  return p.lda == std::max<int64_t>(1, p.a_rows()) && p.ldb == std::max<int64_t>(1, p.b_rows()) &&
         p.ldc == std::max<int64_t>(1, p.m);
}

bool dense_strides(const GemmParams& p) {
  // Checked: also called on params that were never validated (an overflow is "not dense").
  auto dense = [](int64_t stride, int64_t ld, int64_t cols) {
    CheckedInt d = CheckedInt(ld) * cols;
    return d.ok() && stride == d.value();
  };
  return dense(p.stride_a, p.lda, p.a_cols()) && dense(p.stride_b, p.ldb, p.b_cols()) && dense(p.stride_c, p.ldc, p.n);
}

// Keeps empty fields, a trailing one included ("nn_1_2_3_" is malformed, not "nn_1_2_3").
std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  for (size_t start = 0;;) {
    size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return out;
    start = at + 1;
  }
}

// Digits only (no sign: a key never holds a negative size), at most INT64_MAX.
bool to_int(const std::string& s, int64_t& v) {
  if (s.empty() || s[0] < '0' || s[0] > '9') return false;
  return parse_int64(s, &v, 0);
}

}  // namespace

std::string gemm_op_signature(const GemmParams& p) {
  const std::string out = p.widens() ? std::string("_") + dtype_torch_name(p.c_dtype()) : "";
  return fmt::format("{}_{}{}{}_{}{}", p.batch > 1 ? "GemmStridedBatchedTunableOp" : "GemmTunableOp",
                     dtype_torch_name(p.dtype), p.allow_tf32 ? "_tf32" : "", out, p.transa, p.transb);
}

std::string gemm_params_signature(const GemmParams& p) {
  std::string s = fmt::format("{}{}_{}_{}_{}", char(p.transa | 0x20), char(p.transb | 0x20), p.m, p.n, p.k);
  if (!dense_ld(p)) s += fmt::format("_ld_{}_{}_{}", p.lda, p.ldb, p.ldc);
  if (p.batch > 1) {
    s += fmt::format("_B_{}", p.batch);
    if (!dense_strides(p)) s += fmt::format("_S_{}_{}_{}", p.stride_a, p.stride_b, p.stride_c);
  }
  return s;
}

StatusOr<GemmParams> parse_gemm_signature(const std::string& op, const std::string& params) {
  auto bad = [&](const std::string& why) {
    return Status::parse_error(fmt::format("cannot read GEMM problem '{},{}': {}", op, params, why));
  };
  GemmParams p;
  std::string rest;
  bool batched = false;
  for (auto [prefix, b] : {std::pair{"GemmStridedBatchedTunableOp_", true}, {"GemmTunableOp_", false}}) {
    std::string pre(prefix);
    if (op.rfind(pre, 0) == 0) {
      rest = op.substr(pre.size());
      batched = b;
      break;
    }
  }
  if (rest.size() < 4 || rest[rest.size() - 3] != '_')
    return bad("op must look like GemmTunableOp_<dtype>_<NN|NT|TN|TT>");
  p.transa = rest[rest.size() - 2];
  p.transb = rest[rest.size() - 1];
  std::string dt = rest.substr(0, rest.size() - 3);
  if (dt.size() > 5 && dt.substr(dt.size() - 5) == "_tf32") {
    p.allow_tf32 = true;
    dt = dt.substr(0, dt.size() - 5);
  }
  // "<dtype>_<C's dtype>" for a wider C (dtype names hold no '_').
  if (const size_t us = dt.find('_'); us != std::string::npos) {
    auto out = parse_dtype(dt.substr(us + 1));
    if (!out.is_ok()) return bad(out.status().message());
    p.out_dtype = *out;
    dt = dt.substr(0, us);
  }
  auto dtype = parse_dtype(dt);
  if (!dtype.is_ok()) return bad(dtype.status().message());
  p.dtype = *dtype;

  auto f = split(params, '_');
  if (f.size() < 4 || f[0].size() != 2) return bad("params must start with <tt>_<m>_<n>_<k>");
  if (char(f[0][0] & ~0x20) != p.transa || char(f[0][1] & ~0x20) != p.transb)
    return bad("transposes in op and params differ");
  if (!to_int(f[1], p.m) || !to_int(f[2], p.n) || !to_int(f[3], p.k))
    return bad("m, n, k must be non-negative integers below 2^63");
  size_t i = 4;
  while (i < f.size()) {
    const std::string& tag = f[i];
    if ((tag == "ld" || tag == "S") && i + 3 < f.size()) {
      int64_t v[3];
      for (int j = 0; j < 3; ++j)
        if (!to_int(f[i + 1 + size_t(j)], v[j])) return bad("non-integer after _" + tag + "_ (or one >= 2^63)");
      if (tag == "ld") {
        p.lda = v[0], p.ldb = v[1], p.ldc = v[2];
      } else {
        p.stride_a = v[0], p.stride_b = v[1], p.stride_c = v[2];
      }
      i += 4;
    } else if (tag == "B" && i + 1 < f.size()) {
      if (!to_int(f[i + 1], p.batch)) return bad("non-integer batch (or one >= 2^63)");
      i += 2;
    } else {
      return bad("unexpected '" + tag + "'");
    }
  }
  if (!batched && p.batch > 1) return bad("a _B_ batch needs the GemmStridedBatchedTunableOp name");
  p = p.with_defaults();
  Status st = p.validate();
  if (!st.is_ok()) return bad(st.message());
  return p;
}

}  // namespace tunableop

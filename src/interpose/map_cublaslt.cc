#include "interpose/map_cublaslt.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "interpose/map_cublas.h"

namespace tunableop::interpose {

namespace {

// Matmul descriptor attributes that change the computation and that we do not reproduce: each
// must hold its default value (numbers, so that an older header still builds; an attribute the
// running library does not know reads as default). TRANSC, FILL_MODE, the auxiliary epilogue
// output, alpha vectors, fp8/block scaling, fast accumulation, emulation. An FP8 call may set
// the A and B scale pointers and modes and fast accumulation (kFp8Allowed).
constexpr int kDescMustBeDefault[] = {5,  6,  11, 12, 13, 14, 17, 18, 19, 20, 21, 22,
                                      23, 24, 25, 31, 32, 33, 34, 35, 36, 37, 38};
constexpr int kFp8Allowed[] = {CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                               CUBLASLT_MATMUL_DESC_FAST_ACCUM, CUBLASLT_MATMUL_DESC_A_SCALE_MODE,
                               CUBLASLT_MATMUL_DESC_B_SCALE_MODE};
// Layout attributes: planar complex offset, batch mode (strided vs pointer array).
constexpr int kLayoutMustBeDefault[] = {7, 8};

constexpr uint32_t kEpilogueDefault = 1, kEpilogueBias = 4, kEpilogueReluBias = 6, kEpilogueGeluBias = 36;

struct Layout {
  uint32_t type = 0;
  int32_t order = 0;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int32_t batch = 1;
  int64_t stride = 0;
  bool operator==(const Layout&) const = default;
};

// What the descriptors of a call say, independent of its pointers and scalars.
struct Shape {
  Reason why = Reason::kServed;
  GemmParams p;  // alpha/beta not set
  bool swap_ab = false;
  bool has_bias = false;
  Activation act = Activation::kNone;
  const void* bias = nullptr;
  bool scale_f64 = false;
  bool c_like_d = false;  // C's layout equals D's (required when beta != 0)
  bool fp8 = false;       // a ScaledGemm problem: `scaled` and the scale pointers (bias: `bias`)
  ScaledGemmParams scaled;
  const float* scale_a = nullptr;
  const float* scale_b = nullptr;
};

template <class T>
bool get(const LtFunctions& f, const void* desc, int attr, T* v) {
  size_t w = 0;
  return f.desc_get(static_cast<cublasLtMatmulDesc_t>(const_cast<void*>(desc)),
                    static_cast<cublasLtMatmulDescAttributes_t>(attr), v, sizeof(T), &w) == CUBLAS_STATUS_SUCCESS &&
         w == sizeof(T);
}

template <class T>
bool get_layout(const LtFunctions& f, const void* l, int attr, T* v) {
  size_t w = 0;
  return f.layout_get(static_cast<cublasLtMatrixLayout_t>(const_cast<void*>(l)),
                      static_cast<cublasLtMatrixLayoutAttribute_t>(attr), v, sizeof(T), &w) == CUBLAS_STATUS_SUCCESS &&
         w == sizeof(T);
}

// An attribute's bytes, whatever its type; false when the library does not know it.
template <class Getter, class Obj, class Attr>
bool raw_attr(Getter get_fn, Obj obj, Attr attr, unsigned char (&buf)[64], size_t* size) {
  size_t need = 0;
  if (get_fn(obj, attr, nullptr, 0, &need) != CUBLAS_STATUS_SUCCESS || need == 0 || need > sizeof(buf)) return false;
  return get_fn(obj, attr, buf, need, size) == CUBLAS_STATUS_SUCCESS;
}

template <class Getter, class Obj, class Attr>
bool same_as_default(Getter get_fn, Obj obj, Obj def, Attr attr) {
  unsigned char a[64] = {}, b[64] = {};
  size_t na = 0, nb = 0;
  bool known = raw_attr(get_fn, obj, attr, a, &na);
  bool known_def = raw_attr(get_fn, def, attr, b, &nb);
  if (!known || !known_def) return known == known_def;
  return na == nb && std::memcmp(a, b, na) == 0;
}

// Default descriptors of the program's cuBLASLt, made once (host-only objects, never freed).
struct Defaults {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layout = nullptr;
};
const Defaults& defaults(const LtFunctions& f) {
  static const Defaults d = [&] {
    Defaults x;
    if (f.desc_create) f.desc_create(&x.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (f.layout_create) f.layout_create(&x.layout, CUDA_R_32F, 1, 1, 1);
    return x;
  }();
  return d;
}

bool read_layout(const LtFunctions& f, const void* l, Layout* out) {
  if (l == nullptr) return false;
  return get_layout(f, l, CUBLASLT_MATRIX_LAYOUT_TYPE, &out->type) &&
         get_layout(f, l, CUBLASLT_MATRIX_LAYOUT_ORDER, &out->order) &&
         get_layout(f, l, CUBLASLT_MATRIX_LAYOUT_ROWS, &out->rows) &&
         get_layout(f, l, CUBLASLT_MATRIX_LAYOUT_COLS, &out->cols) &&
         get_layout(f, l, CUBLASLT_MATRIX_LAYOUT_LD, &out->ld) &&
         get_layout(f, l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &out->batch) &&
         get_layout(f, l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &out->stride);
}

char flip(char t) { return t == 'N' ? 'T' : 'N'; }

// One input operand as a column-major stored matrix and the op applied to it: a row-major
// (rows x cols) matrix is the column-major (cols x rows) one transposed.
struct Operand {
  char trans;
  int64_t ld, stride;
};
Operand normalize(const Layout& l, char trans) {
  return {l.order == CUBLASLT_ORDER_ROW ? flip(trans) : trans, l.ld, l.stride};
}

bool is_fp8_type(uint32_t t) { return t == CUDA_R_8F_E4M3 || t == CUDA_R_8F_E5M2; }

// What every call must satisfy, FP8 or not: host alpha/beta, no SM target, every attribute we
// do not reproduce at its default (an FP8 call may set its scales and fast accumulation), plain
// strided layouts in column- or row-major order.
Reason common_checks(const LtCall& c, const LtFunctions& f, int32_t pmode, bool fp8,
                     std::initializer_list<const Layout*> layouts) {
  if (pmode != CUBLASLT_POINTER_MODE_HOST) return Reason::kDevicePointerMode;
  int32_t sm_target = 0;
  if (get(f, c.desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sm_target) && sm_target != 0) return Reason::kSmCountTarget;
  const Defaults& def = defaults(f);
  if (def.desc == nullptr || def.layout == nullptr) return Reason::kDescriptorAttribute;
  for (int attr : kDescMustBeDefault) {
    if (fp8 && std::find(std::begin(kFp8Allowed), std::end(kFp8Allowed), attr) != std::end(kFp8Allowed)) continue;
    if (!same_as_default(f.desc_get, static_cast<cublasLtMatmulDesc_t>(const_cast<void*>(c.desc)), def.desc,
                         static_cast<cublasLtMatmulDescAttributes_t>(attr)))
      return Reason::kDescriptorAttribute;
  }
  for (const void* l : {c.adesc, c.bdesc, c.cdesc, c.ddesc})
    for (int attr : kLayoutMustBeDefault)
      if (!same_as_default(f.layout_get, static_cast<cublasLtMatrixLayout_t>(const_cast<void*>(l)), def.layout,
                           static_cast<cublasLtMatrixLayoutAttribute_t>(attr)))
        return Reason::kLayout;
  for (const Layout* l : layouts)
    if (l->order != CUBLASLT_ORDER_COL && l->order != CUBLASLT_ORDER_ROW) return Reason::kLayout;
  return Reason::kServed;
}

char op_letter(int32_t t) { return t == CUBLAS_OP_N ? 'N' : (t == CUBLAS_OP_T || t == CUBLAS_OP_C) ? 'T' : 0; }

// Logical sizes: op(A) is rows(D) x K, op(B) is K x cols(D).
struct Sizes {
  uint64_t rows = 0, cols = 0, k = 0;
};
Reason logical_sizes(const Layout& la, const Layout& lb, const Layout& ld, char opa, char opb, Sizes* out) {
  if (opa == 0 || opb == 0) return Reason::kInvalidArguments;
  const uint64_t rows = ld.rows, cols = ld.cols;
  const uint64_t k = opa == 'N' ? la.cols : la.rows;
  const uint64_t a_rows = opa == 'N' ? la.rows : la.cols;
  const uint64_t b_rows = opb == 'N' ? lb.rows : lb.cols, b_cols = opb == 'N' ? lb.cols : lb.rows;
  if (a_rows != rows || b_rows != k || b_cols != cols) return Reason::kInvalidArguments;
  if (rows == 0 || cols == 0 || k == 0) return Reason::kTrivial;
  *out = {rows, cols, k};
  return Reason::kServed;
}

bool output_dtype_of(uint32_t t, DType* out) {
  return dtype_of(int(t), out) && *out != DType::kF64;  // bf16, fp16, fp32
}

// An FP8 call (torch._scaled_mm's): compute and scale 32F, A and B fp8, D bf16/fp16/fp32, every
// layout column-major and unbatched, both scale modes scalar (tensorwise) or both outer vector
// (rowwise) with both pointers set, no epilogue or a bias. C is ignored: beta must be 0.
Shape read_fp8_shape(const LtCall& c, const LtFunctions& f, const Layout& la, const Layout& lb, const Layout& lc,
                     const Layout& ld, int32_t compute, int32_t scale, int32_t pmode, int32_t ta, int32_t tb,
                     uint32_t epilogue) {
  Shape s;
  auto fail = [&](Reason r) {
    s.why = r;
    return s;
  };
  ScaledGemmParams& p = s.scaled;
  if (!is_fp8_type(la.type) || !is_fp8_type(lb.type) || !output_dtype_of(ld.type, &p.out_dtype))
    return fail(Reason::kDataType);
  p.a_dtype = la.type == CUDA_R_8F_E4M3 ? DType::kF8E4M3 : DType::kF8E5M2;
  p.b_dtype = lb.type == CUDA_R_8F_E4M3 ? DType::kF8E4M3 : DType::kF8E5M2;
  if (compute != CUBLAS_COMPUTE_32F || scale != CUDA_R_32F) return fail(Reason::kComputeType);
  if (Reason r = common_checks(c, f, pmode, true, {&la, &lb, &lc, &ld}); r != Reason::kServed) return fail(r);
  for (const Layout* l : {&la, &lb, &lc, &ld})
    if (l->order != CUBLASLT_ORDER_COL || l->batch != 1) return fail(Reason::kLayout);
  int32_t mode_a = 0, mode_b = 0;  // an attribute the library does not know reads as scalar
  (void)get(f, c.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode_a);
  (void)get(f, c.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode_b);
  if (mode_a != mode_b ||
      (mode_a != CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F && mode_a != CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F))
    return fail(Reason::kDescriptorAttribute);  // block scaling, mixed modes
  p.scale_mode = mode_a == CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F ? ScaleMode::kRowwise : ScaleMode::kTensorwise;
  const void *sa = nullptr, *sb = nullptr;
  if (!get(f, c.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa) ||
      !get(f, c.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb) || sa == nullptr || sb == nullptr)
    return fail(Reason::kDescriptorAttribute);
  s.scale_a = static_cast<const float*>(sa);
  s.scale_b = static_cast<const float*>(sb);
  if (epilogue != kEpilogueDefault && epilogue != kEpilogueBias) return fail(Reason::kEpilogue);
  if (epilogue == kEpilogueBias) {
    int32_t bias_type = -1;
    DType bt = p.out_dtype;
    if (!get(f, c.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &s.bias) || s.bias == nullptr)
      return fail(Reason::kEpilogue);
    if (get(f, c.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type) && bias_type != -1 &&
        !output_dtype_of(uint32_t(bias_type), &bt))
      return fail(Reason::kEpilogue);
    p.bias_dtype = bt;
  }
  Sizes z;
  if (Reason r = logical_sizes(la, lb, ld, op_letter(ta), op_letter(tb), &z); r != Reason::kServed) return fail(r);
  p.transa = op_letter(ta), p.transb = op_letter(tb);
  p.m = int64_t(z.rows), p.n = int64_t(z.cols), p.k = int64_t(z.k);
  p.lda = la.ld, p.ldb = lb.ld, p.ldc = ld.ld;
  if (p.lda < 1 || p.ldb < 1 || p.ldc < 1) return fail(Reason::kInvalidArguments);
  p = p.with_defaults();
  if (!p.validate().is_ok()) return fail(Reason::kInvalidArguments);
  s.fp8 = true;
  return s;
}

Shape read_shape(const LtCall& c, const LtFunctions& f, bool allow_tf32) {
  Shape s;
  auto fail = [&](Reason r) {
    s.why = r;
    return s;
  };
  int32_t compute = 0, scale = 0, pmode = 0, ta = 0, tb = 0, bias_type = -1;
  uint32_t epilogue = 0;
  const void* bias = nullptr;
  if (!get(f, c.desc, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, &compute) ||
      !get(f, c.desc, CUBLASLT_MATMUL_DESC_SCALE_TYPE, &scale) ||
      !get(f, c.desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pmode) || !get(f, c.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta) ||
      !get(f, c.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb) || !get(f, c.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue))
    return fail(Reason::kInvalidArguments);
  Layout la, lb, lc, ld;
  if (!read_layout(f, c.adesc, &la) || !read_layout(f, c.bdesc, &lb) || !read_layout(f, c.cdesc, &lc) ||
      !read_layout(f, c.ddesc, &ld))
    return fail(Reason::kInvalidArguments);
  if (is_fp8_type(la.type) || is_fp8_type(lb.type))
    return read_fp8_shape(c, f, la, lb, lc, ld, compute, scale, pmode, ta, tb, epilogue);
  DType dt;
  if (!dtype_of(int(la.type), &dt) || lb.type != la.type || lc.type != la.type || ld.type != la.type)
    return fail(Reason::kDataType);
  bool tf32 = false;
  if (dt == DType::kF64) {
    if (compute != CUBLAS_COMPUTE_64F || scale != CUDA_R_64F) return fail(Reason::kComputeType);
  } else if (compute == CUBLAS_COMPUTE_32F && scale == CUDA_R_32F) {
    tf32 = dt == DType::kF32 && allow_tf32;
  } else if (compute == CUBLAS_COMPUTE_32F_FAST_TF32 && scale == CUDA_R_32F && dt == DType::kF32) {
    tf32 = true;
  } else {
    return fail(Reason::kComputeType);
  }
  if (Reason r = common_checks(c, f, pmode, false, {&la, &lb, &lc, &ld}); r != Reason::kServed) return fail(r);

  switch (epilogue) {
    case kEpilogueDefault: break;
    case kEpilogueBias: s.act = Activation::kNone; break;
    case kEpilogueReluBias: s.act = Activation::kRelu; break;
    case kEpilogueGeluBias: s.act = Activation::kGelu; break;
    default: return fail(Reason::kEpilogue);
  }
  s.has_bias = epilogue != kEpilogueDefault;
  if (s.has_bias) {
    if (!get(f, c.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias) || bias == nullptr) return fail(Reason::kEpilogue);
    if (get(f, c.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type) && bias_type != -1 &&
        bias_type != int32_t(ld.type))
      return fail(Reason::kEpilogue);
    // cuBLASLt's bias has one element per row of D: with a row-major D that is one per column
    // of the column-major problem we would compute, which our GemmAndBias does not have.
    if (ld.order == CUBLASLT_ORDER_ROW) return fail(Reason::kLayout);
  }
  const char opa = op_letter(ta), opb = op_letter(tb);
  Sizes z;
  if (Reason r = logical_sizes(la, lb, ld, opa, opb, &z); r != Reason::kServed) return fail(r);
  const uint64_t rows = z.rows, cols = z.cols, k = z.k;
  const int32_t batch = ld.batch;
  if (la.batch != batch || lb.batch != batch || lc.batch != batch || batch < 1) return fail(Reason::kLayout);
  if (batch > 1 && (la.stride <= 0 || lb.stride <= 0 || ld.stride <= 0)) return fail(Reason::kBroadcastStride);
  if (s.has_bias && batch > 1) return fail(Reason::kLayout);

  Operand a = normalize(la, opa), b = normalize(lb, opb);
  GemmParams& p = s.p;
  p.dtype = dt;
  p.allow_tf32 = tf32;
  p.k = int64_t(k);
  p.ldc = ld.ld;
  if (ld.order == CUBLASLT_ORDER_COL) {
    p.m = int64_t(rows);
    p.n = int64_t(cols);
    p.transa = a.trans;
    p.transb = b.trans;
    p.lda = a.ld;
    p.ldb = b.ld;
  } else {  // D^T = op(B)^T op(A)^T, all column-major
    s.swap_ab = true;
    p.m = int64_t(cols);
    p.n = int64_t(rows);
    p.transa = flip(b.trans);
    p.transb = flip(a.trans);
    p.lda = b.ld;
    p.ldb = a.ld;
  }
  if (batch > 1) {
    p.batch = batch;
    p.stride_a = s.swap_ab ? b.stride : a.stride;
    p.stride_b = s.swap_ab ? a.stride : b.stride;
    p.stride_c = ld.stride;
  }
  if (p.lda < 1 || p.ldb < 1 || p.ldc < 1) return fail(Reason::kInvalidArguments);
  p = p.with_defaults();
  if (!p.validate().is_ok()) return fail(Reason::kInvalidArguments);
  s.bias = bias;
  s.scale_f64 = dt == DType::kF64;
  s.c_like_d = lc == ld;
  return s;
}

// The cache key: the raw bytes of the matmul descriptor and the four layouts.
struct RawKey {
  static constexpr size_t kDesc = sizeof(cublasLtMatmulDescOpaque_t), kLayout = sizeof(cublasLtMatrixLayoutOpaque_t);
  unsigned char bytes[kDesc + 4 * kLayout];
  bool operator==(const RawKey& o) const { return std::memcmp(bytes, o.bytes, sizeof(bytes)) == 0; }
};
struct RawKeyHash {
  size_t operator()(const RawKey& k) const {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < sizeof(k.bytes); i += 8) {
      uint64_t w;
      std::memcpy(&w, k.bytes + i, 8);
      h = (h ^ w) * 0x100000001b3ull;
      h ^= h >> 29;
    }
    return size_t(h);
  }
};

struct ShapeCache {
  static constexpr size_t kMaxEntries = 4096;  // beyond: read the descriptors each time
  std::shared_mutex mu;
  std::unordered_map<RawKey, Shape, RawKeyHash> map;
};
ShapeCache& shape_cache() {
  static auto* c = new ShapeCache();  // never destroyed: calls may arrive during exit
  return *c;
}

RawKey raw_key(const LtCall& c) {
  RawKey k;
  std::memcpy(k.bytes, c.desc, RawKey::kDesc);
  size_t off = RawKey::kDesc;
  for (const void* l : {c.adesc, c.bdesc, c.cdesc, c.ddesc}) {
    std::memcpy(k.bytes + off, l, RawKey::kLayout);
    off += RawKey::kLayout;
  }
  return k;
}

}  // namespace

void clear_lt_cache() {
  std::unique_lock lock(shape_cache().mu);
  shape_cache().map.clear();
}

Reason map_lt_call(const LtCall& c, const LtFunctions& f, bool allow_tf32, LtMapped* out) {
  if (c.desc == nullptr || c.adesc == nullptr || c.bdesc == nullptr || c.cdesc == nullptr || c.ddesc == nullptr)
    return Reason::kInvalidArguments;
  const RawKey key = raw_key(c);
  ShapeCache& cache = shape_cache();
  Shape s;
  bool found = false;
  {
    std::shared_lock lock(cache.mu);
    if (auto it = cache.map.find(key); it != cache.map.end()) {
      s = it->second;
      found = true;
    }
  }
  if (!found) {
    s = read_shape(c, f, allow_tf32);
    std::unique_lock lock(cache.mu);
    if (cache.map.size() < ShapeCache::kMaxEntries) cache.map.emplace(key, s);
  }
  if (s.why != Reason::kServed) return s.why;
  if (c.alpha == nullptr || c.beta == nullptr) return Reason::kInvalidArguments;
  if (s.fp8) {
    // torch._scaled_mm passes alpha 1 and beta 0 (host floats); ScaledGemm has neither.
    if (*static_cast<const float*>(c.alpha) != 1.0f || *static_cast<const float*>(c.beta) != 0.0f)
      return Reason::kDescriptorAttribute;
    if (c.a == nullptr || c.b == nullptr || c.d == nullptr) return Reason::kInvalidArguments;
    out->fp8 = true;
    out->scaled = s.scaled;
    out->scaled_ops = ScaledGemmOperands{c.a, c.b, s.scale_a, s.scale_b, s.bias, c.d, c.stream};
    return Reason::kServed;
  }
  GemmParams p = s.p;
  p.alpha = s.scale_f64 ? *static_cast<const double*>(c.alpha) : *static_cast<const float*>(c.alpha);
  p.beta = s.scale_f64 ? *static_cast<const double*>(c.beta) : *static_cast<const float*>(c.beta);
  if (p.alpha == 0.0) return Reason::kTrivial;
  if (c.a == nullptr || c.b == nullptr || c.d == nullptr) return Reason::kInvalidArguments;
  // We compute in place into D: C must be D when it is read.
  if (p.beta != 0.0 && (c.c != c.d || !s.c_like_d)) return Reason::kOutOfPlace;
  if (s.has_bias && p.beta != 0.0) return Reason::kEpilogue;
  out->has_bias = s.has_bias;
  out->gemm = p;
  out->ops = GemmOperands{s.swap_ab ? c.b : c.a, s.swap_ab ? c.a : c.b, c.d, c.stream};
  out->swap_ab = s.swap_ab;
  out->bias_ptr = s.bias;
  if (s.has_bias) out->bias = GemmAndBiasParams{p, s.act};
  return Reason::kServed;
}

}  // namespace tunableop::interpose

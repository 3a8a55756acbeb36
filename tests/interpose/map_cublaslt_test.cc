// cublasLtMatmul calls -> our GEMM / GemmAndBias / ScaledGemm problem. cuBLASLt's descriptors
// are host objects, so real ones are made here without a GPU; the operands are host buffers
// that only the fp64 reference reads. Each mapped problem is checked against cuBLASLt's definition
// computed element by element from the layouts (orders, transposes, batches).
#include "interpose/map_cublaslt.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "ops/gemm/reference.h"
#include "ops/scaled_gemm/reference.h"
#include "tunableop/op_tools.h"

namespace tunableop::interpose {
namespace {

LtFunctions lt_functions() {
  return {&cublasLtMatmulDescGetAttribute, &cublasLtMatrixLayoutGetAttribute, &cublasLtMatmulDescCreate,
          &cublasLtMatrixLayoutCreate};
}

struct LayoutSpec {
  int64_t rows, cols, ld;
  int32_t order = CUBLASLT_ORDER_COL;
  int32_t batch = 1;
  int64_t stride = 0;
  int64_t elements() const { return (batch - 1) * stride + (order == CUBLASLT_ORDER_COL ? ld * cols : ld * rows); }
  int64_t at(int64_t i, int64_t j, int64_t b) const {
    return b * stride + (order == CUBLASLT_ORDER_COL ? i + j * ld : i * ld + j);
  }
};

// Descriptors (destroyed at the end) for one call.
struct LtCase {
  cudaDataType type = CUDA_R_64F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_64F;
  cudaDataType scale = CUDA_R_64F;
  cublasLtMatmulDesc_t desc = nullptr;
  std::vector<cublasLtMatrixLayout_t> layouts;
  double alpha = 1.25, beta = 0;
  float alpha32 = 1.25f, beta32 = 0;
  std::vector<double> a, b, c, bias;
  LtCall call;

  ~LtCase() {
    if (desc) cublasLtMatmulDescDestroy(desc);
    for (auto l : layouts) cublasLtMatrixLayoutDestroy(l);
  }
  bool make_desc(cublasOperation_t ta, cublasOperation_t tb) {
    if (cublasLtMatmulDescCreate(&desc, compute, scale) != CUBLAS_STATUS_SUCCESS) return false;
    int32_t t[2] = {ta, tb};
    set(CUBLASLT_MATMUL_DESC_TRANSA, t[0]);
    set(CUBLASLT_MATMUL_DESC_TRANSB, t[1]);
    call.desc = desc;
    return true;
  }
  template <class T>
  void set(cublasLtMatmulDescAttributes_t attr, T v) {
    ASSERT_EQ(cublasLtMatmulDescSetAttribute(desc, attr, &v, sizeof(v)), CUBLAS_STATUS_SUCCESS);
  }
  cublasLtMatrixLayout_t layout(const LayoutSpec& s, cudaDataType t) {
    cublasLtMatrixLayout_t l = nullptr;
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&l, t, uint64_t(s.rows), uint64_t(s.cols), s.ld), CUBLAS_STATUS_SUCCESS);
    cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &s.order, sizeof(s.order));
    if (s.batch > 1) {
      cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &s.batch, sizeof(s.batch));
      cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &s.stride, sizeof(s.stride));
    }
    layouts.push_back(l);
    return l;
  }
  // A, B, C = D with the given layouts and random fp64 contents.
  void operands(const LayoutSpec& sa, const LayoutSpec& sb, const LayoutSpec& sd, uint64_t seed = 1) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> v(-1, 1);
    a.resize(size_t(sa.elements()));
    b.resize(size_t(sb.elements()));
    c.resize(size_t(sd.elements()));
    for (auto* buf : {&a, &b, &c})
      for (auto& x : *buf) x = v(rng);
    call.adesc = layout(sa, type);
    call.bdesc = layout(sb, type);
    call.cdesc = call.ddesc = layout(sd, type);
    call.a = a.data();
    call.b = b.data();
    call.c = call.d = c.data();
    call.alpha = scale == CUDA_R_64F ? static_cast<const void*>(&alpha) : &alpha32;
    call.beta = scale == CUDA_R_64F ? static_cast<const void*>(&beta) : &beta32;
  }
  Reason map(LtMapped* m, bool allow_tf32 = false) { return map_lt_call(call, lt_functions(), allow_tf32, m); }
};

// D = alpha op(A) op(B) + beta C on the logical matrices the layouts describe.
std::vector<double> lt_definition(const LtCase& t, const LayoutSpec& sa, bool ta, const LayoutSpec& sb, bool tb,
                                  const LayoutSpec& sd) {
  std::vector<double> d = t.c;
  const int64_t k = ta ? sa.rows : sa.cols;
  for (int64_t bt = 0; bt < sd.batch; ++bt)
    for (int64_t i = 0; i < sd.rows; ++i)
      for (int64_t j = 0; j < sd.cols; ++j) {
        double s = 0;
        for (int64_t l = 0; l < k; ++l)
          s +=
              t.a[size_t(ta ? sa.at(l, i, bt) : sa.at(i, l, bt))] * t.b[size_t(tb ? sb.at(j, l, bt) : sb.at(l, j, bt))];
        double& o = d[size_t(sd.at(i, j, bt))];
        o = t.alpha * s + (t.beta != 0 ? t.beta * o : 0.0);
      }
  return d;
}

template <class T>
void set_layout(const void* l, cublasLtMatrixLayoutAttribute_t attr, T v) {
  cublasLtMatrixLayoutSetAttribute(static_cast<cublasLtMatrixLayout_t>(const_cast<void*>(l)), attr, &v, sizeof(v));
}

class MapLtCall : public ::testing::Test {
 protected:
  void SetUp() override {
    clear_lt_cache();
    cublasLtMatmulDesc_t probe = nullptr;
    if (cublasLtMatmulDescCreate(&probe, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS)
      GTEST_SKIP() << "cuBLASLt cannot create descriptors here";
    cublasLtMatmulDescDestroy(probe);
  }
};

TEST_F(MapLtCall, EveryOrderAndTransposeComputesCublasLtsDefinition) {
  const int64_t m = 7, n = 5, k = 6;
  for (int32_t order_ab : {CUBLASLT_ORDER_COL, CUBLASLT_ORDER_ROW}) {
    for (int32_t order_d : {CUBLASLT_ORDER_COL, CUBLASLT_ORDER_ROW}) {
      for (bool ta : {false, true}) {
        for (bool tb : {false, true}) {
          for (int32_t batch : {1, 2}) {
            LtCase t;
            t.beta = batch == 1 ? 0.0 : -0.5;
            ASSERT_TRUE(t.make_desc(ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N));
            auto spec = [&](int64_t rows, int64_t cols, int32_t order) {
              LayoutSpec s{rows, cols, (order == CUBLASLT_ORDER_COL ? rows : cols) + 2, order, batch, 0};
              s.stride = batch > 1 ? s.ld * (order == CUBLASLT_ORDER_COL ? cols : rows) + 3 : 0;
              return s;
            };
            LayoutSpec sa = ta ? spec(k, m, order_ab) : spec(m, k, order_ab);
            LayoutSpec sb = tb ? spec(n, k, order_ab) : spec(k, n, order_ab);
            LayoutSpec sd = spec(m, n, order_d);
            t.operands(sa, sb, sd);
            LtMapped mapped;
            ASSERT_EQ(t.map(&mapped), Reason::kServed);
            EXPECT_FALSE(mapped.has_bias);
            std::vector<double> got = gemm_reference_f64(mapped.gemm, mapped.ops.a, mapped.ops.b, t.c.data());
            std::vector<double> want = lt_definition(t, sa, ta, sb, tb, sd);
            // The reference spans D up to its last element; the buffer may hold a gap after it.
            ASSERT_LE(got.size(), want.size());
            for (size_t i = 0; i < got.size(); ++i)
              ASSERT_NEAR(got[i], want[i], 1e-12) << "orders " << order_ab << "/" << order_d << " ta " << ta << " tb "
                                                  << tb << " batch " << batch << " element " << i;
          }
        }
      }
    }
  }
}

// PyTorch's addmm with a bias: bf16 "tn" with a BIAS epilogue (+ ReLU / GELU variants).
TEST_F(MapLtCall, BiasEpiloguesBecomeGemmAndBias) {
  for (auto [epilogue, act] : {std::pair{CUBLASLT_EPILOGUE_BIAS, Activation::kNone},
                               {CUBLASLT_EPILOGUE_RELU_BIAS, Activation::kRelu},
                               {CUBLASLT_EPILOGUE_GELU_BIAS, Activation::kGelu}}) {
    LtCase t;
    t.type = CUDA_R_16BF;
    t.compute = CUBLAS_COMPUTE_32F;
    t.scale = CUDA_R_32F;
    ASSERT_TRUE(t.make_desc(CUBLAS_OP_T, CUBLAS_OP_N));
    t.set(CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
    static double bias_buf[32];
    t.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(bias_buf));
    t.operands({64, 32, 64}, {64, 8, 64}, {32, 8, 32});
    LtMapped m;
    ASSERT_EQ(t.map(&m), Reason::kServed);
    EXPECT_TRUE(m.has_bias);
    EXPECT_EQ(m.bias.act, act);
    EXPECT_EQ(m.bias_ptr, bias_buf);
    EXPECT_EQ(gemm_and_bias_op_signature(m.bias), "GemmAndBiasTunableOp_BFloat16_TN");
    EXPECT_EQ(gemm_params_signature(m.bias.gemm), "tn_32_8_64");
    EXPECT_TRUE(m.bias.validate().is_ok());
    t.beta32 = 1;  // our GemmAndBias never reads C
    EXPECT_EQ(t.map(&m), Reason::kEpilogue);
  }
}

TEST_F(MapLtCall, ANewBiasPointerIsANewMapping) {
  LtCase t;
  ASSERT_TRUE(t.make_desc(CUBLAS_OP_N, CUBLAS_OP_N));
  t.set(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
  static double b1[8], b2[8];
  t.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(b1));
  t.operands({8, 4, 8}, {4, 3, 4}, {8, 3, 8});
  LtMapped m;
  ASSERT_EQ(t.map(&m), Reason::kServed);
  EXPECT_EQ(m.bias_ptr, b1);
  t.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(b2));
  ASSERT_EQ(t.map(&m), Reason::kServed);
  EXPECT_EQ(m.bias_ptr, b2);
}

TEST_F(MapLtCall, Tf32FromTheComputeTypeOrTheSetting) {
  LtCase t;
  t.type = CUDA_R_32F;
  t.compute = CUBLAS_COMPUTE_32F;
  t.scale = CUDA_R_32F;
  ASSERT_TRUE(t.make_desc(CUBLAS_OP_N, CUBLAS_OP_N));
  t.operands({4, 4, 4}, {4, 4, 4}, {4, 4, 4});
  LtMapped m;
  ASSERT_EQ(t.map(&m), Reason::kServed);
  EXPECT_FALSE(m.gemm.allow_tf32);
  clear_lt_cache();
  ASSERT_EQ(t.map(&m, /*allow_tf32=*/true), Reason::kServed);
  EXPECT_TRUE(m.gemm.allow_tf32);
  LtCase f;
  f.type = CUDA_R_32F;
  f.compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  f.scale = CUDA_R_32F;
  ASSERT_TRUE(f.make_desc(CUBLAS_OP_N, CUBLAS_OP_N));
  f.operands({4, 4, 4}, {4, 4, 4}, {4, 4, 4});
  ASSERT_EQ(f.map(&m), Reason::kServed);
  EXPECT_TRUE(m.gemm.allow_tf32);
}

TEST_F(MapLtCall, EveryCallWeCannotReproducePassesThroughWithItsReason) {
  auto reason = [](auto change, LayoutSpec sd = {8, 3, 8}) {
    LtCase t;
    t.make_desc(CUBLAS_OP_N, CUBLAS_OP_N);
    change(t, 0);
    t.operands({8, 4, 8}, {4, 3, 4}, sd);
    change(t, 1);
    LtMapped m;
    clear_lt_cache();
    return t.map(&m);
  };
  static double dummy[64];
  const void* ptr = dummy;
  EXPECT_EQ(reason([&](LtCase& t, int s) {
              if (!s) t.set(CUBLASLT_MATMUL_DESC_POINTER_MODE, int32_t(CUBLASLT_POINTER_MODE_DEVICE));
            }),
            Reason::kDevicePointerMode);
  EXPECT_EQ(reason([&](LtCase& t, int s) {
              if (!s) t.set(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_RELU);
            }),
            Reason::kEpilogue);
  EXPECT_EQ(reason([&](LtCase& t, int s) {
              if (!s) t.set(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_GELU_AUX_BIAS);
            }),
            Reason::kEpilogue);
  EXPECT_EQ(reason([&](LtCase& t, int s) {
              if (!s) t.set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, ptr);
            }),
            Reason::kDescriptorAttribute);
  EXPECT_EQ(reason([&](LtCase& t, int s) {
              if (!s) t.set(CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, int32_t(40));
            }),
            Reason::kSmCountTarget);
  EXPECT_EQ(reason([&](LtCase& t, int s) {
              if (!s) t.type = CUDA_R_8F_E4M3;
            }),
            Reason::kDataType);
  EXPECT_EQ(reason([&](LtCase& t, int s) {
              if (s) set_layout(t.call.adesc, CUBLASLT_MATRIX_LAYOUT_ORDER, int32_t(CUBLASLT_ORDER_COL32));
            }),
            Reason::kLayout);
  EXPECT_EQ(reason([&](LtCase& t, int s) {
              if (!s) {
                t.compute = CUBLAS_COMPUTE_32F_FAST_16F;
                t.type = CUDA_R_32F;
                t.scale = CUDA_R_32F;
              }
            }),
            Reason::kComputeType);
  // C != D: fine when C is not read, refused when it is.
  EXPECT_EQ(reason([&](LtCase& t, int s) {
              if (s) t.call.c = dummy;
            }),
            Reason::kServed);
  EXPECT_EQ(reason([&](LtCase& t, int s) {
              if (s) {
                t.call.c = dummy;
                t.beta = 1;
              }
            }),
            Reason::kOutOfPlace);
  EXPECT_EQ(reason([&](LtCase& t, int s) {
              if (s) t.alpha = 0;
            }),
            Reason::kTrivial);
  // A row-major D turns the per-row bias into a per-column one.
  EXPECT_EQ(reason(
                [&](LtCase& t, int s) {
                  if (!s) {
                    t.set(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
                    t.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, ptr);
                  }
                },
                LayoutSpec{8, 3, 3, CUBLASLT_ORDER_ROW}),
            Reason::kLayout);
  // Batches: a stride of 0 broadcasts one matrix; unequal batch counts.
  EXPECT_EQ(reason([&](LtCase& t, int s) {
              if (!s) return;
              for (const void* l : {t.call.adesc, t.call.bdesc, t.call.ddesc}) {
                set_layout(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, int32_t(2));
                set_layout(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, int64_t(l == t.call.adesc ? 0 : 64));
              }
            }),
            Reason::kBroadcastStride);
  EXPECT_EQ(reason([&](LtCase& t, int s) {
              if (!s) return;
              set_layout(t.call.adesc, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, int32_t(2));
            }),
            Reason::kLayout);
}

// FP8 calls (torch._scaled_mm's) -> ScaledGemm: descriptors made as PyTorch makes them, each
// mapped problem checked against cuBLASLt's FP8 definition on the call's layouts.
// One FP8 call, described the way PyTorch's scaled_gemm describes it: compute and scale 32F,
// both scale modes, the scale pointers, fast accumulation, C typed as the bias (or as D) with
// A's pointer, beta 0.
struct Fp8Case {
  cudaDataType a_type = CUDA_R_8F_E4M3, b_type = CUDA_R_8F_E4M3, d_type = CUDA_R_16BF;
  int32_t bias_type = -1;  // -1: no bias
  int32_t mode_a = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, mode_b = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
  cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldd = 0;
  float alpha = 1.0f, beta = 0.0f;

  cublasLtMatmulDesc_t desc = nullptr;
  std::vector<cublasLtMatrixLayout_t> layouts;
  std::vector<uint8_t> a, b, bias, d;
  std::vector<float> sa, sb;
  LtCall call;

  ~Fp8Case() {
    if (desc) cublasLtMatmulDescDestroy(desc);
    for (auto l : layouts) cublasLtMatrixLayoutDestroy(l);
  }
  template <class T>
  void set(cublasLtMatmulDescAttributes_t attr, T v) {
    ASSERT_EQ(cublasLtMatmulDescSetAttribute(desc, attr, &v, sizeof(v)), CUBLAS_STATUS_SUCCESS);
  }
  cublasLtMatrixLayout_t layout(cudaDataType t, int64_t rows, int64_t cols, int64_t ld) {
    cublasLtMatrixLayout_t l = nullptr;
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&l, t, uint64_t(rows), uint64_t(cols), ld), CUBLAS_STATUS_SUCCESS);
    layouts.push_back(l);
    return l;
  }
  static DType dtype(int32_t t) {
    return t == CUDA_R_8F_E4M3   ? DType::kF8E4M3
           : t == CUDA_R_8F_E5M2 ? DType::kF8E5M2
           : t == CUDA_R_16BF    ? DType::kBF16
           : t == CUDA_R_16F     ? DType::kF16
                                 : DType::kF32;
  }
  // Descriptors and random host operands; `change` may alter the descriptor before the call.
  void make(uint64_t seed = 1) {
    ASSERT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
    set(CUBLASLT_MATMUL_DESC_TRANSA, int32_t(ta));
    set(CUBLASLT_MATMUL_DESC_TRANSB, int32_t(tb));
    const int64_t a_rows = ta == CUBLAS_OP_N ? m : k, a_cols = ta == CUBLAS_OP_N ? k : m;
    const int64_t b_rows = tb == CUBLAS_OP_N ? k : n, b_cols = tb == CUBLAS_OP_N ? n : k;
    if (lda == 0) lda = a_rows;
    if (ldb == 0) ldb = b_rows;
    if (ldd == 0) ldd = m;
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> v(-1, 1), s(0.25, 2);
    auto fill = [&](std::vector<uint8_t>& buf, int32_t t, int64_t count) {
      buf.assign(size_t(count) * dtype_size(dtype(t)), 0);
      for (int64_t i = 0; i < count; ++i) store_from_double(dtype(t), buf.data(), i, v(rng));
    };
    fill(a, a_type, lda * a_cols);
    fill(b, b_type, ldb * b_cols);
    d.assign(size_t(ldd * n) * dtype_size(dtype(d_type)), 0);
    sa.resize(size_t(mode_a == CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F ? m : 1));
    sb.resize(size_t(mode_b == CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F ? n : 1));
    for (auto* sc : {&sa, &sb})
      for (float& x : *sc) x = float(s(rng));
    set(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, mode_a);
    set(CUBLASLT_MATMUL_DESC_B_SCALE_MODE, mode_b);
    set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, static_cast<const void*>(sa.data()));
    set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, static_cast<const void*>(sb.data()));
    set(CUBLASLT_MATMUL_DESC_FAST_ACCUM, int8_t(1));
    if (bias_type >= 0) {
      fill(bias, bias_type, m);
      set(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
      set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(bias.data()));
      set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type);
    }
    call.desc = desc;
    call.adesc = layout(a_type, a_rows, a_cols, lda);
    call.bdesc = layout(b_type, b_rows, b_cols, ldb);
    call.cdesc = layout(bias_type >= 0 ? cudaDataType(bias_type) : d_type, m, n, ldd);
    call.ddesc = layout(d_type, m, n, ldd);
    call.a = a.data(), call.b = b.data(), call.c = a.data(), call.d = d.data();
    call.alpha = &alpha, call.beta = &beta;
  }
  Reason map(LtMapped* out) {
    clear_lt_cache();
    return map_lt_call(call, lt_functions(), false, out);
  }
  // cuBLASLt's FP8 definition on the call's own layouts.
  double defined(int64_t i, int64_t j) const {
    double s = 0;
    for (int64_t l = 0; l < k; ++l) {
      const double x = load_as_double(dtype(a_type), a.data(), ta == CUBLAS_OP_N ? i + l * lda : l + i * lda);
      const double y = load_as_double(dtype(b_type), b.data(), tb == CUBLAS_OP_N ? l + j * ldb : j + l * ldb);
      s += x * y;
    }
    s *= double(sa[sa.size() == 1 ? 0 : size_t(i)]) * double(sb[sb.size() == 1 ? 0 : size_t(j)]);
    if (bias_type >= 0) s += load_as_double(dtype(bias_type), bias.data(), i);
    return s;
  }
};

TEST_F(MapLtCall, Fp8ScaledMmBecomesPyTorchsScaledGemmProblem) {
  Fp8Case t;
  t.m = 64, t.n = 12288, t.k = 2048;
  t.make();
  LtMapped m;
  ASSERT_EQ(t.map(&m), Reason::kServed);
  ASSERT_TRUE(m.fp8);
  EXPECT_EQ(scaled_gemm_op_signature(m.scaled), "ScaledGemmTunableOp_Float8_e4m3fn_Float8_e4m3fn_BFloat16_TN");
  EXPECT_EQ(scaled_gemm_params_signature(m.scaled), "tn_64_12288_2048_ld_2048_2048_64_rw_1_bias_None");
  EXPECT_EQ(m.scaled_ops.a, t.a.data());
  EXPECT_EQ(m.scaled_ops.b, t.b.data());
  EXPECT_EQ(m.scaled_ops.scale_a, t.sa.data());
  EXPECT_EQ(m.scaled_ops.scale_b, t.sb.data());
  EXPECT_EQ(m.scaled_ops.c, t.d.data());

  // Tensorwise, fp32 out with PyTorch's bf16 bias (C typed as the bias), e5m2 B.
  Fp8Case u;
  u.m = 32, u.n = 16, u.k = 64;
  u.mode_a = u.mode_b = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  u.d_type = CUDA_R_32F;
  u.b_type = CUDA_R_8F_E5M2;
  u.bias_type = CUDA_R_16BF;
  u.make();
  ASSERT_EQ(u.map(&m), Reason::kServed);
  EXPECT_EQ(scaled_gemm_op_signature(m.scaled), "ScaledGemmTunableOp_Float8_e4m3fn_Float8_e5m2_float_TN");
  EXPECT_EQ(scaled_gemm_params_signature(m.scaled), "tn_32_16_64_ld_64_64_32_rw_0_bias_BFloat16");
  EXPECT_EQ(m.scaled_ops.bias, u.bias.data());
}

TEST_F(MapLtCall, Fp8TheMappedProblemComputesCublasLtsDefinition) {
  for (cublasOperation_t ta : {CUBLAS_OP_N, CUBLAS_OP_T})
    for (cublasOperation_t tb : {CUBLAS_OP_N, CUBLAS_OP_T})
      for (int32_t mode : {CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F}) {
        Fp8Case t;
        t.ta = ta, t.tb = tb;
        t.m = 7, t.n = 5, t.k = 9;
        t.mode_a = t.mode_b = mode;
        t.bias_type = CUDA_R_16F;
        t.d_type = CUDA_R_16F;
        t.make(uint64_t(ta * 4 + tb * 2 + mode));
        LtMapped m;
        ASSERT_EQ(t.map(&m), Reason::kServed);
        const std::vector<double> got = scaled_gemm_reference_f64(m.scaled, m.scaled_ops);
        for (int64_t j = 0; j < t.n; ++j)
          for (int64_t i = 0; i < t.m; ++i)
            ASSERT_NEAR(got[size_t(i + j * m.scaled.ldc)], t.defined(i, j), 1e-9)
                << "ta " << ta << " tb " << tb << " mode " << mode << " at " << i << "," << j;
      }
}

TEST_F(MapLtCall, Fp8WhatScaledGemmCannotReproducePassesThroughWithItsReason) {
  auto reason = [](auto change) {
    Fp8Case t;
    t.m = 32, t.n = 16, t.k = 64;
    change(t, 0);
    t.make();
    change(t, 1);
    LtMapped m;
    return t.map(&m);
  };
  static float dummy[64];
  const void* ptr = dummy;
  // Mixed and block scale modes.
  EXPECT_EQ(reason([](Fp8Case& t, int s) {
              if (!s) t.mode_b = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
            }),
            Reason::kDescriptorAttribute);
  EXPECT_EQ(reason([](Fp8Case& t, int s) {
              if (!s) t.mode_a = t.mode_b = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
            }),
            Reason::kDescriptorAttribute);
  // No scale pointer; an fp8 output's D scale and amax.
  EXPECT_EQ(reason([](Fp8Case& t, int s) {
              if (s) t.set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, static_cast<const void*>(nullptr));
            }),
            Reason::kDescriptorAttribute);
  EXPECT_EQ(reason([&](Fp8Case& t, int s) {
              if (s) t.set(CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, ptr);
            }),
            Reason::kDescriptorAttribute);
  EXPECT_EQ(reason([](Fp8Case& t, int s) {
              if (!s) t.d_type = CUDA_R_8F_E4M3;
            }),
            Reason::kDataType);
  EXPECT_EQ(reason([](Fp8Case& t, int s) {
              if (!s) t.a_type = CUDA_R_16BF;
            }),
            Reason::kDataType);
  // alpha and beta: ScaledGemm has neither.
  EXPECT_EQ(reason([](Fp8Case& t, int s) {
              if (s) t.alpha = 2;
            }),
            Reason::kDescriptorAttribute);
  EXPECT_EQ(reason([](Fp8Case& t, int s) {
              if (s) t.beta = 1;
            }),
            Reason::kDescriptorAttribute);
  EXPECT_EQ(reason([](Fp8Case& t, int s) {
              if (s) t.set(CUBLASLT_MATMUL_DESC_POINTER_MODE, int32_t(CUBLASLT_POINTER_MODE_DEVICE));
            }),
            Reason::kDevicePointerMode);
  EXPECT_EQ(reason([&](Fp8Case& t, int s) {
              if (!s) return;
              t.set(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_RELU_BIAS);
              t.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, ptr);
            }),
            Reason::kEpilogue);
  EXPECT_EQ(reason([](Fp8Case& t, int s) {
              if (!s) return;
              int32_t row = CUBLASLT_ORDER_ROW;
              cublasLtMatrixLayoutSetAttribute(static_cast<cublasLtMatrixLayout_t>(const_cast<void*>(t.call.ddesc)),
                                               CUBLASLT_MATRIX_LAYOUT_ORDER, &row, sizeof(row));
            }),
            Reason::kLayout);
  EXPECT_EQ(reason([](Fp8Case& t, int s) {
              if (!s) return;
              int32_t two = 2;
              for (const void* l : {t.call.adesc, t.call.bdesc, t.call.cdesc, t.call.ddesc})
                cublasLtMatrixLayoutSetAttribute(static_cast<cublasLtMatrixLayout_t>(const_cast<void*>(l)),
                                                 CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &two, sizeof(two));
            }),
            Reason::kLayout);
  // What maps: fast accumulation on or off, either fp8 order of A and B.
  EXPECT_EQ(reason([](Fp8Case& t, int s) {
              if (s) t.set(CUBLASLT_MATMUL_DESC_FAST_ACCUM, int8_t(0));
            }),
            Reason::kServed);
  EXPECT_EQ(reason([](Fp8Case& t, int s) {
              if (!s) t.a_type = CUDA_R_8F_E5M2;
            }),
            Reason::kServed);
}

}  // namespace
}  // namespace tunableop::interpose

// cublasLtMatmul calls -> our GEMM / GemmAndBias problem. cuBLASLt's descriptors are host
// objects, so real ones are made here without a GPU; the operands are host buffers that only
// the fp64 reference reads. Each mapped problem is checked against cuBLASLt's definition
// computed element by element from the layouts (orders, transposes, batches).
#include "interpose/map_cublaslt.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "ops/gemm/reference.h"

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

}  // namespace
}  // namespace tunableop::interpose

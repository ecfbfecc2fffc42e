// backends/cuda/gemm_epilogue.cuh, ctnn's tiled GEMM with a rule epilogue, against a
// host reference (reference::gemm_nn on the rounded inputs, then the rules' scalar
// references in order) on awkward shapes: m = 1, 3, 257; K = 1, 17; N = 1, 10, 130;
// with and without a bias; float, __half, __nv_bfloat16 within tolerance<T>()
// (cuda_test.hpp). Then a list (fn::chain) and a non-relu rule through
// ops<cuda<90>>::dense_forward, which must take that kernel. Skips without a device.
#include "cuda_test.hpp"

#include <ctnn/backends/cuda/gemm_epilogue.cuh>
#include <ctnn/kernels/activations_reference.hpp>
#include <ctnn/kernels/reference.hpp>
#include <ctnn/kernels/tiled_gemm.hpp>

using namespace ctnn_test;
namespace ref = ctnn::kernels::reference;

#define CTNN_EPILOGUE_TYPES float, __half, __nv_bfloat16

namespace {
// leaky_relu(2 z - 0.25) then tanh, and its host reference
const auto rule = ctnn::fn::chain{ctnn::fn::affine_fn<float>{2.0f, -0.25f}, ctnn::fn::leaky_relu_fn<float>{0.1f},
                                  ctnn::fn::tanh_fn{}};
void rule_ref(std::vector<float>& v) {
  for (auto& x : v) x = 2.0f * x - 0.25f;
  ref::leaky_relu_forward(v.data(), v.size(), 0.1f);
  ref::tanh_forward(v.data(), v.size());
}
}  // namespace

TEST_CASE_TEMPLATE("gemm_epilogue (tiled, rule list fused) matches a host reference on awkward shapes", T,
                   CTNN_EPILOGUE_TYPES) {
  CTNN_REQUIRE_DEVICE();
  for (std::size_t m : {1, 3, 257})
    for (std::size_t K : {1, 17})
      for (std::size_t N : {1, 10, 130})
        for (bool bias : {true, false}) {
          const auto x = rounded<T>(random_values(m * K, 21)), w = rounded<T>(random_values(K * N, 22)),
                     b = rounded<T>(random_values(N, 23));
          auto dx = to_device<T>(x), dw = to_device<T>(w), db = to_device<T>(b);
          ctnn::device_buffer<T> dy(m * N);
          std::vector<float> want(m * N);
          ref::gemm_nn(x.data(), w.data(), bias ? b.data() : nullptr, want.data(), m, K, N);
          rule_ref(want);
          ctnn::gemm_epilogue<T>(dx.data(), dw.data(), bias ? db.data() : nullptr, dy.data(), m, K, N, rule);
          INFO("m=" << m << " K=" << K << " N=" << N << " bias=" << bias);
          CHECK_CLOSE(T, to_host(dy, m * N), want);
        }
}

TEST_CASE_TEMPLATE("ops<cuda>::dense_forward fuses a rule list and leaky_relu (no map after the GEMM)", T,
                   CTNN_EPILOGUE_TYPES) {
  CTNN_REQUIRE_DEVICE();
  using O = ctnn::ops<ctnn::cuda<90>>;
  constexpr std::size_t K = 17, N = 130;
  for (std::size_t m : {1, 3, 257}) {
    const auto x = rounded<T>(random_values(m * K, 31)), w = rounded<T>(random_values(K * N, 32)),
               b = rounded<T>(random_values(N, 33));
    auto dx = to_device<T>(x), dw = to_device<T>(w), db = to_device<T>(b);
    ctnn::device_buffer<T> dy(m * N);
    std::vector<float> pre(m * N);
    ref::gemm_nn(x.data(), w.data(), b.data(), pre.data(), m, K, N);
    auto want = pre;
    rule_ref(want);
    O::dense_forward<K, N>(dx.data(), dw.data(), db.data(), dy.data(), m, rule);
    CHECK_CLOSE(T, to_host(dy, m * N), want);
    want = pre;
    ref::leaky_relu_forward(want.data(), want.size(), 0.2f);
    O::dense_forward<K, N>(dx.data(), dw.data(), db.data(), dy.data(), m, ctnn::fn::leaky_relu_fn<float>{0.2f});
    CHECK_CLOSE(T, to_host(dy, m * N), want);
    // relu without a bias: no cuBLASLt epilogue expresses it, the tiled kernel runs it
    ref::gemm_nn(x.data(), w.data(), static_cast<const float*>(nullptr), want.data(), m, K, N);
    ref::relu_forward(want.data(), want.size());
    O::dense_forward<K, N>(dx.data(), dw.data(), static_cast<const T*>(nullptr), dy.data(), m, ctnn::fn::relu_fn{});
    CHECK_CLOSE(T, to_host(dy, m * N), want);
  }
}

// ops<cuda<90>> against the CPU reference (ops<cpu<>> and backends/cpu/*_reference.hpp),
// on the host: float32 within 1e-5, half and bfloat16 within tolerance<T>() (cuda_test.hpp).
#include <ctnn/core/sparse_product_ops.hpp>
#include "cuda_test.hpp"

#include <limits>

// The headers under test, by name (cuda_test.hpp includes them all through ctnn/backends/cuda/cuda.cuh).
#include <ctnn/backends/cuda/context.cuh>
#include <ctnn/backends/cuda/cuda.cuh>
#include <ctnn/backends/cuda/error.cuh>
#include <ctnn/backends/cuda/gemm.cuh>
#include <ctnn/backends/cuda/kernels.cuh>
#include <ctnn/backends/cuda/memory.cuh>
#include <ctnn/backends/cuda/ops.cuh>
#include <ctnn/backends/cuda/sparse_products.cuh>
#include <ctnn/backends/cuda/types.cuh>
#include <ctnn/pruning.hpp>

#include <ctnn/kernels/activations_reference.hpp>
#include <ctnn/kernels/conv_reference.hpp>
#include <ctnn/kernels/reference.hpp>

using namespace ctnn_test;
using G = ctnn::ops<ctnn::cuda<90>>;
// The op-set contract (core/backend_ops.hpp), each part by name.
static_assert(ctnn::has_product_ops<ctnn::cuda<90>> && ctnn::has_elementwise_ops<ctnn::cuda<90>> &&
              ctnn::has_reduction_ops<ctnn::cuda<90>> && ctnn::has_conversion_ops<ctnn::cuda<90>> &&
              ctnn::has_optimizer_update_ops<ctnn::cuda<90>> && ctnn::has_loss_ops<ctnn::cuda<90>>);
static_assert(ctnn::has_layer_ops<ctnn::cuda<90>>);  // batch_norm and dropout (ops.cuh)
static_assert(ctnn::BackendOps<ctnn::cuda<90>>);
static_assert(ctnn::has_sparse_product_ops<ctnn::cuda<90>>);  // every sparse layout (pruning.hpp included)
using C = ctnn::ops<ctnn::cpu<>>;
using C_ops = C;  // where a template parameter is named C
namespace ref = ctnn::kernels::reference;

#define CTNN_STORAGE_TYPES float, __half, __nv_bfloat16

TEST_CASE_TEMPLATE("dense forward (bias, bias + relu epilogues) matches the CPU", T, CTNN_STORAGE_TYPES) {
  CTNN_REQUIRE_DEVICE();
  constexpr std::size_t K = 37, N = 19;  // odd sizes: unaligned bias, the unfused fallback may run
  for (std::size_t m : {1, 33, 256}) {
    const auto x = rounded<T>(random_values(m * K, 1)), w = rounded<T>(random_values(K * N, 2)),
               b = rounded<T>(random_values(N, 3));
    auto dx = to_device<T>(x), dw = to_device<T>(w), db = to_device<T>(b);
    ctnn::device_buffer<T> dy(m * N);
    std::vector<float> want(m * N);
    ref::gemm_nn(x.data(), w.data(), b.data(), want.data(), m, K, N);
    G::dense_forward<K, N>(dx.data(), dw.data(), db.data(), dy.data(), m);
    CHECK_CLOSE(T, to_host(dy, m * N), want);
    ref::relu_forward(want.data(), want.size());
    G::dense_forward<K, N, ctnn::fn::relu_fn>(dx.data(), dw.data(), db.data(), dy.data(), m);
    CHECK_CLOSE(T, to_host(dy, m * N), want);
    // a bias one element past an aligned address (as in a model's parameter block): the unfused path
    std::vector<float> b1(N + 1, 0.0f);
    std::copy(b.begin(), b.end(), b1.begin() + 1);
    auto db1 = to_device<T>(b1);
    G::dense_forward<K, N, ctnn::fn::relu_fn>(dx.data(), dw.data(), db1.data() + 1, dy.data(), m);
    CHECK_CLOSE(T, to_host(dy, m * N), want);
  }
}

TEST_CASE_TEMPLATE("dense forward with sigmoid, tanh and leaky_relu epilogues (functors.hpp) matches the CPU", T,
                   CTNN_STORAGE_TYPES) {
  CTNN_REQUIRE_DEVICE();
  constexpr std::size_t K = 37, N = 19;
  for (std::size_t m : {1, 33, 256}) {
    const auto x = rounded<T>(random_values(m * K, 11)), w = rounded<T>(random_values(K * N, 12)),
               b = rounded<T>(random_values(N, 13));
    auto dx = to_device<T>(x), dw = to_device<T>(w), db = to_device<T>(b);
    ctnn::device_buffer<T> dy(m * N);
    std::vector<float> pre(m * N);
    ref::gemm_nn(x.data(), w.data(), b.data(), pre.data(), m, K, N);
    auto want = pre;
    ref::sigmoid_forward(want.data(), want.size());
    G::dense_forward<K, N>(dx.data(), dw.data(), db.data(), dy.data(), m, ctnn::fn::sigmoid_fn{});
    CHECK_CLOSE(T, to_host(dy, m * N), want);
    want = pre;
    ref::tanh_forward(want.data(), want.size());
    G::dense_forward<K, N>(dx.data(), dw.data(), db.data(), dy.data(), m, ctnn::fn::tanh_fn{});
    CHECK_CLOSE(T, to_host(dy, m * N), want);
    want = pre;
    ref::leaky_relu_forward(want.data(), want.size(), 0.1f);
    G::dense_forward<K, N>(dx.data(), dw.data(), db.data(), dy.data(), m, ctnn::fn::leaky_relu_fn<float>{0.1f});
    CHECK_CLOSE(T, to_host(dy, m * N), want);
  }
}

TEST_CASE_TEMPLATE("dense forward on Tensor Core shapes (784-256-128-10) matches the CPU", T, CTNN_STORAGE_TYPES) {
  CTNN_REQUIRE_DEVICE();
  constexpr std::size_t K = 784, N = 256;
  const std::size_t m = 128;
  const auto x = rounded<T>(random_values(m * K, 4, 0.0f, 1.0f)), w = rounded<T>(random_values(K * N, 5, -0.08f, 0.08f)),
             b = rounded<T>(random_values(N, 6));
  auto dx = to_device<T>(x), dw = to_device<T>(w), db = to_device<T>(b);
  ctnn::device_buffer<T> dy(m * N);
  std::vector<float> want(m * N);
  ref::gemm_nn(x.data(), w.data(), b.data(), want.data(), m, K, N);
  ref::relu_forward(want.data(), want.size());
  G::dense_forward<K, N, ctnn::fn::relu_fn>(dx.data(), dw.data(), db.data(), dy.data(), m);
  CHECK_CLOSE(T, to_host(dy, m * N), want);
}

TEST_CASE_TEMPLATE("dense backward (weights, bias, input) matches the CPU", T, CTNN_STORAGE_TYPES) {
  CTNN_REQUIRE_DEVICE();
  constexpr std::size_t K = 45, N = 24;
  for (std::size_t m : {1, 70}) {
    const auto x = rounded<T>(random_values(m * K, 7)), w = rounded<T>(random_values(K * N, 8)),
               d = rounded<T>(random_values(m * N, 9));
    auto dx = to_device<T>(x), dw = to_device<T>(w), dd = to_device<T>(d);
    ctnn::device_buffer<T> gw(K * N), gb(N), gx(m * K);
    std::vector<float> want_w(K * N), want_b(N), want_x(m * K);
    ref::gemm_tn(x.data(), d.data(), want_w.data(), m, K, N);
    ref::col_sum(d.data(), want_b.data(), m, N);
    ref::gemm_nt(d.data(), w.data(), want_x.data(), m, K, N);
    G::dense_backward_weights<K, N>(dx.data(), dd.data(), gw.data(), gb.data(), m);
    G::dense_backward_input<K, N>(dd.data(), dw.data(), gx.data(), m);
    CHECK_CLOSE(T, to_host(gw, K * N), want_w);
    CHECK_CLOSE(T, to_host(gb, N), want_b);
    CHECK_CLOSE(T, to_host(gx, m * K), want_x);
  }
}

TEST_CASE_TEMPLATE("the naive GEMM (cuBLASLt's last-resort fallback) matches the CPU in the three dense products", T,
                   CTNN_STORAGE_TYPES) {
  CTNN_REQUIRE_DEVICE();
  const int K = 21, N = 13, m = 9;
  const auto x = rounded<T>(random_values(m * K, 15)), w = rounded<T>(random_values(K * N, 16)),
             d = rounded<T>(random_values(m * N, 17));
  auto gx = to_device<T>(x), gw = to_device<T>(w), gd = to_device<T>(d);
  ctnn::device_buffer<T> y(m * N), dw(K * N), dx(m * K);
  std::vector<float> want_y(m * N), want_w(K * N), want_x(m * K);
  ref::gemm_nn(x.data(), w.data(), static_cast<const float*>(nullptr), want_y.data(), m, K, N);
  ref::gemm_tn(x.data(), d.data(), want_w.data(), m, K, N);
  ref::gemm_nt(d.data(), w.data(), want_x.data(), m, K, N);
  const cudaStream_t s = G::stream();
  ctnn::cuda_detail::naive_gemm<T><<<4, 64, 0, s>>>(false, false, N, m, K, gw.data(), N, gx.data(), K, y.data(), N);
  ctnn::cuda_detail::naive_gemm<T><<<4, 64, 0, s>>>(false, true, N, K, m, gd.data(), N, gx.data(), K, dw.data(), N);
  ctnn::cuda_detail::naive_gemm<T><<<4, 64, 0, s>>>(true, false, K, m, N, gw.data(), N, gd.data(), N, dx.data(), K);
  CTNN_CUDA_CHECK(cudaGetLastError());
  CHECK_CLOSE(T, to_host(y, m * N), want_y);
  CHECK_CLOSE(T, to_host(dw, K * N), want_w);
  CHECK_CLOSE(T, to_host(dx, m * K), want_x);
}

TEST_CASE_TEMPLATE("activations forward and backward match the CPU", T, CTNN_STORAGE_TYPES) {
  CTNN_REQUIRE_DEVICE();
  const std::size_t rows = 37, cols = 13, n = rows * cols;
  const auto z = rounded<T>(random_values(n, 10, -4.0f, 4.0f)), d = rounded<T>(random_values(n, 11));
  auto run = [&](auto fwd, auto bwd, auto rfwd, auto rbwd, const char* what) {
    INFO(what);
    auto dz = to_device<T>(z), dd = to_device<T>(d);
    std::vector<float> y = z, g = d;
    rfwd(y.data());
    fwd(dz.data());
    const auto got_y = to_host(dz, n);
    CHECK_CLOSE(T, got_y, y);
    // backward from the device's own outputs, so only the backward's error is measured
    std::vector<float> yy = got_y;
    rbwd(yy.data(), g.data());
    bwd(dz.data(), dd.data());
    CHECK_CLOSE(T, to_host(dd, n), g);
  };
  run([&](T* p) { G::relu_forward(p, n); }, [&](const T* y, T* p) { G::relu_backward(y, p, n); },
      [&](float* p) { ref::relu_forward(p, n); }, [&](const float* y, float* p) { ref::relu_backward(y, p, n); }, "relu");
  run([&](T* p) { G::leaky_relu_forward(p, n, 0.2f); }, [&](const T* y, T* p) { G::leaky_relu_backward(y, p, n, 0.2f); },
      [&](float* p) { ref::leaky_relu_forward(p, n, 0.2f); },
      [&](const float* y, float* p) { ref::leaky_relu_backward(y, p, n, 0.2f); }, "leaky_relu");
  run([&](T* p) { G::sigmoid_forward(p, n); }, [&](const T* y, T* p) { G::sigmoid_backward(y, p, n); },
      [&](float* p) { ref::sigmoid_forward(p, n); }, [&](const float* y, float* p) { ref::sigmoid_backward(y, p, n); },
      "sigmoid");
  run([&](T* p) { G::tanh_forward(p, n); }, [&](const T* y, T* p) { G::tanh_backward(y, p, n); },
      [&](float* p) { ref::tanh_forward(p, n); }, [&](const float* y, float* p) { ref::tanh_backward(y, p, n); }, "tanh");
  run([&](T* p) { G::softmax_forward(p, rows, cols); }, [&](const T* y, T* p) { G::softmax_backward(y, p, rows, cols); },
      [&](float* p) { ref::softmax_forward(p, rows, cols); },
      [&](const float* y, float* p) { ref::softmax_backward(y, p, rows, cols); }, "softmax");
}

TEST_CASE_TEMPLATE("sparse softmax cross-entropy (float32 inside) matches the CPU loss", T, CTNN_STORAGE_TYPES) {
  CTNN_REQUIRE_DEVICE();
  constexpr std::size_t rows = 50, cols = 10;
  const auto z = rounded<T>(random_values(rows * cols, 12, -8.0f, 8.0f));
  std::vector<std::int32_t> labels(rows);
  for (std::size_t i = 0; i < rows; ++i) labels[i] = std::int32_t((i * 7) % cols);
  std::vector<float> want_d(rows * cols);
  double want = 0;
  const double scale = 1.0 / rows;
  for (std::size_t i = 0; i < rows; ++i) {
    const std::int32_t l = labels[i];
    want += ctnn::kernels::cpu::crossentropy_logits_row_reference(
        z.data() + i * cols, [l](std::size_t j) { return j == std::size_t(l) ? 1.0 : 0.0; }, cols,
        want_d.data() + i * cols, scale);
  }
  auto dz = to_device<T>(z);
  ctnn::device_buffer<std::int32_t> dl(rows);
  dl.upload(labels.data(), rows);
  ctnn::device_buffer<T> dd(rows * cols);
  const double got = G::sparse_crossentropy_logits(dz.data(), dl.data(), rows, cols, dd.data(), scale);
  CHECK(std::abs(got - want) <= 1e-5 * std::abs(want));
  CHECK_CLOSE(T, to_host(dd, rows * cols), want_d);
  labels[17] = 10;  // out of range
  dl.upload(labels.data(), rows);
  CHECK_THROWS_WITH_AS(G::sparse_crossentropy_logits(dz.data(), dl.data(), rows, cols, dd.data(), scale),
                       doctest::Contains("sample 17"), std::out_of_range);
}

// ---- optimizer updates: map with the rules of kernels/functors.hpp on the device against the CPU's map ----
namespace {
// Each optimizer's choice of rule and slots (optimizers/*.hpp), through O::map.
template <class O, class T>
bool adam_update(T* w, const T* g, T* m, T* v, T* vh, std::size_t n, float a, float b1, float b2, float eps, bool ams) {
  if (ams) return O::map(ctnn::fn::amsgrad_update<float>{a, b1, b2, eps}, n, w, g, m, v, vh);
  return O::map(ctnn::fn::adam_update<float>{a, b1, b2, eps}, n, w, g, m, v);
}
template <class O, class T>
bool adagrad_update(T* w, const T* g, T* acc, std::size_t n, float lr, float eps) {
  return O::map(ctnn::fn::adagrad_update<float>{lr, eps}, n, w, g, acc);
}
template <class O, class T>
bool sgd_update(T* w, const T* g, T* m, std::size_t n, float lr, float mom, bool nesterov) {
  if (mom == 0.0f) return O::map(ctnn::fn::sgd_update<float>{lr}, n, w, g);
  return O::map(ctnn::fn::momentum_update<float>{lr, mom, nesterov}, n, w, g, m);
}
template <class O, class T>
bool rmsprop_update(T* w, const T* g, T* vel, T* mb, T* avg, std::size_t n, float lr, float r, float r1, float eps,
                    float mom, bool centered) {
  namespace fn = ctnn::fn;
  if (centered && mom > 0) return O::map(fn::rmsprop_update<float, true, true>{lr, r, r1, eps, mom}, n, w, g, vel, avg, mb);
  if (centered) return O::map(fn::rmsprop_update<float, true, false>{lr, r, r1, eps, mom}, n, w, g, vel, avg);
  if (mom > 0) return O::map(fn::rmsprop_update<float, false, true>{lr, r, r1, eps, mom}, n, w, g, vel, mb);
  return O::map(fn::rmsprop_update<float, false, false>{lr, r, r1, eps, mom}, n, w, g, vel);
}
struct update_case {
  std::vector<float> w, g, s1, s2, s3;
  static update_case make(std::size_t n, std::uint32_t seed) {
    update_case c;
    c.w = random_values(n, seed);
    c.g = random_values(n, seed + 1);
    c.s1 = random_values(n, seed + 2, 0.0f, 0.5f);
    c.s2 = random_values(n, seed + 3, 0.0f, 0.5f);
    c.s3 = random_values(n, seed + 4, 0.0f, 0.5f);
    return c;
  }
};
}  // namespace

TEST_CASE("every optimizer update and option matches the CPU, and reports non-finite weights") {
  CTNN_REQUIRE_DEVICE();
  const std::size_t n = 1000;
  auto check = [&](const char* what, auto dev, auto cpu) {
    INFO(what);
    auto c = update_case::make(n, 20);
    auto w = to_device<float>(c.w), g = to_device<float>(c.g), a = to_device<float>(c.s1), b = to_device<float>(c.s2),
         h = to_device<float>(c.s3);
    const bool fin = dev(w.data(), g.data(), a.data(), b.data(), h.data());
    const bool cfin = cpu(c.w.data(), c.g.data(), c.s1.data(), c.s2.data(), c.s3.data());
    CHECK(fin == cfin);
    CHECK_CLOSE(float, to_host(w, n), c.w);
    CHECK_CLOSE(float, to_host(a, n), c.s1);
    CHECK_CLOSE(float, to_host(b, n), c.s2);
    CHECK_CLOSE(float, to_host(h, n), c.s3);
  };
  for (bool ams : {false, true})
    check(ams ? "adam amsgrad" : "adam",
          [&](float* w, float* g, float* m, float* v, float* vh) { return adam_update<G>(w, g, m, v, vh, n, 1e-3f, 0.1f, 1e-3f, 1e-7f, ams); },
          [&](float* w, float* g, float* m, float* v, float* vh) { return adam_update<C>(w, g, m, v, vh, n, 1e-3f, 0.1f, 1e-3f, 1e-7f, ams); });
  check("adagrad", [&](float* w, float* g, float* a, float*, float*) { return adagrad_update<G>(w, g, a, n, 0.01f, 1e-7f); },
        [&](float* w, float* g, float* a, float*, float*) { return adagrad_update<C>(w, g, a, n, 0.01f, 1e-7f); });
  for (float mom : {0.0f, 0.9f})
    for (bool nest : {false, true})
      check("sgd", [&](float* w, float* g, float* m, float*, float*) { return sgd_update<G>(w, g, m, n, 0.01f, mom, nest); },
            [&](float* w, float* g, float* m, float*, float*) { return sgd_update<C>(w, g, m, n, 0.01f, mom, nest); });
  for (float mom : {0.0f, 0.5f})
    for (bool centered : {false, true})
      check("rmsprop",
            [&](float* w, float* g, float* v, float* mb, float* av) { return rmsprop_update<G>(w, g, v, mb, av, n, 1e-3f, 0.9f, 0.1f, 1e-7f, mom, centered); },
            [&](float* w, float* g, float* v, float* mb, float* av) { return rmsprop_update<C>(w, g, v, mb, av, n, 1e-3f, 0.9f, 0.1f, 1e-7f, mom, centered); });
  // a NaN gradient makes a weight NaN: the flag says so, on both
  auto c = update_case::make(n, 30);
  c.g[123] = std::nanf("");
  auto w = to_device<float>(c.w), g = to_device<float>(c.g), m = to_device<float>(c.s1);
  CHECK_FALSE(sgd_update<G>(w.data(), g.data(), m.data(), n, 0.01f, 0.0f, false));
  CHECK_FALSE(sgd_update<C>(c.w.data(), c.g.data(), c.s1.data(), n, 0.01f, 0.0f, false));
  // and the next clean update reports finite again (the flag is per call)
  auto w2 = to_device<float>(random_values(n, 31)), g2 = to_device<float>(random_values(n, 32));
  CHECK(sgd_update<G>(w2.data(), g2.data(), m.data(), n, 0.01f, 0.0f, false));

  // the options' phases: norms, clipping, accumulation, moving average
  const auto v = random_values(n, 40);
  double sq = 0;
  for (float x : v) sq += double(x) * x;
  auto dv = to_device<float>(v);
  CHECK(std::abs(G::sum_squares(dv.data(), n) - sq) <= 1e-5 * sq);
  G::clip_by_norm(dv.data(), n, 1.0);
  CHECK(std::abs(G::sum_squares(dv.data(), n) - 1.0) <= 1e-5);
  auto cv = to_device<float>(v);
  G::clip_value(cv.data(), n, 0.25f);
  auto want = v;
  for (auto& x : want) x = std::clamp(x, -0.25f, 0.25f);
  CHECK_CLOSE(float, to_host(cv, n), want);
  auto acc = to_device<float>(std::vector<float>(n, 0.0f)), gg = to_device<float>(v);
  G::accumulate(acc.data(), gg.data(), n);
  G::accumulated_mean(gg.data(), acc.data(), n, 0.5f);  // (v + v) / 2 = v, acc zeroed
  CHECK_CLOSE(float, to_host(gg, n), v);
  CHECK(to_host(acc, n) == std::vector<float>(n, 0.0f));
  auto avg = to_device<float>(std::vector<float>(n, 1.0f));
  G::moving_average(avg.data(), gg.data(), n, 0.75f);
  for (auto& x : want = v) x = 0.75f + 0.25f * x;
  CHECK_CLOSE(float, to_host(avg, n), want);
  // fill, unscale and all_finite, as ops<cpu> (the same functors)
  auto fv = to_device<float>(v);
  CHECK(G::all_finite(fv.data(), n));
  CHECK(G::unscale(fv.data(), n, 0.5f));
  for (auto& x : want = v) x *= 0.5f;
  CHECK(to_host(fv, n) == want);
  G::fill(fv.data(), n, 3.0f);
  CHECK(to_host(fv, n) == std::vector<float>(n, 3.0f));
  auto nv = v;
  nv[n - 1] = std::numeric_limits<float>::infinity();
  auto dn = to_device<float>(nv);
  CHECK_FALSE(G::all_finite(dn.data(), n));
  CHECK_FALSE(G::unscale(dn.data(), n, 0.5f));
  CHECK_FALSE(C::unscale(nv.data(), n, 0.5f));
}

TEST_CASE("add_penalty into the step's scalars and the factor-pointer penalty gradient match the CPU") {
  CTNN_REQUIRE_DEVICE();
  const std::size_t n = 3000;
  const auto w = random_values(n, 70);
  auto dw = to_device<float>(w);
  ctnn::device_buffer<ctnn::step_scalars> ds{1};
  ctnn::device_buffer<float> df{1};
  auto scalars_of = [&] {
    ctnn::step_scalars s;
    ds.download(&s, 1);
    return s;
  };
  for (const float factor : {0.5f, -1.0f, std::numeric_limits<float>::quiet_NaN()}) {
    INFO("factor = " << factor);
    ctnn::step_scalars h, c;
    h.penalty = c.penalty = 0.25;
    ds.upload(&h, 1);
    df.upload(&factor, 1);
    G::add_penalty(dw.data(), n, 0.01f, 0.02f, ds.data());        // l1_l2's
    C::add_penalty(w.data(), n, 0.01f, 0.02f, &c);
    G::add_penalty(dw.data(), n, 0.0f, 1.0f, df.data(), ds.data());  // dynamic_l2's
    C::add_penalty(w.data(), n, 0.0f, 1.0f, &factor, &c);
    const ctnn::step_scalars g = scalars_of();
    if (factor >= 0) CHECK(std::abs(g.penalty - c.penalty) <= 1e-5 * std::abs(c.penalty));
    else CHECK(std::isnan(g.penalty));
    CHECK(std::isnan(c.penalty) == std::isnan(g.penalty));
    CHECK(g.loss_sum == 0.0);
    CHECK(g.non_finite == 0);
    auto grad = random_values(n, 71);
    auto dg = to_device<float>(grad);
    G::add_penalty_gradient(dw.data(), dg.data(), n, 1.0f, 0.0f, df.data());  // dynamic_l1's
    C::add_penalty_gradient(w.data(), grad.data(), n, 1.0f, 0.0f, &factor);
    const auto got = to_host(dg, n);
    if (factor >= 0) CHECK_CLOSE(float, got, grad);
    else CHECK(std::isnan(got[0]));
  }
}

TEST_CASE_TEMPLATE("the updates in 16-bit storage match the CPU from the same rounded values", T, __half, __nv_bfloat16) {
  CTNN_REQUIRE_DEVICE();
  const std::size_t n = 512;
  auto c = update_case::make(n, 50);
  for (auto* v : {&c.w, &c.g, &c.s1, &c.s2, &c.s3}) *v = rounded<T>(*v);
  auto w = to_device<T>(c.w), g = to_device<T>(c.g), m = to_device<T>(c.s1), v = to_device<T>(c.s2), h = to_device<T>(c.s3);
  CHECK(adam_update<G>(w.data(), g.data(), m.data(), v.data(), h.data(), n, 1e-2f, 0.1f, 1e-3f, 1e-7f, false));
  CHECK(adam_update<C>(c.w.data(), c.g.data(), c.s1.data(), c.s2.data(), c.s3.data(), n, 1e-2f, 0.1f, 1e-3f, 1e-7f, false));
  CHECK_CLOSE(T, to_host(w, n), c.w);
  CHECK_CLOSE(T, to_host(m, n), c.s1);
}

// ---- convolution and pooling: geometries with padding and strides ----
namespace {
constexpr ctnn::kernels::conv_geometry conv_valid{7, 6, 3, 5, 3, 3, 1, 5, 4, 0, 0};
constexpr ctnn::kernels::conv_geometry conv_same_s2{7, 6, 3, 4, 3, 3, 2, 4, 3, 1, 1};
constexpr ctnn::kernels::conv_geometry pool_22{6, 8, 5, 5, 2, 2, 2, 3, 4, 0, 0};
constexpr ctnn::kernels::conv_geometry pool_33_s2_same{7, 7, 4, 4, 3, 3, 2, 4, 4, 1, 1};
constexpr ctnn::kernels::conv_geometry pool_33_s1{5, 5, 2, 2, 3, 3, 1, 3, 3, 0, 0};
}  // namespace

template <ctnn::kernels::conv_geometry Geo, class T>
void check_conv() {
  const std::size_t batch = 3;
  const auto x = rounded<T>(random_values(batch * Geo.in_size(), 60)), w = rounded<T>(random_values(Geo.patch() * Geo.f, 61)),
             b = rounded<T>(random_values(Geo.f, 62)), dy = rounded<T>(random_values(batch * Geo.out_size(), 63));
  std::vector<float> y(batch * Geo.out_size()), dw(Geo.patch() * Geo.f), db(Geo.f), dx(batch * Geo.in_size());
  ref::conv_forward(Geo, x.data(), w.data(), b.data(), y.data(), batch);
  ref::conv_backward(Geo, x.data(), w.data(), dy.data(), dw.data(), db.data(), dx.data(), batch);
  auto gx = to_device<T>(x), gw = to_device<T>(w), gb = to_device<T>(b), gdy = to_device<T>(dy);
  ctnn::device_buffer<T> gy(y.size()), cols(batch * Geo.oh * Geo.ow * Geo.patch()), gdw(dw.size()), gdb(db.size()),
      gdx(dx.size());
  G::conv_forward<Geo>(gx.data(), gw.data(), gb.data(), gy.data(), cols.data(), batch);
  CHECK_CLOSE(T, to_host(gy, y.size()), y);
  G::conv_backward<Geo>(gdy.data(), gw.data(), gdw.data(), gdb.data(), gdx.data(), cols.data(), batch);
  CHECK_CLOSE(T, to_host(gdw, dw.size()), dw);
  CHECK_CLOSE(T, to_host(gdb, db.size()), db);
  CHECK_CLOSE(T, to_host(gdx, dx.size()), dx);
}

TEST_CASE_TEMPLATE("conv2d (im2col + cuBLASLt + col2im) matches the direct reference", T, CTNN_STORAGE_TYPES) {
  CTNN_REQUIRE_DEVICE();
  check_conv<conv_valid, T>();
  check_conv<conv_same_s2, T>();
}

template <ctnn::kernels::conv_geometry Geo, class T>
void check_pool() {
  const std::size_t batch = 2, nin = batch * Geo.in_size(), nout = batch * Geo.oh * Geo.ow * Geo.c;
  const auto x = rounded<T>(random_values(nin, 70)), dy = rounded<T>(random_values(nout, 71));
  // the CPU's scalar loops (their own reference) in float
  std::vector<float> y(nout), dx(nin), ya(nout), dxa(nin);
  std::vector<std::uint32_t> idx(nout);
  ctnn::kernels::cpu::max_pool_forward_scalar<Geo>(x.data(), y.data(), reinterpret_cast<unsigned char*>(idx.data()), batch);
  ctnn::kernels::cpu::max_pool_backward_scalar<Geo>(reinterpret_cast<const unsigned char*>(idx.data()), dy.data(),
                                                    dx.data(), batch);
  ctnn::kernels::cpu::average_pool_forward<Geo>(x.data(), ya.data(), batch);
  ctnn::kernels::cpu::average_pool_backward<Geo>(dy.data(), dxa.data(), batch);
  auto gx = to_device<T>(x), gdy = to_device<T>(dy);
  ctnn::device_buffer<T> gy(nout), gdx(nin);
  ctnn::device_buffer<std::uint32_t> gidx(nout);
  G::max_pool_forward<Geo>(gx.data(), gy.data(), gidx.data(), batch);
  CHECK_CLOSE(T, to_host(gy, nout), y);
  std::vector<std::uint32_t> hidx(nout);
  gidx.download(hidx.data(), nout);
  CHECK(hidx == idx);
  G::max_pool_backward<Geo>(gidx.data(), gdy.data(), gdx.data(), batch);
  CHECK_CLOSE(T, to_host(gdx, nin), dx);
  G::average_pool_forward<Geo>(gx.data(), gy.data(), batch);
  CHECK_CLOSE(T, to_host(gy, nout), ya);
  G::average_pool_backward<Geo>(gdy.data(), gdx.data(), batch);
  CHECK_CLOSE(T, to_host(gdx, nin), dxa);
}

TEST_CASE_TEMPLATE("max and average pooling (valid, same, overlapping) match the CPU", T, CTNN_STORAGE_TYPES) {
  CTNN_REQUIRE_DEVICE();
  check_pool<pool_22, T>();
  check_pool<pool_33_s2_same, T>();
  check_pool<pool_33_s1, T>();
  constexpr std::size_t P = 12, Ch = 7, batch = 3;
  const auto x = rounded<T>(random_values(batch * P * Ch, 80)), dy = rounded<T>(random_values(batch * Ch, 81));
  std::vector<float> y(batch * Ch), dx(batch * P * Ch);
  C::global_average_forward<P, Ch>(x.data(), y.data(), batch);
  C::global_average_backward<P, Ch>(dy.data(), dx.data(), batch);
  auto gx = to_device<T>(x), gdy = to_device<T>(dy);
  ctnn::device_buffer<T> gy(y.size()), gdx(dx.size());
  G::global_average_forward<P, Ch>(gx.data(), gy.data(), batch);
  G::global_average_backward<P, Ch>(gdy.data(), gdx.data(), batch);
  CHECK_CLOSE(T, to_host(gy, y.size()), y);
  CHECK_CLOSE(T, to_host(gdx, dx.size()), dx);
}

// layer_normalization (issue 29): forward (y, the cached means and inverse stds) and backward against ops<cpu<>>
TEST_CASE_TEMPLATE("layer normalization forward and backward match the CPU", T, CTNN_STORAGE_TYPES) {
  CTNN_REQUIRE_DEVICE();
  constexpr std::size_t C = 24, rows = 70;
  const auto x = rounded<T>(random_values(rows * C, 95)), dy = rounded<T>(random_values(rows * C, 96));
  const auto gamma = rounded<T>(random_values(C, 97, 0.5f, 1.5f)), beta = rounded<T>(random_values(C, 98));
  std::vector<float> y(rows * C), mean(rows), inv(rows), dx(rows * C), dg(C), db(C);
  C_ops::layer_norm_forward<C>(x.data(), y.data(), gamma.data(), beta.data(), mean.data(), inv.data(), rows, 1e-3);
  C_ops::layer_norm_backward<C>(x.data(), dy.data(), dx.data(), gamma.data(), mean.data(), inv.data(), dg.data(),
                                db.data(), rows);
  auto gx = to_device<T>(x), gdy = to_device<T>(dy), gg = to_device<T>(gamma), gb = to_device<T>(beta);
  ctnn::device_buffer<T> gy(y.size()), gm(rows), gi(rows), gdx(dx.size()), gdg(C), gdb(C);
  G::layer_norm_forward<C>(gx.data(), gy.data(), gg.data(), gb.data(), gm.data(), gi.data(), rows, 1e-3);
  G::layer_norm_backward<C>(gx.data(), gdy.data(), gdx.data(), gg.data(), gm.data(), gi.data(), gdg.data(), gdb.data(),
                            rows);
  CHECK_CLOSE(T, to_host(gy, y.size()), y);
  CHECK_CLOSE(T, to_host(gdx, dx.size()), dx);
  CHECK_CLOSE(T, to_host(gdg, C), dg);
  CHECK_CLOSE(T, to_host(gdb, C), db);
}

// zero_padding2d and up_sampling2d (issue 29): the four ops against ops<cpu<>> on the same rounded values
TEST_CASE_TEMPLATE("zero padding and nearest up-sampling forward and backward match the CPU", T, CTNN_STORAGE_TYPES) {
  CTNN_REQUIRE_DEVICE();
  constexpr std::size_t batch = 3;
  constexpr ctnn::kernels::conv_geometry pad{5, 4, 3, 3, 1, 1, 1, 5 + 1 + 2, 4 + 3 + 0, 1, 3};
  constexpr ctnn::kernels::conv_geometry up{5, 4, 3, 3, 2, 3, 1, 10, 12, 0, 0};
  auto check = [&](auto forward_c, auto backward_c, auto forward_g, auto backward_g, const ctnn::kernels::conv_geometry& g) {
    const auto x = rounded<T>(random_values(batch * g.in_size(), 90)), dy = rounded<T>(random_values(batch * g.oh * g.ow * g.c, 91));
    std::vector<float> y(dy.size()), dx(x.size());
    forward_c(x.data(), y.data());
    backward_c(dy.data(), dx.data());
    auto gx = to_device<T>(x), gdy = to_device<T>(dy);
    ctnn::device_buffer<T> gy(y.size()), gdx(dx.size());
    forward_g(gx.data(), gy.data());
    backward_g(gdy.data(), gdx.data());
    CHECK_CLOSE(T, to_host(gy, y.size()), y);
    CHECK_CLOSE(T, to_host(gdx, dx.size()), dx);
  };
  check([](const float* x, float* y) { C::zero_pad_forward<pad>(x, y, batch); },
        [](const float* dy, float* dx) { C::zero_pad_backward<pad>(dy, dx, batch); },
        [](const T* x, T* y) { G::zero_pad_forward<pad>(x, y, batch); },
        [](const T* dy, T* dx) { G::zero_pad_backward<pad>(dy, dx, batch); }, pad);
  check([](const float* x, float* y) { C::up_sample_forward<up>(x, y, batch); },
        [](const float* dy, float* dx) { C::up_sample_backward<up>(dy, dx, batch); },
        [](const T* x, T* y) { G::up_sample_forward<up>(x, y, batch); },
        [](const T* dy, T* dx) { G::up_sample_backward<up>(dy, dx, batch); }, up);
}

// depthwise_conv2d and separable_conv2d (issue 29): depthwise_forward / backward against ops<cpu<>> on the
// same rounded values: depth multipliers 1 and 2, same padding and stride 2, with and without a bias
TEST_CASE_TEMPLATE("the depthwise convolution forward and backward match the CPU", T, CTNN_STORAGE_TYPES) {
  CTNN_REQUIRE_DEVICE();
  constexpr std::size_t batch = 3;
  constexpr ctnn::kernels::conv_geometry one = ctnn::window_geometry(7, 6, 20, 20, 3, 3, 1, ctnn::padding::same);
  constexpr ctnn::kernels::conv_geometry two = ctnn::window_geometry(9, 8, 3, 6, 3, 2, 2, ctnn::padding::valid);
  auto check = [&]<ctnn::kernels::conv_geometry Geo, std::size_t M>(bool bias) {
    const auto x = rounded<T>(random_values(batch * Geo.in_size(), 80)), dz = rounded<T>(random_values(batch * Geo.out_size(), 81));
    const auto w = rounded<T>(random_values(Geo.kh * Geo.kw * Geo.f, 82)), b = rounded<T>(random_values(Geo.f, 83));
    std::vector<float> y(dz.size()), dw(w.size()), db(Geo.f), dx(x.size());
    C_ops::depthwise_forward<Geo, M>(x.data(), w.data(), bias ? b.data() : nullptr, y.data(), batch);
    C_ops::depthwise_backward<Geo, M>(x.data(), dz.data(), w.data(), dw.data(), bias ? db.data() : nullptr, dx.data(), batch);
    auto gx = to_device<T>(x), gdz = to_device<T>(dz), gw = to_device<T>(w), gb = to_device<T>(b);
    ctnn::device_buffer<T> gy(y.size()), gdw(dw.size()), gdb(Geo.f), gdx(dx.size());
    G::depthwise_forward<Geo, M>(gx.data(), gw.data(), bias ? gb.data() : static_cast<const T*>(nullptr), gy.data(), batch);
    G::depthwise_backward<Geo, M>(gx.data(), gdz.data(), gw.data(), gdw.data(), bias ? gdb.data() : static_cast<T*>(nullptr),
                                  gdx.data(), batch);
    CHECK_CLOSE(T, to_host(gy, y.size()), y);
    CHECK_CLOSE(T, to_host(gdw, dw.size()), dw);
    CHECK_CLOSE(T, to_host(gdx, dx.size()), dx);
    if (bias) CHECK_CLOSE(T, to_host(gdb, Geo.f), db);
  };
  check.template operator()<one, 1>(true);
  check.template operator()<one, 1>(false);
  check.template operator()<two, 2>(true);
}

// ---- the sparse dense products of every layout (sparse_products.cuh) against ops<cpu<>> on the same packed index ----
namespace {
// Layer L (a sparse layout bound on cpu<>, float32) initialised on the host (its own init: a valid index),
// then forward and backward (relu fused; dx) on both backends at batches 1 and 70 (three warps of samples).
template <class L>
void check_sparse_layout() {
  constexpr std::size_t K = L::K, N = L::N, NNZ = L::NNZ, bytes = L::index::bytes;
  INFO("layout: " << L::name());
  std::vector<float> params(NNZ + N);
  std::vector<std::byte> meta(bytes);
  ctnn::rng g(5);
  ctnn::layer_slot<float> s;
  s.params = params.data();
  s.metadata = meta.data();
  L::init(s, g);
  const auto bias = random_values(N, 4);
  std::copy(bias.begin(), bias.end(), params.begin() + NNZ);
  ctnn::device_buffer<std::uint8_t> dmeta(bytes);
  dmeta.upload(reinterpret_cast<const std::uint8_t*>(meta.data()), bytes);
  auto dparams = to_device<float>(params);
  const auto hv = L::view(meta.data());
  const auto dv = L::view(reinterpret_cast<const std::byte*>(dmeta.data()));
  for (std::size_t m : {1, 70}) {
    for (bool relu : {false, true}) {
      const auto x = random_values(m * K, 6), dz = random_values(m * N, 7);
      std::vector<float> y(m * N), scratch((K + N) * m), dvalues(NNZ, 0.0f), db(N), dx(m * K);
      C::sparse_dense_forward<K, N>(hv, x.data(), params.data(), params.data() + NNZ, y.data(), m, relu, scratch.data());
      C::sparse_dense_backward<K, N>(hv, x.data(), dz.data(), params.data(), dvalues.data(), db.data(), dx.data(), m);
      auto gx = to_device<float>(x), gdz = to_device<float>(dz), gdv = to_device<float>(std::vector<float>(NNZ, 0.0f));
      ctnn::device_buffer<float> gy(m * N), gdb(N), gdx(m * K);
      G::sparse_dense_forward<K, N>(dv, gx.data(), dparams.data(), dparams.data() + NNZ, gy.data(), m, relu,
                                    static_cast<float*>(nullptr));
      G::sparse_dense_backward<K, N>(dv, gx.data(), gdz.data(), dparams.data(), gdv.data(), gdb.data(), gdx.data(), m);
      CHECK_CLOSE(float, to_host(gy, m * N), y);
      CHECK_CLOSE(float, to_host(gdv, NNZ), dvalues);
      CHECK_CLOSE(float, to_host(gdb, N), db);
      CHECK_CLOSE(float, to_host(gdx, m * K), dx);
    }
  }
}
template <class Spec, std::size_t K>
using bound_sparse = typename Spec::template bind<ctnn::shape<K>, ctnn::precision::float32, ctnn::cpu<>>;
}  // namespace

TEST_CASE("sparse dense products of every layout (bitmap, csc, rows, N:M) match the CPU") {
  CTNN_REQUIRE_DEVICE();
  // 37 units: three bitmap chunks, the last 5 wide; 2:4 and 3:8 (3-bit codes that straddle bytes)
  check_sparse_layout<bound_sparse<ctnn::sparse_dense<45, 37, 600>, 45>>();
  check_sparse_layout<bound_sparse<ctnn::sparse_dense_csc<45, 37, 600>, 45>>();
  check_sparse_layout<bound_sparse<ctnn::sparse_dense_rows<45, 37, 600>, 45>>();
  check_sparse_layout<bound_sparse<ctnn::sparse_dense_nm<44, 37, 2, 4>, 44>>();
  check_sparse_layout<bound_sparse<ctnn::sparse_dense_nm<48, 37, 3, 8>, 48>>();
}

// map_rows (issue 27: the recurrent cells' and the masks' rules, layers/recurrent.hpp): the LSTM's
// forward rule over the gate blocks of a [rows, 4U] array (stride 4U) and [rows, U] states, a row
// broadcast (stride 0), and a rule with two by-reference outputs, against ops<cpu<>>::map_rows.
template <class X>
using strided = ctnn::kernels::rows<X>;  // row r at data + r * stride
TEST_CASE_TEMPLATE("map_rows over row-strided arrays (gate blocks, a stride of 0) matches the CPU", T,
                   CTNN_STORAGE_TYPES) {
  CTNN_REQUIRE_DEVICE();
  constexpr std::size_t nr = 37, U = 11, Gt = 4 * U;
  const auto z0 = rounded<T>(random_values(nr * Gt, 150, -3.0f, 3.0f)), r0 = rounded<T>(random_values(nr * Gt, 151));
  const auto cp0 = rounded<T>(random_values(nr * U, 152)), m0 = rounded<T>(random_values(nr * U, 153, 0.0f, 1.0f));
  // the CPU: z (gates out), c, h
  std::vector<float> z = z0, c(nr * U), h(nr * U);
  C::map_rows(ctnn::lstm_cell::forward_rule{}, nr, U, strided<float>{z.data(), Gt}, strided<float>{z.data() + U, Gt},
              strided<float>{z.data() + 2 * U, Gt}, strided<float>{z.data() + 3 * U, Gt},
              strided<const float>{r0.data(), Gt}, strided<const float>{r0.data() + U, Gt},
              strided<const float>{r0.data() + 2 * U, Gt}, strided<const float>{r0.data() + 3 * U, Gt},
              strided<const float>{cp0.data(), U}, strided<float>{c.data(), U}, strided<float>{h.data(), U});
  auto gz = to_device<T>(z0), gr = to_device<T>(r0), gcp = to_device<T>(cp0);
  ctnn::device_buffer<T> gc(nr * U), gh(nr * U);
  G::map_rows(ctnn::lstm_cell::forward_rule{}, nr, U, strided<T>{gz.data(), Gt}, strided<T>{gz.data() + U, Gt},
              strided<T>{gz.data() + 2 * U, Gt}, strided<T>{gz.data() + 3 * U, Gt}, strided<const T>{gr.data(), Gt},
              strided<const T>{gr.data() + U, Gt}, strided<const T>{gr.data() + 2 * U, Gt},
              strided<const T>{gr.data() + 3 * U, Gt}, strided<const T>{gcp.data(), U}, strided<T>{gc.data(), U},
              strided<T>{gh.data(), U});
  CHECK_CLOSE(T, to_host(gz, z.size()), z);
  CHECK_CLOSE(T, to_host(gc, c.size()), c);
  CHECK_CLOSE(T, to_host(gh, h.size()), h);
  // one row (the first of r0's) added to every row of block 1 of z: a stride of 0; the other blocks untouched
  std::vector<float> a = z0;
  C::map_rows(ctnn::detail::add_fn{}, nr, U, strided<float>{a.data() + U, Gt}, strided<const float>{r0.data(), 0});
  auto ga = to_device<T>(z0);
  G::map_rows(ctnn::detail::add_fn{}, nr, U, strided<T>{ga.data() + U, Gt}, strided<const T>{gr.data(), 0});
  CHECK_CLOSE(T, to_host(ga, a.size()), a);
  // two outputs: dh to the cell where m != 0, else to pass (the masked steps' split)
  std::vector<float> m = m0;
  for (std::size_t i = 0; i < m.size(); i += 3) m[i] = 0.0f;
  std::vector<float> d = cp0, pass(nr * U, 7.0f);
  C::map_rows(ctnn::detail::split_masked_fn{}, nr, U, strided<float>{d.data(), U}, strided<float>{pass.data(), U},
              strided<const float>{m.data(), U});
  auto gd = to_device<T>(cp0), gm = to_device<T>(m), gp = to_device<T>(std::vector<float>(nr * U, 7.0f));
  G::map_rows(ctnn::detail::split_masked_fn{}, nr, U, strided<T>{gd.data(), U}, strided<T>{gp.data(), U},
              strided<const T>{gm.data(), U});
  CHECK(to_host(gd, d.size()) == d);  // selections: the same bits
  CHECK(to_host(gp, pass.size()) == pass);
  // nothing to do: no launch
  G::map_rows(ctnn::detail::add_fn{}, 0, U, strided<T>{ga.data(), Gt}, strided<const T>{gr.data(), Gt});
  G::map_rows(ctnn::detail::add_fn{}, nr, 0, strided<T>{ga.data(), Gt}, strided<const T>{gr.data(), Gt});
  CHECK_CLOSE(T, to_host(ga, a.size()), a);
}

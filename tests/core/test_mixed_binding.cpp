// Mixed precision in the plan (core/sequential.hpp, core/plan.hpp,
// train/model.hpp): under a policy whose variable and compute types differ the
// layers are bound with ONE compute type, the plan adds the compute-type copy
// of the parameters and their compute-type gradients, the model refreshes the
// copy from the float32 variables and widens the gradients into them. The
// 16-bit ops (backends/cpu/half_ops.hpp: convert, float32 kernel, round) are
// checked bit for bit against the float32 ops run by hand on the rounded values.
#include <ctnn/mixed_precision.hpp>

#include <doctest/doctest.h>

#include <ctnn/layers/sparse_dense.hpp>
#include <ctnn/layers/sparse_dense_csc.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

using namespace ctnn;

namespace {

using net = sequential<input<5>, dense<3, sigmoid>, batch_norm, keep_float32<dense<2>>, dense<4>>;
using m16 = net::bound<precision::mixed_float16>;
using L1 = std::tuple_element_t<0, m16>;
using BN = std::tuple_element_t<1, m16>;
using K = std::tuple_element_t<2, m16>;
// one compute type per layer: float16 for the mixed layers, float for keep_float32
static_assert(std::is_same_v<L1::compute_type, float16_t> && std::is_same_v<L1::variable_type, float16_t>);
static_assert(std::is_same_v<BN::compute_type, float16_t> && std::is_same_v<BN::S, float>);  // moving statistics float32
static_assert(std::is_same_v<K::compute_type, float> && std::is_same_v<K::variable_type, float>);
// the variable binding (init, penalties) is the float32 binding
static_assert(std::is_same_v<std::tuple_element_t<0, net::variable_bound<precision::mixed_float16>>,
                             std::tuple_element_t<0, net::bound<precision::float32>>>);
// float32 and float64 bind every layer as before: no copies, no conversions
static_assert(std::is_same_v<net::bound<precision::float32>, net::variable_bound<precision::float32>>);
static_assert(net::plan<precision::float32>::bytes(role::compute_parameter, 1) == 0 &&
              net::plan<precision::float32>::bytes(role::compute_gradient, 1) == 0 &&
              net::plan<precision::float32>::bytes(role::converted, 8) == 0);
// under mixed_float16: copies for the three 16-bit layers (18, 6 and 12 values, 2 bytes, each block 64-byte
// aligned), none for keep_float32; the input (5 floats) and keep_float32's input converted, the logits widened
using plan16 = net::plan<precision::mixed_float16>;
static_assert(plan16::copies[0] && plan16::copies[1] && !plan16::copies[2] && plan16::copies[3]);
static_assert(plan16::bytes(role::compute_parameter, 1) == 3 * 64 && plan16::bytes(role::compute_gradient, 1) == 3 * 64);
static_assert(plan16::converts_input[0] && !plan16::converts_input[1] && plan16::converts_input[2] &&
              plan16::converts_input[3] && plan16::converts_output);
static_assert(plan16::bytes(role::parameter, 1) == net::plan<precision::float32>::bytes(role::parameter, 1));

std::vector<float> uniform(std::size_t n, std::uint64_t seed) {
  std::vector<float> v(n);
  rng g(seed);
  for (auto& x : v) x = float(g.uniform(-1.5, 1.5));
  return v;
}
template <class H>
std::vector<H> to_half(const std::vector<float>& v) {
  std::vector<H> h;
  for (float x : v) h.push_back(H(x));
  return h;
}
template <class H>
std::vector<float> round_trip(const std::vector<float>& v) {
  std::vector<float> r;
  for (float x : v) r.push_back(float(H(x)));
  return r;
}

}  // namespace

TEST_CASE_TEMPLATE("ops<cpu> on 16-bit values: the float32 op on the widened values, rounded", H, float16_t, bfloat16_t) {
  using F = ops<cpu<>>;
  constexpr std::size_t m = 3, K = 37, N = 19;
  const auto x = uniform(m * K, 1), w = uniform(K * N + N, 2), dy = uniform(m * N, 3);
  const auto xh = to_half<H>(x), wh = to_half<H>(w), dyh = to_half<H>(dy);
  const auto xr = round_trip<H>(x), wr = round_trip<H>(w), dyr = round_trip<H>(dy);
  // forward with the relu epilogue (AVX512-BF16 for bfloat16 where the CPU has it: other sums, so a tolerance)
  std::vector<H> yh(m * N);
  std::vector<float> yr(m * N);
  F::dense_forward<K, N>(xh.data(), wh.data(), wh.data() + K * N, yh.data(), m, fn::relu_fn{});
  F::dense_forward<K, N>(xr.data(), wr.data(), wr.data() + K * N, yr.data(), m, fn::relu_fn{});
  const bool exact = !(std::is_same_v<H, bfloat16_t> && kernels::cpu::has_avx512_bf16());
  for (std::size_t i = 0; i < m * N; ++i) {
    if (exact) CHECK(yh[i].bits == H(yr[i]).bits);
    else CHECK(float(yh[i]) == doctest::Approx(yr[i]).epsilon(1e-2));
  }
  // weight gradients and dx: float32 sums of the widened values, rounded once
  std::vector<H> dwh(K * N), dbh(N), dxh(m * K);
  std::vector<float> dwr(K * N), dbr(N), dxr(m * K);
  F::dense_backward_weights<K, N>(xh.data(), dyh.data(), dwh.data(), dbh.data(), m);
  F::dense_backward_weights<K, N>(xr.data(), dyr.data(), dwr.data(), dbr.data(), m);
  F::dense_backward_input<K, N>(dyh.data(), wh.data(), dxh.data(), m);
  F::dense_backward_input<K, N>(dyr.data(), wr.data(), dxr.data(), m);
  for (std::size_t i = 0; i < K * N; ++i) CHECK(dwh[i].bits == H(dwr[i]).bits);
  for (std::size_t i = 0; i < N; ++i) CHECK(dbh[i].bits == H(dbr[i]).bits);
  for (std::size_t i = 0; i < m * K; ++i) CHECK(dxh[i].bits == H(dxr[i]).bits);
  // an in-place activation and its backward
  std::vector<H> s = xh, d = to_half<H>(uniform(m * K, 4));
  std::vector<float> sr = xr, dr = round_trip<H>(uniform(m * K, 4));
  F::sigmoid_forward(s.data(), m * K);
  F::sigmoid_forward(sr.data(), m * K);
  for (std::size_t i = 0; i < m * K; ++i) CHECK(s[i].bits == H(sr[i]).bits);
  std::vector<float> sw;
  for (H v : s) sw.push_back(float(v));
  F::sigmoid_backward(s.data(), d.data(), m * K);
  F::sigmoid_backward(sw.data(), dr.data(), m * K);
  for (std::size_t i = 0; i < m * K; ++i) CHECK(d[i].bits == H(dr[i]).bits);
  // convert is the array conversion both ways
  std::vector<float> back(m * K);
  F::convert(xh.data(), back.data(), m * K);
  CHECK(back == xr);
}

TEST_CASE("mixed model: the layers compute with the rounded variables, a write reaches the next forward, gradients widened") {
  auto m = make_model<net, precision::mixed_float16>(5);
  const std::vector<float> x = uniform(4 * 5, 6);
  // the first layer computes with the rounded kernel (checked through a one-layer model)
  {
    using one = sequential<input<5>, dense<3>>;
    auto o = make_model<one, precision::mixed_float16>(5);
    const auto w = round_trip<float16_t>(std::vector<float>(o.parameters().begin(), o.parameters().begin() + 18));
    const auto xr = round_trip<float16_t>(x);
    std::vector<float> want(4 * 3);
    ops<cpu<>>::dense_forward<5, 3>(xr.data(), w.data(), w.data() + 15, want.data(), 4);
    const auto got = o.predict(x.data(), 4);
    for (std::size_t i = 0; i < want.size(); ++i) CHECK(got[i] == float(float16_t(want[i])));
    CHECK(w != std::vector<float>(o.parameters().begin(), o.parameters().begin() + 18));  // the variables are not rounded
  }
  // A write through parameters() reaches the next forward: a zero kernel and bias give sigmoid(0) = 0.5
  // for every first-layer output, so batch_norm in inference sees constant inputs.
  const auto before = m.predict(x.data(), 4);
  for (float& v : m.layer_parameters<0>()) v = 0;
  const auto after = m.predict(x.data(), 4);
  CHECK(before != after);
  for (std::size_t i = 1; i < 4; ++i)
    for (std::size_t j = 0; j < 4; ++j) CHECK(after[i * 4 + j] == after[j]);  // every row the same
  // backward: the float32 gradients are widened float16 values
  m.initialize(5);
  m.forward(x.data(), 4, true);
  for (std::size_t i = 0; i < 4 * 4; ++i) m.output_gradient()[i] = float(i % 5) * 0.25f - 0.5f;
  m.backward();
  std::size_t nonzero = 0;
  const auto g0 = m.layer_gradients<0>(), g3 = m.layer_gradients<3>(), g2 = m.layer_gradients<2>();
  for (const auto& gs : {g0, g3})
    for (float g : gs) {
      CHECK(float(float16_t(g)) == g);
      nonzero += g != 0;
    }
  CHECK(nonzero > 10);
  // keep_float32 writes float32 gradients directly: not all of them float16 values
  bool all_half = true;
  for (float g : g2) all_half = all_half && float(float16_t(g)) == g;
  CHECK_FALSE(all_half);
}

TEST_CASE("float16 model: init stores the float32 initial values rounded, forward computes with them") {
  auto a = make_model<net>(7);
  auto h = make_model<net, precision::float16>(7);
  const auto pa = a.parameters();
  const auto ph = h.parameters();
  REQUIRE(ph.size() * 2 >= pa.size());
  for (std::size_t i = 0; i < L1::parameter_count; ++i) CHECK(ph[i].bits == float16_t(pa[i]).bits);
  const auto st = h.state();
  for (float16_t v : st) CHECK((float(v) == 0.0f || float(v) == 1.0f));  // moving mean 0, variance 1
  const std::vector<float> x = uniform(2 * 5, 8);
  const auto ya = a.predict(x.data(), 2), yh = h.predict(x.data(), 2);
  for (std::size_t i = 0; i < ya.size(); ++i) CHECK(yh[i] == doctest::Approx(ya[i]).epsilon(2e-2));
}

TEST_CASE("the sparse layers compute in float32 under a 16-bit policy, within float16's precision of float32") {
  using sparse = sequential<input<20>, sparse_dense<20, 20, 60, ctnn::relu>, sparse_dense_csc<20, 5, 25, ctnn::relu>, dense<3>>;
  using bound = sparse::bound<precision::mixed_float16>;
  static_assert(std::is_same_v<std::tuple_element_t<0, bound>::compute_type, float> &&
                std::is_same_v<std::tuple_element_t<1, bound>::compute_type, float> &&
                std::is_same_v<std::tuple_element_t<2, bound>::compute_type, float16_t>);
  auto a = make_model<sparse>(3);
  auto b = make_model<sparse, precision::mixed_float16>(3);
  const std::vector<float> x = uniform(4 * 20, 9);
  const auto ya = a.predict(x.data(), 4), yb = b.predict(x.data(), 4);
  double worst = 0, largest = 0;
  for (std::size_t i = 0; i < ya.size(); ++i) {
    worst = std::max(worst, double(std::fabs(ya[i] - yb[i])));
    largest = std::max(largest, double(std::fabs(ya[i])));
  }
  CHECK(worst <= 2e-3 * std::max(1.0, largest));
  CHECK(worst > 0);  // the last layer rounds
}

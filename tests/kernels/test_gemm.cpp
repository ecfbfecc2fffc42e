// backends/cpu/gemm.hpp (the entry points layers call) against the scalar
// reference (kernels/reference.hpp) on awkward sizes (dW alone where db is null); column_sum (the
// bias gradient) bit for bit on every xsimd architecture this CPU runs
// (tests/kernels/archs.hpp); dense_forward with each activation rule of
// kernels/functors.hpp fused into the GEMM against the reference product
// followed by the scalar activation (kernels/activations_reference.hpp), on
// every architecture; the *_active forms (dense<up_to<N>>) against the reference
// on a copy of the first n columns, columns n.. untouched, on every architecture
// and the scalar path (xsimd::unavailable); the products over packed weights (pack_weights,
// dense_forward_packed, dense_backward_input_packed: a recurrent kernel) against the reference on
// every architecture and the scalar path, their packed size, and their bits on 1 to 3 threads;
// recurrent_row (one row's product with a cell's rule by blocks of units) against the product
// then the rule, every architecture and the scalar path; dense_forward_packed_sum and
// dense_backward_input_packed_add against sums in double, every architecture and the scalar path;
// step_weights_gradient (a recurrent layer's dW, dR and db one step at a time) against sums in double,
// every architecture and the scalar path, and its bits on 1 to 3 threads.
// activations.hpp has its own test_activations.cpp.
#include <doctest/doctest.h>

#include <ctnn/core/rng.hpp>
#include <ctnn/backends/cpu/activations.hpp>
#include <ctnn/backends/cpu/gemm.hpp>
#include <ctnn/kernels/activations_reference.hpp>
#include <ctnn/kernels/functors.hpp>
#include <ctnn/kernels/reference.hpp>

#include "kernels/archs.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

using namespace ctnn;

template <std::size_t K, std::size_t N>
void compare(std::size_t m) {
  rng g(K * 1000 + N + m);
  std::vector<float> x(m * K), w(K * N), b(N), dy(m * N);
  for (auto* v : {&x, &w, &b, &dy})
    for (auto& e : *v) e = float(g.uniform(-1, 1));
  std::vector<float> y(m * N), yr(m * N), dw(K * N), dwr(K * N), db(N), dbr(N), dx(m * K), dxr(m * K);
  kernels::cpu::dense_forward<K, N>(x.data(), w.data(), b.data(), y.data(), m);
  kernels::reference::gemm_nn(x.data(), w.data(), b.data(), yr.data(), m, K, N);
  kernels::cpu::dense_backward_weights<K, N>(x.data(), dy.data(), dw.data(), db.data(), m);
  kernels::reference::gemm_tn(x.data(), dy.data(), dwr.data(), m, K, N);
  kernels::reference::col_sum(dy.data(), dbr.data(), m, N);
  kernels::cpu::dense_backward_input<K, N>(dy.data(), w.data(), dx.data(), m);
  kernels::reference::gemm_nt(dy.data(), w.data(), dxr.data(), m, K, N);
  auto close = [](const std::vector<float>& a, const std::vector<float>& r, double scale) {
    double worst = 0;
    for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(double(a[i]) - r[i]));
    return worst <= 1e-5 * scale;
  };
  INFO("K=" << K << " N=" << N << " m=" << m);
  CHECK(close(y, yr, K));
  CHECK(close(dw, dwr, m));
  CHECK(close(db, dbr, m));
  CHECK(close(dx, dxr, N));
  std::vector<float> dw_only(K * N);  // db null: dW alone, the same bits
  kernels::cpu::dense_backward_weights<K, N>(x.data(), dy.data(), dw_only.data(), static_cast<float*>(nullptr), m);
  CHECK(dw_only == dw);
  // relu fused into the forward epilogue
  std::vector<float> yrelu(m * N);
  kernels::cpu::dense_forward<K, N, fn::relu_fn>(x.data(), w.data(), b.data(), yrelu.data(), m);
  for (auto& e : yr) e = std::max(e, 0.0f);
  CHECK(close(yrelu, yr, K));
}

TEST_CASE("dense kernels equal the reference on awkward sizes") {
  for (std::size_t m : {1, 3, 17, 64, 255}) {
    compare<1, 1>(m);
    compare<3, 17>(m);
    compare<17, 3>(m);
    compare<255, 33>(m);
    compare<784, 10>(m);
    compare<128, 10>(m);  // narrow_weights_gradient: whole panels of X
    compare<70, 7>(m);    // and a partial last panel
    compare<64, 256>(m);
    compare<300, 40>(m);
  }
}

TEST_CASE("dense kernels in double equal the reference") {
  for (std::size_t m : {1, 5, 40}) {
    std::vector<double> x(m * 33), w(33 * 19), b(19), y(m * 19), yr(m * 19);
    rng g(m);
    for (auto* v : {&x, &w, &b})
      for (auto& e : *v) e = g.uniform(-1, 1);
    kernels::cpu::dense_forward<33, 19>(x.data(), w.data(), b.data(), y.data(), m);
    kernels::reference::gemm_nn(x.data(), w.data(), b.data(), yr.data(), m, 33, 19);
    for (std::size_t i = 0; i < y.size(); ++i) CHECK(std::abs(y[i] - yr[i]) <= 1e-13);
  }
}

TEST_CASE("reference gemm on a 2x2 example") {
  const float x[4] = {1, 2, 3, 4}, w[4] = {5, 6, 7, 8};
  float y[4];
  kernels::reference::gemm_nn(x, w, static_cast<const float*>(nullptr), y, 2, 2, 2);
  CHECK(y[0] == 19);
  CHECK(y[1] == 22);
  CHECK(y[2] == 43);
  CHECK(y[3] == 50);
}

// column_sum adds 0 and then the rows in order, as reference::col_sum: equal bit for bit (also as
// the sum of the first rows continued with add).
template <std::size_t N, class T, class Arch>
void check_column_sum(const char* arch) {
  for (std::size_t m : {0, 1, 3, 17}) {
    INFO(std::string(arch) << " N=" << N << " m=" << m << " float=" << std::is_same_v<T, float>);
    rng g(N * 100 + m);
    std::vector<T> dy(m * N + 1);  // + 1: a non-null pointer when m = 0
    for (auto& e : dy) e = T(g.uniform(-1, 1));
    std::vector<T> db(N + 3, T(7)), dbr(N);
    kernels::cpu::column_sum<N, T, Arch>(dy.data(), db.data(), m);
    kernels::reference::col_sum(dy.data(), dbr.data(), m, N);
    CHECK(std::equal(dbr.begin(), dbr.end(), db.begin()));
    CHECK(std::count(db.begin() + N, db.end(), T(7)) == 3);  // nothing written past N
    // add: the first half of the rows, then the rest added to it: the same sums, the same bits
    std::vector<T> db2(N + 3, T(7));
    kernels::cpu::column_sum<N, T, Arch>(dy.data(), db2.data(), m / 2);
    kernels::cpu::column_sum<N, T, Arch>(dy.data() + m / 2 * N, db2.data(), m - m / 2, true);
    CHECK(std::equal(dbr.begin(), dbr.end(), db2.begin()));
  }
}

template <class T, class Arch>
void check_column_sums(const char* arch) {
  check_column_sum<1, T, Arch>(arch);
  check_column_sum<3, T, Arch>(arch);
  check_column_sum<17, T, Arch>(arch);
  check_column_sum<64, T, Arch>(arch);  // a conv's 64 channels: one group of 4 vectors (AVX-512 floats)
  check_column_sum<255, T, Arch>(arch);
  check_column_sum<512, T, Arch>(arch);  // whole groups of 8 vectors (an LSTM(128)'s 4 gates)
  check_column_sum<1000, T, Arch>(arch);
}

TEST_CASE("column_sum equals reference::col_sum bit for bit on every architecture this CPU runs") {
  const int ran = test::for_each_arch("column_sum", [](auto arch, const char* name) {
    check_column_sums<float, decltype(arch)>(name);
    check_column_sums<double, decltype(arch)>(name);
  });
  CHECK(ran >= 1);  // x86-64 always has SSE2
}

namespace {
// y = act(x W + b) fused (rule E) against the reference GEMM and then the scalar activation.
template <class T, class Arch, std::size_t K, std::size_t N, bool IdentityOnly = false>
void compare_fused(std::size_t m, const char* arch) {
  rng g(K * 7 + N * 3 + m);
  std::vector<T> x(m * K), w(K * N), b(N);
  for (auto* v : {&x, &w, &b})
    for (auto& e : *v) e = T(g.uniform(-1, 1));
  std::vector<T> pre(m * N);
  kernels::reference::gemm_nn(x.data(), w.data(), b.data(), pre.data(), m, K, N);
  const double tol = (std::is_same_v<T, float> ? 2e-5 : 1e-12) * double(K);
  auto check = [&](auto rule, auto reference, const char* name) {
    std::vector<T> y(m * N), want = pre;
    kernels::cpu::dense_forward<K, N, decltype(rule), Arch>(x.data(), w.data(), b.data(), y.data(), m, rule);
    reference(want.data(), want.size());
    double worst = 0;
    for (std::size_t i = 0; i < y.size(); ++i) worst = std::max(worst, std::abs(double(y[i]) - double(want[i])));
    INFO(arch << " " << name << " K=" << K << " N=" << N << " m=" << m << " float=" << std::is_same_v<T, float>);
    CHECK(worst <= tol);
  };
  namespace ref = kernels::reference;
  check(fn::identity_fn{}, [](T*, std::size_t) {}, "identity");
  if constexpr (!IdentityOnly) {
    check(fn::sigmoid_fn{}, [](T* p, std::size_t n) { ref::sigmoid_forward(p, n); }, "sigmoid");
    check(fn::tanh_fn{}, [](T* p, std::size_t n) { ref::tanh_forward(p, n); }, "tanh");
    check(fn::leaky_relu_fn<T>{T(0.1)}, [](T* p, std::size_t n) { ref::leaky_relu_forward(p, n, T(0.1)); }, "leaky_relu");
    check(fn::relu_fn{}, [](T* p, std::size_t n) { ref::relu_forward(p, n); }, "relu");
  }
}
template <class T, class Arch, std::size_t K, std::size_t N>
void compare_identity(std::size_t m, const char* arch) {
  compare_fused<T, Arch, K, N, true>(m, arch);
}
// Each rule on an edge-only shape (17 x 3) and a shape of several K blocks and a partial
// column panel (300 x 40), every m; the two other shapes (whole panels; a narrow N over a
// long K) with the identity only (the GEMM itself) in float. Each instantiation is a whole
// GEMM per architecture: every rule on all four shapes in both types made this file one of
// the suite's two slowest to compile (110 s of CPU at -O3, loaded machine; 80 s after).
template <class T, class Arch>
void compare_fused_sizes(const char* arch) {
  for (std::size_t m : {1, 3, 17, 64, 255}) {
    compare_fused<T, Arch, 17, 3>(m, arch);
    compare_fused<T, Arch, 300, 40>(m, arch);
    if constexpr (std::is_same_v<T, float>) {
      compare_identity<T, Arch, 64, 256>(m, arch);
      compare_identity<T, Arch, 784, 10>(m, arch);
    }
  }
}
}  // namespace

TEST_CASE("dense_forward fuses sigmoid, tanh, leaky_relu and relu into the GEMM on every architecture") {
  const int ran = test::for_each_arch("fused dense epilogues", [](auto arch, const char* name) {
    compare_fused_sizes<float, decltype(arch)>(name);
    compare_fused_sizes<double, decltype(arch)>(name);
  });
  CHECK(ran >= 1);
}

namespace {
// The three products at active width n of N against the reference on the narrow copies; the
// columns n.. of y, dw and db keep their sentinel.
template <class Arch>
void compare_active(const char* arch) {
  constexpr std::size_t K = 37, N = 24;
  for (std::size_t n : {1, 7, 24})
    for (std::size_t m : {1, 5, 64}) {
      rng g(n * 100 + m);
      std::vector<float> x(m * K), w(K * N), b(N), dy(m * N);
      for (auto* v : {&x, &w, &b, &dy})
        for (auto& e : *v) e = float(g.uniform(-1, 1));
      std::vector<float> wn(K * n), dyn(m * n);
      for (std::size_t k = 0; k < K; ++k) std::copy(w.begin() + k * N, w.begin() + k * N + n, wn.begin() + k * n);
      for (std::size_t i = 0; i < m; ++i) std::copy(dy.begin() + i * N, dy.begin() + i * N + n, dyn.begin() + i * n);
      std::vector<float> yr(m * n), dwr(K * n), dbr(n), dxr(m * K);
      kernels::reference::gemm_nn(x.data(), wn.data(), b.data(), yr.data(), m, K, n);
      for (auto& e : yr) e = std::max(e, 0.0f);
      kernels::reference::gemm_tn(x.data(), dyn.data(), dwr.data(), m, K, n);
      kernels::reference::col_sum(dyn.data(), dbr.data(), m, n);
      kernels::reference::gemm_nt(dyn.data(), wn.data(), dxr.data(), m, K, n);
      const float sentinel = 1234.5f;
      std::vector<float> y(m * N, sentinel), dw(K * N, sentinel), db(N, sentinel), dx(m * K);
      kernels::cpu::dense_forward_active<K, N, fn::relu_fn, Arch>(x.data(), w.data(), b.data(), y.data(), m, n, fn::relu_fn{});
      kernels::cpu::dense_backward_weights_active<K, N, Arch>(x.data(), dy.data(), dw.data(), db.data(), m, n);
      kernels::cpu::dense_backward_input_active<K, N, Arch>(dy.data(), w.data(), dx.data(), m, n);
      INFO(arch << " n=" << n << " m=" << m);
      double worst = 0;
      std::size_t touched = 0;
      for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < N; ++j)
          if (j < n) worst = std::max(worst, std::abs(double(y[i * N + j]) - yr[i * n + j]) / K);
          else touched += y[i * N + j] != sentinel;
      for (std::size_t k = 0; k < K; ++k)
        for (std::size_t j = 0; j < N; ++j)
          if (j < n) worst = std::max(worst, std::abs(double(dw[k * N + j]) - dwr[k * n + j]) / double(m));
          else touched += dw[k * N + j] != sentinel;
      for (std::size_t j = 0; j < N; ++j)
        if (j < n) worst = std::max(worst, std::abs(double(db[j]) - dbr[j]) / double(m));
        else touched += db[j] != sentinel;
      for (std::size_t i = 0; i < m * K; ++i) worst = std::max(worst, std::abs(double(dx[i]) - dxr[i]) / double(n));
      CHECK(worst <= 1e-5);
      CHECK(touched == 0);
    }
}
}  // namespace

TEST_CASE("dense *_active products equal the reference on the first n columns and leave the others, every architecture") {
  const int ran = test::for_each_arch("dense active-width products", [](auto arch, const char* name) {
    compare_active<decltype(arch)>(name);
  });
  CHECK(ran >= 1);
  compare_active<xsimd::unavailable>("scalar");
}

// ---- the products over weights packed once (a recurrent kernel: gemm.hpp's pack_weights) ----
namespace {
// the packed size: the larger of W's panels (NR columns, K rows) and W^T's, NR one or two vectors
static_assert(kernels::cpu::packed_size<128, 512, float, xsimd::sse2> == 512 * 128);
static_assert(kernels::cpu::packed_size<17, 68, float, xsimd::sse2> == 3 * 8 * 68);   // W^T: 3 panels of 8, 68 rows
static_assert(kernels::cpu::packed_size<17, 68, double, xsimd::sse2> == 5 * 4 * 68);  // 2 lanes: panels of 4
static_assert(kernels::cpu::packed_size<17, 68, float, xsimd::unavailable> == 0);  // no SIMD: w read as it lies
#if XSIMD_WITH_AVX512F
static_assert(kernels::cpu::packed_size<17, 68, float, xsimd::avx512f> == 32 * 68);  // W^T: one panel of 32 (W: 3 x 32 x 17)
static_assert(kernels::cpu::packed_size<128, 384, double, xsimd::avx512f> == 384 * 128);
#endif

template <class Arch, std::size_t K, std::size_t N>
void compare_packed(const char* name, std::size_t m) {
  CAPTURE(name);
  CAPTURE(K);
  CAPTURE(N);
  CAPTURE(m);
  rng g(K * 100 + N + m);
  std::vector<float> x(m * K), w(K * N), b(N), dy(m * N);
  for (auto* v : {&x, &w, &b, &dy})
    for (auto& e : *v) e = float(g.uniform(-1, 1));
  constexpr std::size_t size = kernels::cpu::packed_size<K, N, float, Arch>;
  const float sentinel = 7.5f;
  std::vector<float> packed(size + 1, sentinel), y(m * N), yr(m * N), dx(m * K), dxr(m * K);
  kernels::reference::gemm_nn(x.data(), w.data(), b.data(), yr.data(), m, K, N);
  kernels::reference::gemm_nt(dy.data(), w.data(), dxr.data(), m, K, N);
  kernels::cpu::pack_weights<K, N, Arch>(w.data(), packed.data(), m);
  // below packed_rows rows nothing is packed (the products read w)
  const bool packs = size > 0 && m >= kernels::cpu::packed_rows;
  CHECK((std::count(packed.begin(), packed.end(), sentinel) == std::ptrdiff_t(size + 1)) == !packs);
  CHECK(packed[size] == sentinel);
  kernels::cpu::dense_forward_packed<K, N, fn::identity_fn, Arch>(x.data(), w.data(), packed.data(), b.data(), y.data(), m);
  std::fill(packed.begin(), packed.end(), sentinel);
  kernels::cpu::pack_weights_transposed<K, N, Arch>(w.data(), packed.data(), m);
  CHECK(packed[size] == sentinel);
  kernels::cpu::dense_backward_input_packed<K, N, Arch>(dy.data(), w.data(), packed.data(), dx.data(), m);
  double worst = 0;
  for (std::size_t i = 0; i < m * N; ++i) worst = std::max(worst, std::abs(double(y[i]) - yr[i]) / double(K));
  for (std::size_t i = 0; i < m * K; ++i) worst = std::max(worst, std::abs(double(dx[i]) - dxr[i]) / double(N));
  CHECK(worst <= 1e-6);
}
}  // namespace

TEST_CASE("packed dense products equal the reference, every architecture") {
  auto shapes = [](auto arch, const char* name) {
    using A = decltype(arch);
    for (std::size_t m : {1, 7, 16, 64}) {  // 16: packed_rows
      compare_packed<A, 128, 512>(name, m);  // lstm(128): U x 4U
      compare_packed<A, 128, 384>(name, m);  // gru(128)
      compare_packed<A, 17, 68>(name, m);    // odd sizes: lstm(17)
    }
  };
  const int ran = test::for_each_arch("packed dense products", shapes);
  CHECK(ran >= 1);
  shapes(xsimd::unavailable{}, "scalar");
}

TEST_CASE("packed dense products give the same bits on 1, 2 and 3 threads") {
  const std::size_t before = kernels::cpu::threads();
  constexpr std::size_t K = 128, N = 512, m = 64;  // lstm(128)'s step at batch 64: past the parallel threshold
  rng g(5);
  std::vector<float> x(m * K), w(K * N), b(N), dy(m * N), packed(kernels::cpu::packed_size<K, N, float>);
  for (auto* v : {&x, &w, &b, &dy})
    for (auto& e : *v) e = float(g.uniform(-1, 1));
  std::vector<std::vector<float>> out;
  for (std::size_t t : {1, 2, 3}) {
    kernels::cpu::set_threads(t);
    std::vector<float> y(m * N + m * K);
    kernels::cpu::pack_weights<K, N>(w.data(), packed.data(), m);
    kernels::cpu::dense_forward_packed<K, N>(x.data(), w.data(), packed.data(), b.data(), y.data(), m);
    kernels::cpu::pack_weights_transposed<K, N>(w.data(), packed.data(), m);
    kernels::cpu::dense_backward_input_packed<K, N>(dy.data(), w.data(), packed.data(), y.data() + m * N, m);
    out.push_back(std::move(y));
  }
  kernels::cpu::set_threads(before);
  CHECK(out[0] == out[1]);
  CHECK(out[0] == out[2]);
}

// ---- the weights gradient read in place (gemm.hpp's weights_gradient_in_place; a recurrent layer's dW) ----
namespace {
template <class Arch, std::size_t K, std::size_t N, class T>
void compare_in_place_gradient(const char* name, std::size_t m) {
  CAPTURE(name);
  CAPTURE(K);
  CAPTURE(N);
  CAPTURE(m);
  rng g(K * 10 + N + m);
  std::vector<T> x(m * K), dy(m * N), dw(K * N, T(9)), dwr(K * N), db(N, T(9)), dbr(N), dw2(K * N, T(9));
  for (auto* v : {&x, &dy})
    for (auto& e : *v) e = T(g.uniform(-1, 1));
  kernels::reference::gemm_tn(x.data(), dy.data(), dwr.data(), m, K, N);
  kernels::reference::col_sum(dy.data(), dbr.data(), m, N);
  kernels::cpu::weights_gradient_in_place<K, N, Arch>(x.data(), dy.data(), dw.data(), m, db.data());
  kernels::cpu::weights_gradient_in_place<K, N, Arch>(x.data(), dy.data(), dw2.data(), m);  // no db
  double worst = 0;
  for (std::size_t i = 0; i < K * N; ++i) worst = std::max(worst, std::abs(double(dw[i]) - dwr[i]) / double(m + 1));
  CHECK(worst <= (std::is_same_v<T, float> ? 1e-6 : 1e-14));
  CHECK(dw2 == dw);
  CHECK(db == dbr);  // the rows in order, as reference::col_sum: the same bits
}
}  // namespace

TEST_CASE("weights_gradient_in_place (and its column sums) equals the reference, every architecture, and the same bits on 1, 2 and 3 threads") {
  auto shapes = [](auto arch, const char* name) {
    using A = decltype(arch);
    if constexpr (kernels::cpu::in_place_weights_gradient_v<28, 512, float, A>) {
      // (the ASan builds catch a read past the end of dy: a partial panel, a narrow N)
      for (std::size_t m : {0, 1, 2, 5, 300}) {  // 300: past a block of 128 rows
        compare_in_place_gradient<A, 28, 512, float>(name, m);  // an LSTM(128)'s dW over 28 features
        compare_in_place_gradient<A, 12, 20, float>(name, m);   // tiles of 8 (6) and 4 rows, a partial panel
        compare_in_place_gradient<A, 4, 17, float>(name, m);    // one vector and one lane
        compare_in_place_gradient<A, 4, 8, double>(name, m);
      }
    }
    static_assert(!kernels::cpu::in_place_weights_gradient_v<28, 3, float, A>);  // N below a vector
    static_assert(!kernels::cpu::in_place_weights_gradient_v<9, 512, float, A>);  // K % MR neither 0 nor 4
  };
  const int ran = test::for_each_arch("in-place weights gradient", shapes);
  CHECK(ran >= 1);
  const std::size_t before = kernels::cpu::threads();
  constexpr std::size_t K = 28, N = 512, m = 1792;  // past the parallel threshold
  rng g(6);
  std::vector<float> x(m * K), dy(m * N);
  for (auto* v : {&x, &dy})
    for (auto& e : *v) e = float(g.uniform(-1, 1));
  std::vector<std::vector<float>> out;
  for (std::size_t t : {1, 2, 3}) {
    kernels::cpu::set_threads(t);
    std::vector<float> dw(K * N + N);
    kernels::cpu::weights_gradient_in_place<K, N>(x.data(), dy.data(), dw.data(), m, dw.data() + K * N);
    out.push_back(std::move(dw));
  }
  kernels::cpu::set_threads(before);
  CHECK(out[0] == out[1]);
  CHECK(out[0] == out[2]);
}

// ---- one row's recurrent step (gemm.hpp's recurrent_row: the product and a cell's rule by blocks of units) ----
namespace {
// out = sum_g (g + 1) r_g + z (a stand-in for a cell's gate rule), seen counts the calls per unit
struct gate_mix {
  template <class V, class... R>
  void operator()(V& out, V& seen, V z, R... r) const {
    V s = z, k(1);
    ((s = s + k * r, k = k + V(1)), ...);
    out = s;
    seen = seen + V(1);
  }
};
template <class Arch, class T, std::size_t K, std::size_t U, std::size_t G>
void compare_recurrent_row(const char* name) {
  CAPTURE(name);
  CAPTURE(K);
  CAPTURE(U);
  CAPTURE(G);
  rng g(K * 10 + U + G);
  std::vector<T> x(K), w(K * G * U), b(G * U), z(U);
  for (auto* v : {&x, &w, &b, &z})
    for (auto& e : *v) e = T(g.uniform(-1, 1));
  for (int pass = 0; pass < 4; ++pass) {
    const bool bias = pass % 2, reverse = pass / 2;  // reverse: blocks and rows last to first (other rounding)
    CAPTURE(bias);
    CAPTURE(reverse);
    const T* bp = bias ? b.data() : nullptr;
    std::vector<T> rec(G * U, T(7)), out(U, T(7)), seen(U, T(0)), rec2(G * U), out2(U), seen2(U, T(0));
    auto gates = [&]<std::size_t... I>(std::index_sequence<I...>, T* r) {
      return std::array<const T*, G>{(r + I * U)...};
    };
    const auto rg = gates(std::make_index_sequence<G>{}, rec.data()), rg2 = gates(std::make_index_sequence<G>{}, rec2.data());
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      kernels::cpu::recurrent_row<K, U, G, Arch>(gate_mix{}, x.data(), w.data(), bp, rec.data(), reverse, out.data(), seen.data(),
                                                 static_cast<const T*>(z.data()), rg[I]...);
      // the unfused steps: the one-row product, then the rule over every unit
      kernels::cpu::dense_forward<K, G * U, fn::identity_fn, Arch>(x.data(), w.data(), bp, rec2.data(), 1);
      kernels::cpu::map_range<Arch>(gate_mix{}, 0, U, out2.data(), seen2.data(), static_cast<const T*>(z.data()), rg2[I]...);
    }(std::make_index_sequence<G>{});
    std::vector<T> want(G * U);
    kernels::reference::gemm_nn(x.data(), w.data(), bp, want.data(), 1, K, G * U);
    double worst = 0;
    for (std::size_t j = 0; j < G * U; ++j) worst = std::max(worst, std::abs(double(rec[j]) - double(want[j])));
    CHECK(worst <= (std::is_same_v<T, float> ? 1e-6 : 1e-14) * double(K));
    CHECK(std::count(seen.begin(), seen.end(), T(1)) == std::ptrdiff_t(U));  // the rule ran once on every unit
    double apart = 0;
    for (std::size_t j = 0; j < U; ++j) apart = std::max(apart, std::abs(double(out[j]) - double(out2[j])));
    CHECK(apart <= (std::is_same_v<T, float> ? 1e-6 : 1e-14) * double(K * G));
    // G U in whole chunks of the gemv's 8 vectors (lstm(128), gru(128)), rows in order: the same sums
    // in the same order, the same bits (the gemv's last columns, past its chunks, add two partial sums)
    bool whole = !reverse;
    if constexpr (kernels::cpu::simd_v<T, Arch>) whole = whole && G * U % (8 * xsimd::batch<T, Arch>::size) == 0;
    if (whole) {
      CHECK(rec == rec2);
      CHECK(out == out2);
    }
  }
}
}  // namespace

TEST_CASE("recurrent_row equals the one-row product then the rule (lstm, gru, simple_rnn shapes), every architecture") {
  auto shapes = [](auto arch, const char* name) {
    using A = decltype(arch);
    compare_recurrent_row<A, float, 128, 128, 4>(name);  // lstm(128)
    compare_recurrent_row<A, float, 128, 128, 3>(name);  // gru(128)
    compare_recurrent_row<A, float, 40, 40, 1>(name);    // simple_rnn(40): 2 vectors and a partial one (AVX-512)
    compare_recurrent_row<A, float, 17, 17, 4>(name);    // odd: a partial vector
    compare_recurrent_row<A, float, 33, 80, 3>(name);    // blocks of several vectors, then of one
    compare_recurrent_row<A, double, 128, 128, 4>(name);
    compare_recurrent_row<A, double, 7, 7, 3>(name);
  };
  const int ran = test::for_each_arch("recurrent_row", shapes);
  CHECK(ran >= 1);
  shapes(xsimd::unavailable{}, "scalar");
}

// ---- a recurrent step's whole pre-activation over two packed weights (dense_forward_packed_sum) ----
namespace {
template <class Arch, class T, std::size_t KX, std::size_t KH, std::size_t N>
void compare_packed_sum(const char* name, std::size_t m) {
  CAPTURE(name);
  CAPTURE(KX);
  CAPTURE(KH);
  CAPTURE(N);
  CAPTURE(m);
  rng g(KX * 1000 + KH * 10 + m);
  std::vector<T> x(m * KX), h(m * KH), w(KX * N), r(KH * N), b(N);
  for (auto* v : {&x, &h, &w, &r, &b})
    for (auto& e : *v) e = T(g.uniform(-1, 1));
  std::vector<T> pw(kernels::cpu::packed_size<KX, N, T, Arch> + 1), pr(kernels::cpu::packed_size<KH, N, T, Arch> + 1);
  kernels::cpu::pack_weights<KX, N, Arch>(w.data(), pw.data(), m);
  kernels::cpu::pack_weights<KH, N, Arch>(r.data(), pr.data(), m);
  for (bool with_h : {true, false}) {  // h null: b + x W
    CAPTURE(with_h);
    std::vector<T> z(m * N + 1, T(7.5));  // one past the end: untouched
    kernels::cpu::dense_forward_packed_sum<KX, KH, N, Arch>(x.data(), w.data(), pw.data(), with_h ? h.data() : nullptr,
                                                            r.data(), pr.data(), b.data(), z.data(), m);
    double worst = 0;
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < N; ++j) {
        double s = double(b[j]);
        for (std::size_t p = 0; p < KX; ++p) s += double(x[i * KX + p]) * double(w[p * N + j]);
        if (with_h)
          for (std::size_t p = 0; p < KH; ++p) s += double(h[i * KH + p]) * double(r[p * N + j]);
        worst = std::max(worst, std::abs(double(z[i * N + j]) - s));
      }
    CHECK(worst <= (std::is_same_v<T, float> ? 1e-6 : 1e-14) * double(KX + KH));
    CHECK(z[m * N] == T(7.5));
  }
}
// dense_backward_input_packed_add: dx += dy W^T over W packed transposed (a recurrent layer's dh += dz R^T)
template <class Arch, class T, std::size_t K, std::size_t N>
void compare_packed_add(const char* name, std::size_t m) {
  CAPTURE(name);
  CAPTURE(K);
  CAPTURE(N);
  CAPTURE(m);
  rng g(K * 10 + N + m);
  std::vector<T> dy(m * N), w(K * N), dx(m * K + 1, T(7.5)), packed(kernels::cpu::packed_size<K, N, T, Arch>);
  for (auto* v : {&dy, &w})
    for (auto& e : *v) e = T(g.uniform(-1, 1));
  for (std::size_t i = 0; i < m * K; ++i) dx[i] = T(g.uniform(-1, 1));
  const std::vector<T> dx0 = dx;
  kernels::cpu::pack_weights_transposed<K, N, Arch>(w.data(), packed.data(), m);
  kernels::cpu::dense_backward_input_packed_add<K, N, Arch>(dy.data(), w.data(), packed.data(), dx.data(), m);
  double worst = 0;
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t k = 0; k < K; ++k) {
      double s = double(dx0[i * K + k]);
      for (std::size_t j = 0; j < N; ++j) s += double(dy[i * N + j]) * double(w[k * N + j]);
      worst = std::max(worst, std::abs(double(dx[i * K + k]) - s));
    }
  CHECK(worst <= (std::is_same_v<T, float> ? 1e-6 : 1e-14) * double(N));
  CHECK(dx[m * K] == T(7.5));
}
}  // namespace

TEST_CASE("dense_backward_input_packed_add equals dx + dy W^T (a recurrent layer's dh += dz R^T), every architecture") {
  auto shapes = [](auto arch, const char* name) {
    using A = decltype(arch);
    for (std::size_t m : {7, 16, 37, 64}) compare_packed_add<A, float, 128, 512>(name, m);  // lstm(128): K blocks of dz
    compare_packed_add<A, float, 20, 80>(name, 17);  // lstm(20): a partial panel
    compare_packed_add<A, double, 7, 28>(name, 17);
  };
  const int ran = test::for_each_arch("dense_backward_input_packed_add", shapes);
  CHECK(ran >= 1);
  shapes(xsimd::unavailable{}, "scalar");
}

TEST_CASE("dense_forward_packed_sum equals b + x W + h R (an LSTM step's pre-activation), every architecture") {
  auto shapes = [](auto arch, const char* name) {
    using A = decltype(arch);
    for (std::size_t m : {7, 16, 37, 64}) compare_packed_sum<A, float, 28, 128, 512>(name, m);  // lstm(128) on 28 features
    compare_packed_sum<A, float, 9, 20, 80>(name, 17);     // lstm(20): a partial panel
    compare_packed_sum<A, float, 5, 300, 36>(name, 16);    // h in K blocks (300 > block_k_max)
    compare_packed_sum<A, double, 4, 7, 28>(name, 17);
  };
  const int ran = test::for_each_arch("dense_forward_packed_sum", shapes);
  CHECK(ran >= 1);
  shapes(xsimd::unavailable{}, "scalar");
}

// ---- one step's weight gradients (gemm.hpp's step_weights_gradient: a recurrent layer's dW, dR, db per step) ----
namespace {
// steps of m rows each, summed last step first (as the layer calls it): dW = sum x_t^T dz_t, dR = the
// same over h_t (step 0 without h), db = the column sums; against sums in double, and the one call over
// every step against those calls bit for bit; the outputs start from 9 (init overwrites them), and a
// value past each array is not written
template <class Arch, class T, std::size_t KX, std::size_t KH, std::size_t N>
void compare_step_weights(const char* name, std::size_t m, std::size_t steps, bool parallel = false) {
  CAPTURE(name);
  CAPTURE(KX);
  CAPTURE(KH);
  CAPTURE(N);
  CAPTURE(m);
  rng g(KX * 10 + KH + N + m);
  std::vector<T> x(steps * m * KX), h(steps * m * KH), dz(steps * m * N), dw(KX * N + 1, T(9)), dr(KH * N + 1, T(9)),
      db(N + 1, T(9));
  for (auto* v : {&x, &h, &dz})
    for (auto& e : *v) e = T(g.uniform(-1, 1));
  for (std::size_t t = steps; t-- > 0;)
    kernels::cpu::step_weights_gradient<KX, KH, N, Arch>(x.data() + t * m * KX, t > 0 ? h.data() + t * m * KH : nullptr,
                                                         dz.data() + t * m * N, dw.data(), dr.data(), db.data(), m,
                                                         t == steps - 1, parallel);
  // every step in one call (step 0 without h): the same bits
  std::vector<T> dw1(dw.size(), T(9)), dr1(dr.size(), T(9)), db1(db.size(), T(9));
  kernels::cpu::step_weights_gradient<KX, KH, N, Arch>(x.data(), h.data(), dz.data(), dw1.data(), dr1.data(), db1.data(),
                                                       m, true, parallel, steps);
  CHECK(dw1 == dw);
  CHECK(dr1 == dr);
  CHECK(db1 == db);
  double worst = 0;
  auto check = [&](const std::vector<T>& a, std::size_t k, std::size_t first_step) {
    for (std::size_t i = 0; i < k; ++i)
      for (std::size_t j = 0; j < N; ++j) {
        double s = 0;
        for (std::size_t t = first_step; t < steps; ++t)
          for (std::size_t p = 0; p < m; ++p) {
            const std::size_t row = t * m + p;
            s += (&a == &x ? double(x[row * KX + i]) : double(h[row * KH + i])) * double(dz[row * N + j]);
          }
        worst = std::max(worst, std::abs(double((&a == &x ? dw : dr)[i * N + j]) - s));
      }
  };
  check(x, KX, 0);
  check(h, KH, 1);
  for (std::size_t j = 0; j < N; ++j) {
    double s = 0;
    for (std::size_t row = 0; row < steps * m; ++row) s += double(dz[row * N + j]);
    worst = std::max(worst, std::abs(double(db[j]) - s));
  }
  CHECK(worst <= (std::is_same_v<T, float> ? 1e-6 : 1e-14) * double(steps * m));
  CHECK(dw[KX * N] == T(9));
  CHECK(dr[KH * N] == T(9));
  CHECK(db[N] == T(9));
}
}  // namespace

TEST_CASE("step_weights_gradient equals x^T dz, h^T dz and the column sums over steps (a recurrent layer's dW, dR, db), every architecture, and the same bits on 1, 2 and 3 threads") {
  auto shapes = [](auto arch, const char* name) {
    using A = decltype(arch);
    for (std::size_t m : {1, 16, 37, 64}) compare_step_weights<A, float, 28, 128, 512>(name, m, 3);  // lstm(128)
    compare_step_weights<A, float, 9, 20, 80>(name, 17, 4);  // tails of 1 and 4 (MR 8) or 3 and 2 (MR 6) rows, a partial panel
    compare_step_weights<A, float, 5, 7, 17>(name, 16, 2);   // tails below 4 and above, one lane past a vector
    compare_step_weights<A, double, 4, 7, 28>(name, 17, 3);
    compare_step_weights<A, float, 9, 20, 80>(name, 500, 2, true);  // panels over the pool (from 2 threads)
  };
  const int ran = test::for_each_arch("step_weights_gradient", shapes);
  CHECK(ran >= 1);
  shapes(xsimd::unavailable{}, "scalar");
  const std::size_t before = kernels::cpu::threads();
  constexpr std::size_t KX = 28, KH = 128, N = 512, m = 64;
  rng g(8);
  std::vector<float> x(m * KX), h(m * KH), dz(m * N);
  for (auto* v : {&x, &h, &dz})
    for (auto& e : *v) e = float(g.uniform(-1, 1));
  std::vector<std::vector<float>> out;
  for (std::size_t t : {1, 2, 3}) {
    kernels::cpu::set_threads(t);
    std::vector<float> w((KX + KH + 1) * N);
    for (int step = 0; step < 2; ++step)
      kernels::cpu::step_weights_gradient<KX, KH, N>(x.data(), h.data(), dz.data(), w.data(), w.data() + KX * N,
                                                     w.data() + (KX + KH) * N, m, step == 0, true);
    out.push_back(std::move(w));
  }
  kernels::cpu::set_threads(before);
  CHECK(out[0] == out[1]);
  CHECK(out[0] == out[2]);
}

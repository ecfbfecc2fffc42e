// backends/cpu/conv.hpp (im2col + GEMM, and the direct kernels of a small
// patch) against kernels/conv_reference.hpp (direct loops): forward,
// weight/bias gradients and input gradients for valid and same padding,
// strides 1-3, one and several channels, on every architecture (archs.hpp);
// the rule that picks the direct kernels; conv_forward's epilogue (the activation's rule as each
// output is stored) against the rule's pass after it; the same bits whatever the thread count;
// batch_split.hpp's for_samples covers the batch once, in contiguous ranges; for_fixed_chunks' chunks and
// sum_chunks' bits do not depend on the thread count.
#include <doctest/doctest.h>

#include <ctnn/core/rng.hpp>
#include <ctnn/backends/cpu/batch_split.hpp>
#include <ctnn/backends/cpu/conv.hpp>
#include <ctnn/backends/cpu/thread_pool.hpp>
#include <ctnn/layers/padding.hpp>

#include "kernels/archs.hpp"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <utility>
#include <vector>

using namespace ctnn;
using kernels::conv_geometry;

namespace {

template <std::size_t H, std::size_t W, std::size_t C, std::size_t F, std::size_t KH, std::size_t KW, std::size_t S,
          padding P>
constexpr conv_geometry geom() {
  return {H,
          W,
          C,
          F,
          KH,
          KW,
          S,
          padded_out(H, KH, S, P),
          padded_out(W, KW, S, P),
          pad_before(H, KH, S, P),
          pad_before(W, KW, S, P)};
}

double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::abs(double(a[i]) - b[i]) / std::max(1.0, std::abs(double(b[i]))));
  return m;
}

template <conv_geometry G, class Arch = kernels::cpu::default_arch>
void compare(std::size_t batch) {
  rng g(G.h * 131 + G.c * 7 + G.stride);
  std::vector<float> x(batch * G.in_size()), w(G.patch() * G.f), b(G.f), dy(batch * G.out_size());
  for (auto* v : {&x, &w, &b, &dy})
    for (auto& e : *v) e = float(g.uniform(-1, 1));
  std::vector<float> y_fast(dy.size()), y_ref(dy.size()), cols(batch * G.oh * G.ow * G.patch());
  kernels::cpu::conv_forward<G, Arch>(x.data(), w.data(), b.data(), y_fast.data(), cols.data(), batch);
  kernels::reference::conv_forward(G, x.data(), w.data(), b.data(), y_ref.data(), batch);
  // Winograd (winograd_v) rounds its transforms too: F(2x2, 3x3) a few times the direct sum's error, F(4x4, 3x3)
  // (winograd_m 4) about 10x more (test_winograd.cpp: 4e-6 of the |w x| sum, about 70 here: 3e-4)
  constexpr bool wino = kernels::cpu::winograd_v<G, Arch, float>;
  constexpr bool wino4 = wino && kernels::cpu::winograd_m<G, float> == 4;
  CHECK(max_rel(y_fast, y_ref) < (wino4 ? 3e-4 : wino ? 4e-5 : 1e-5));

  std::vector<float> dw_f(w.size()), db_f(b.size()), dx_f(x.size(), 7.0f), dw_r(w.size()), db_r(b.size()),
      dx_r(x.size());
  kernels::cpu::conv_backward<G, Arch>(dy.data(), w.data(), dw_f.data(), db_f.data(), dx_f.data(), cols.data(),
                                      batch);
  kernels::reference::conv_backward(G, x.data(), w.data(), dy.data(), dw_r.data(), db_r.data(), dx_r.data(), batch);
  // (dW by F(3x3, 4x4) where wino4 holds and cols keeps x: 1.03e-4 seen for the CNN's conv2 at batch 9)
  CHECK(max_rel(dw_f, dw_r) < (wino4 ? 3e-4 : 1e-4));
  CHECK(max_rel(db_f, db_r) < 1e-4);
  CHECK(max_rel(dx_f, dx_r) < (wino4 ? 3e-4 : 1e-4));
  // the first layer's backward: no dx, the same dw and db
  std::vector<float> dw_n(w.size()), db_n(b.size());
  kernels::cpu::conv_forward<G, Arch>(x.data(), w.data(), b.data(), y_fast.data(), cols.data(), batch);
  kernels::cpu::conv_backward<G, Arch>(dy.data(), w.data(), dw_n.data(), db_n.data(), static_cast<float*>(nullptr),
                                      cols.data(), batch);
  CHECK(max_rel(dw_n, dw_r) < (wino4 ? 3e-4 : 1e-4));
  CHECK(max_rel(db_n, db_r) < 1e-4);
}

// Small patches (the direct kernels where direct_conv_v holds for Arch, im2col + GEMM elsewhere):
// C = 1 to 3, F one to four vectors and not a multiple of the vector, odd widths, padding, strides.
template <class Arch>
void compare_small_patches() {
  compare<geom<28, 28, 1, 32, 3, 3, 1, padding::valid>(), Arch>(3);  // the Fashion-MNIST CNN's first layer
  compare<geom<13, 11, 1, 32, 3, 3, 1, padding::same>(), Arch>(1);
  compare<geom<9, 9, 1, 16, 3, 3, 2, padding::valid>(), Arch>(2);
  compare<geom<15, 15, 1, 16, 3, 3, 2, padding::valid>(), Arch>(5);
  compare<geom<7, 9, 1, 48, 3, 3, 2, padding::same>(), Arch>(3);
  compare<geom<11, 13, 1, 64, 5, 5, 1, padding::same>(), Arch>(1);
  compare<geom<10, 7, 2, 32, 3, 3, 1, padding::same>(), Arch>(2);
  compare<geom<9, 8, 3, 16, 3, 3, 1, padding::valid>(), Arch>(1);
  compare<geom<8, 8, 1, 20, 3, 3, 1, padding::same>(), Arch>(2);  // F not a multiple of the vector
  compare<geom<5, 31, 1, 8, 2, 3, 1, padding::valid>(), Arch>(3);  // a long row: several register blocks and a tail
}

}  // namespace

TEST_CASE("conv: im2col + GEMM equals the direct reference, valid padding") {
  compare<geom<8, 8, 1, 4, 3, 3, 1, padding::valid>()>(3);
  compare<geom<9, 7, 3, 5, 3, 2, 2, padding::valid>()>(2);
  compare<geom<10, 10, 4, 6, 5, 5, 3, padding::valid>()>(2);
  compare<geom<6, 6, 2, 3, 1, 1, 1, padding::valid>()>(2);
}

TEST_CASE("conv: im2col + GEMM equals the direct reference, same padding") {
  compare<geom<8, 8, 1, 4, 3, 3, 1, padding::same>()>(3);
  compare<geom<7, 9, 3, 5, 3, 3, 2, padding::same>()>(2);
  compare<geom<5, 5, 2, 3, 4, 4, 1, padding::same>()>(2);  // even kernel: more padding after than before
  compare<geom<9, 9, 2, 3, 5, 5, 3, padding::same>()>(1);
}

TEST_CASE("conv: small patches (direct kernels) equal the direct reference on every architecture") {
  CHECK(test::for_each_arch("conv small patches", [](auto arch, const char*) {
          compare_small_patches<decltype(arch)>();
        }) >= 1);
}

// The rule: the C = 1 first layer of the Fashion-MNIST CNN runs direct on AVX2 and AVX-512; its second layer
// (patch 288), double, a 64-wide SSE2 filter set (16 vectors) and C = 2 on AVX2 (patch 18 > 12) do not.
constexpr conv_geometry first = geom<28, 28, 1, 32, 3, 3, 1, padding::valid>();
constexpr conv_geometry second = geom<13, 13, 32, 64, 3, 3, 1, padding::valid>();
static_assert(kernels::cpu::direct_conv_v<first, xsimd::fma3<xsimd::avx2>, float>);
static_assert(!kernels::cpu::direct_conv_v<first, xsimd::fma3<xsimd::avx2>, double>);
static_assert(!kernels::cpu::direct_conv_v<second, xsimd::fma3<xsimd::avx2>, float>);
static_assert(!kernels::cpu::direct_conv_v<geom<10, 7, 2, 32, 3, 3, 1, padding::same>(), xsimd::fma3<xsimd::avx2>, float>);
static_assert(!kernels::cpu::direct_conv_v<geom<8, 8, 1, 20, 3, 3, 1, padding::same>(), xsimd::fma3<xsimd::avx2>, float>);
static_assert(!kernels::cpu::direct_conv_v<geom<8, 8, 1, 64, 3, 3, 1, padding::same>(), xsimd::sse2, float>);
static_assert(kernels::cpu::direct_conv_v<geom<15, 15, 1, 16, 3, 3, 2, padding::valid>(), xsimd::fma3<xsimd::avx2>, float>);
// one sample's cols (16 x 9 values) cannot hold x (81) and a partial dW, db (144 + 16)
static_assert(!kernels::cpu::direct_conv_v<geom<9, 9, 1, 16, 3, 3, 2, padding::valid>(), xsimd::fma3<xsimd::avx2>, float>);
#if defined(__AVX512BW__)
static_assert(kernels::cpu::direct_conv_v<first, xsimd::avx512bw, float>);
// its dW: both filter vectors in one pass on AVX-512, one at a time on AVX2 (16 registers)
static_assert(kernels::cpu::detail::direct_dw_vectors<first, xsimd::avx512bw>() == 2);
static_assert(kernels::cpu::detail::direct_dw_vectors<first, xsimd::fma3<xsimd::avx2>>() == 1);
static_assert(kernels::cpu::direct_conv_v<geom<10, 7, 2, 32, 3, 3, 1, padding::same>(), xsimd::avx512bw, float>);
static_assert(!kernels::cpu::direct_conv_v<second, xsimd::avx512bw, float>);
#endif

// conv_forward / conv_backward of geometry G on `threads` threads: y, dw, db, dx, all concatenated.
template <conv_geometry G>
std::vector<float> conv_run(std::size_t threads, std::size_t batch) {
  kernels::cpu::set_threads(threads);
  rng g(5);
  std::vector<float> x(batch * G.in_size()), w(G.patch() * G.f), b(G.f), dy(batch * G.out_size());
  for (auto* v : {&x, &w, &b, &dy})
    for (auto& e : *v) e = float(g.uniform(-1, 1));
  std::vector<float> y(dy.size()), cols(batch * G.oh * G.ow * G.patch()), dw(w.size()), db(b.size()), dx(x.size());
  kernels::cpu::conv_forward<G>(x.data(), w.data(), b.data(), y.data(), cols.data(), batch);
  kernels::cpu::conv_backward<G>(dy.data(), w.data(), dw.data(), db.data(), dx.data(), cols.data(), batch);
  for (auto* v : {&dw, &db, &dx}) y.insert(y.end(), v->begin(), v->end());
  return y;
}

TEST_CASE("conv: the same bits whatever the thread count (im2col, col2im and the direct kernels on the pool)") {
  const std::size_t before = kernels::cpu::threads();
  for (std::size_t batch : {1, 7, 9, 64}) {
    const auto one = conv_run<first>(1, batch), one_b = conv_run<second>(1, batch);
    for (std::size_t t : {2, 3, 4}) {
      CHECK(conv_run<first>(t, batch) == one);
      CHECK(conv_run<second>(t, batch) == one_b);
    }
  }
  kernels::cpu::set_threads(before);
}

// conv_chunked_v's chunks (conv_chunk_rows / (OH*OW) samples each): several chunks and a partial last one
// (the CNN's conv2: 4 samples a chunk), and a last chunk below packed_rows rows (3 x 3 outputs: 56 samples a
// chunk, batch 57), against the reference; y and dx bit for bit what im2col + one dense_forward /
// dense_backward_input + col2im over the whole batch give (dW is summed by chunks), except where
// Winograd F(4x4, 3x3) computes them (winograd_v: the CNN's conv2 on AVX2 and AVX-512), equal up to rounding.
TEST_CASE("conv: im2col + GEMM in chunks of samples equals the reference and one product over the batch") {
  static_assert(kernels::cpu::conv_chunked_v<second, kernels::cpu::default_arch, float> ==
                kernels::cpu::simd_v<float, kernels::cpu::default_arch>);
  compare<second>(9);
  static_assert(kernels::cpu::conv_chunk<geom<5, 5, 4, 4, 3, 3, 1, padding::valid>()> == 56);
  static_assert(kernels::cpu::conv_chunked_v<geom<5, 5, 4, 4, 3, 3, 1, padding::valid>(), kernels::cpu::default_arch,
                                             float> == kernels::cpu::simd_v<float, kernels::cpu::default_arch>);
  compare<geom<5, 5, 4, 4, 3, 3, 1, padding::valid>()>(57);
  constexpr conv_geometry G = second;
  const std::size_t batch = 9, m = batch * G.oh * G.ow;
  rng g(11);
  std::vector<float> x(batch * G.in_size()), w(G.patch() * G.f), b(G.f), dy(batch * G.out_size());
  for (auto* v : {&x, &w, &b, &dy})
    for (auto& e : *v) e = float(g.uniform(-1, 1));
  std::vector<float> y(dy.size()), y1(dy.size()), cols(m * G.patch()), cols1(cols.size()), dw(w.size()),
      db(b.size()), dx(x.size()), dx1(x.size());
  kernels::cpu::conv_forward<G>(x.data(), w.data(), b.data(), y.data(), cols.data(), batch);
  kernels::cpu::conv_backward<G>(dy.data(), w.data(), dw.data(), db.data(), dx.data(), cols.data(), batch);
  kernels::cpu::im2col<G>(x.data(), cols1.data(), batch);
  kernels::cpu::dense_forward<G.patch(), G.f>(cols1.data(), w.data(), b.data(), y1.data(), m);
  kernels::cpu::dense_backward_input<G.patch(), G.f>(dy.data(), w.data(), cols1.data(), m);
  kernels::cpu::col2im<G>(cols1.data(), dx1.data(), batch);
  if constexpr (kernels::cpu::winograd_v<G, kernels::cpu::default_arch, float>) {
    // y and dx by Winograd F(4x4, 3x3) (test_winograd.cpp): the direct sum up to rounding, compare()'s
    // F(4x4) bound (F(2x2)'s was 4e-5: 1.07e-5 seen for dx on avx512 in a -O1 build)
    static_assert(kernels::cpu::winograd_m<G, float> == 4);
    CHECK(max_rel(y, y1) < 3e-4);
    CHECK(max_rel(dx, dx1) < 3e-4);
  } else {
    CHECK(y == y1);
    CHECK(dx == dx1);
  }
}

// conv_backward_relu: the direct kernels without dx read the relu mask with dy (dy left as it was), every
// other case masks dy first; either way the bits of relu_backward then conv_backward, on every architecture.
template <conv_geometry G, class Arch>
void compare_relu_backward(std::size_t batch, bool with_dx) {
  rng g(G.h * 17 + G.c);
  std::vector<float> x(batch * G.in_size()), w(G.patch() * G.f), b(G.f), dy(batch * G.out_size());
  for (auto* v : {&x, &w, &b, &dy})
    for (auto& e : *v) e = float(g.uniform(-1, 1));
  std::vector<float> y(dy.size()), cols(batch * G.oh * G.ow * G.patch());
  kernels::cpu::conv_forward<G, Arch>(x.data(), w.data(), b.data(), y.data(), cols.data(), batch);
  kernels::cpu::relu_forward<float, Arch>(y.data(), y.size());
  std::vector<float> cols2 = cols, dy2 = dy, dw(w.size()), db(b.size()), dx(x.size()), dw2(w.size()), db2(b.size()),
                     dx2(x.size());
  kernels::cpu::conv_backward_relu<G, Arch>(y.data(), dy.data(), w.data(), dw.data(), db.data(),
                                            with_dx ? dx.data() : nullptr, cols.data(), batch);
  kernels::cpu::relu_backward<float, Arch>(y.data(), dy2.data(), dy2.size());
  kernels::cpu::conv_backward<G, Arch>(dy2.data(), w.data(), dw2.data(), db2.data(), with_dx ? dx2.data() : nullptr,
                                       cols2.data(), batch);
  CHECK(dw == dw2);
  CHECK(db == db2);
  if (with_dx) CHECK(dx == dx2);
}

TEST_CASE("conv: conv_backward_relu equals relu_backward then conv_backward on every architecture") {
  CHECK(test::for_each_arch("conv relu backward", [](auto arch, const char*) {
          using A = decltype(arch);
          for (bool with_dx : {false, true}) {
            compare_relu_backward<first, A>(5, with_dx);
            compare_relu_backward<geom<9, 8, 3, 16, 3, 3, 1, padding::valid>(), A>(3, with_dx);
            compare_relu_backward<second, A>(9, with_dx);
          }
        }) >= 1);
}

TEST_CASE("for_samples: contiguous ranges that cover the batch once, one range below sample_split_min") {
  const std::size_t before = kernels::cpu::threads();
  for (std::size_t t : {1, 2, 3}) {
    kernels::cpu::set_threads(t);
    for (std::size_t batch : {1, 2, 5, 64}) {
      for (std::size_t per : {std::size_t(1), kernels::cpu::sample_split_min}) {
        std::vector<int> seen(batch, 0);
        std::vector<std::pair<std::size_t, std::size_t>> ranges(t + 1, {0, 0});
        std::size_t calls = 0;
        std::mutex m;
        kernels::cpu::for_samples(batch, per, [&](std::size_t n0, std::size_t n1) {
          std::lock_guard<std::mutex> lock(m);
          ranges[std::min(calls++, t)] = {n0, n1};
          for (std::size_t n = n0; n < n1; ++n) ++seen[n];
        });
        CHECK(std::all_of(seen.begin(), seen.end(), [](int k) { return k == 1; }));
        const bool split = batch * per >= kernels::cpu::sample_split_min && batch >= 2 && t >= 2;
        CHECK(calls == (split ? std::min(batch, t) : 1));
      }
    }
  }
  kernels::cpu::set_threads(before);
}

TEST_CASE("for_fixed_chunks and sum_chunks: the same chunks and bits on 1, 2 and 3 threads") {
  const std::size_t before = kernels::cpu::threads();
  rng g(13);
  const std::size_t count = 9, n = 5000, stride = 5003;  // 3 blocks of sum_chunks_block values, the last short
  std::vector<float> parts(count * stride);
  for (auto& v : parts) v = float(g.uniform(-1, 1));
  std::vector<float> serial(n);
  for (std::size_t i = 0; i < n; ++i) {
    serial[i] = parts[i];
    for (std::size_t k = 1; k < count; ++k) serial[i] += parts[k * stride + i];
  }
  for (std::size_t t : {1, 2, 3}) {
    kernels::cpu::set_threads(t);
    for (std::size_t rows : {0, 1, 255, 256, 257, 10816}) {
      std::vector<int> seen(rows, 0);
      std::vector<std::size_t> first(rows / 256 + 1, rows + 1);
      std::mutex m;
      kernels::cpu::for_fixed_chunks(rows, 256, 32, [&](std::size_t k, std::size_t r0, std::size_t r1) {
        std::lock_guard<std::mutex> lock(m);
        first[k] = r0;
        CHECK(r1 == std::min(rows, (k + 1) * 256));
        for (std::size_t r = r0; r < r1; ++r) ++seen[r];
      });
      CHECK(std::all_of(seen.begin(), seen.end(), [](int k) { return k == 1; }));
      for (std::size_t k = 0; k * 256 < rows; ++k) CHECK(first[k] == k * 256);
    }
    std::vector<float> out(n, 7.0f);
    kernels::cpu::sum_chunks(parts.data(), count, stride, out.data(), n);
    CHECK(out == serial);  // each value's additions in chunk order, whatever the thread count
  }
  kernels::cpu::set_threads(before);
}

TEST_CASE("conv: reference by hand, 3x3 input, 2x2 kernel, one channel") {
  constexpr conv_geometry g = geom<3, 3, 1, 1, 2, 2, 1, padding::valid>();
  static_assert(g.oh == 2 && g.ow == 2);
  const std::vector<float> x{1, 2, 3, 4, 5, 6, 7, 8, 9}, w{1, 0, 0, -1}, b{10};
  std::vector<float> y(4), cols(4 * 4);
  kernels::reference::conv_forward(g, x.data(), w.data(), b.data(), y.data(), 1);
  CHECK(y == std::vector<float>{10 - 4, 10 - 4, 10 - 4, 10 - 4});  // x[r, s] - x[r + 1, s + 1] = -4
  kernels::cpu::conv_forward<g>(x.data(), w.data(), b.data(), y.data(), cols.data(), 1);
  CHECK(y == std::vector<float>{6, 6, 6, 6});
  CHECK(cols == std::vector<float>{1, 2, 4, 5, 2, 3, 5, 6, 4, 5, 7, 8, 5, 6, 8, 9});  // im2col rows
}

TEST_CASE("conv: same padding pads zeros, half before and the rest after") {
  // 2x2 input, 3x3 kernel of ones, stride 1: every output sums its neighbourhood.
  constexpr conv_geometry g = geom<2, 2, 1, 1, 3, 3, 1, padding::same>();
  static_assert(g.oh == 2 && g.pt == 1 && g.pl == 1);
  const std::vector<float> x{1, 2, 3, 4}, w(9, 1.0f), b{0};
  std::vector<float> y(4), cols(4 * 9);
  kernels::cpu::conv_forward<g>(x.data(), w.data(), b.data(), y.data(), cols.data(), 1);
  CHECK(y == std::vector<float>{10, 10, 10, 10});
  // 4x4 kernel (even): pad_total 3, 1 before and 2 after.
  constexpr conv_geometry e = geom<4, 4, 1, 1, 4, 4, 1, padding::same>();
  static_assert(e.oh == 4 && e.pt == 1 && e.pl == 1);
}

// conv_forward with an epilogue rule (a relu layer's forward, ops<cpu>::conv_forward) is the bits of the
// product then relu_forward over y: the direct kernels, Winograd, the chunked and the one-product im2col paths.
template <conv_geometry G, class Arch>
void compare_relu_forward(std::size_t batch) {
  rng g(G.h * 29 + G.c);
  std::vector<float> x(batch * G.in_size()), w(G.patch() * G.f), b(G.f);
  for (auto* v : {&x, &w, &b})
    for (auto& e : *v) e = float(g.uniform(-1, 1));
  std::vector<float> y(batch * G.out_size()), y2(y.size()), cols(batch * G.oh * G.ow * G.patch()), cols2(cols.size());
  kernels::cpu::conv_forward<G, Arch>(x.data(), w.data(), b.data(), y.data(), cols.data(), batch, fn::relu_fn{});
  kernels::cpu::conv_forward<G, Arch>(x.data(), w.data(), b.data(), y2.data(), cols2.data(), batch);
  const bool some_negative = std::any_of(y2.begin(), y2.end(), [](float v) { return v < 0; });
  CHECK(some_negative);
  kernels::cpu::relu_forward<float, Arch>(y2.data(), y2.size());
  CHECK(y == y2);
  CHECK(cols == cols2);  // what backward reads is unchanged
}

TEST_CASE("conv: conv_forward's epilogue equals the rule's pass over y on every architecture") {
  CHECK(test::for_each_arch("conv relu forward", [](auto arch, const char*) {
          using A = decltype(arch);
          compare_relu_forward<first, A>(5);                                     // direct
          compare_relu_forward<geom<9, 8, 3, 16, 3, 3, 1, padding::valid>(), A>(3);  // one product
          compare_relu_forward<second, A>(9);                                    // Winograd or chunked
          compare_relu_forward<geom<5, 5, 4, 4, 3, 3, 1, padding::valid>(), A>(57);  // chunked im2col
          compare_relu_forward<geom<13, 13, 32, 64, 3, 3, 1, padding::same>(), A>(2);  // Winograd, padded
        }) >= 1);
}

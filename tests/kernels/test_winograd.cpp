// backends/cpu/winograd.hpp (Winograd F(2x2, 3x3) and F(4x4, 3x3)) against a double-precision direct
// reference (kernels/conv_reference.hpp in double): forward for odd and even output sizes,
// valid and same padding, several C and F, batches 1..9, float and double, on every
// architecture (archs.hpp);
// dX (winograd_backward_input) and dW (winograd_backward_weights, F(3x3, 2x2)) the same way, and its db (the
// chunks' column sums of dy) against the double column sums;
// conv_forward and conv_backward take them where winograd_v / winograd_dx_v / winograd_dw_v hold
// (conv_forward leaving in cols the copy of x dW reads, else im2col);
// F(4x4, 3x3) where winograd_m picks it and F(2x2, 3x3) forced on the same shapes, each with its bound;
// the rule itself; the same bits whatever the thread count; the transforms over a run-time geometry
// (the compiled part's, M = 2 and 4) the same bits as over a compile-time one.
#include <doctest/doctest.h>

#include <ctnn/backends/cpu/conv.hpp>
#include <ctnn/backends/cpu/thread_pool.hpp>
#include <ctnn/backends/cpu/winograd.hpp>
#include <ctnn/core/rng.hpp>
#include <ctnn/layers/padding.hpp>

#include "kernels/archs.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

using namespace ctnn;
using kernels::conv_geometry;

namespace {

template <std::size_t H, std::size_t W, std::size_t C, std::size_t F, padding P>
constexpr conv_geometry geom3() {
  return {H, W, C, F, 3, 3, 1, padded_out(H, 3, 1, P), padded_out(W, 3, 1, P), pad_before(H, 3, 1, P),
          pad_before(W, 3, 1, P)};
}

struct conv_data {
  std::vector<float> x, w, b;
};

template <conv_geometry G>
conv_data make_data(std::size_t batch, std::uint64_t seed) {
  rng g(seed);
  conv_data d{std::vector<float>(batch * G.in_size()), std::vector<float>(9 * G.c * G.f), std::vector<float>(G.f)};
  for (auto* v : {&d.x, &d.w, &d.b})
    for (auto& e : *v) e = float(g.uniform(-1, 1));
  return d;
}

// The largest |fast - ref| over the outputs, divided by the largest |w|.|x| sum of absolute values (the
// scale of the rounding of any summation order of one output).
// The largest |fast - ref| over the outputs, divided by the largest |w|.|x| sum of absolute values (the
// scale of the rounding of any summation order of one output).
template <conv_geometry G, class T>
double scaled_error(const conv_data& d, const std::vector<T>& y, std::size_t batch) {
  const std::vector<double> x(d.x.begin(), d.x.end()), w(d.w.begin(), d.w.end()), b(d.b.begin(), d.b.end());
  std::vector<double> ref(batch * G.out_size()), xa(x.size()), wa(w.size()), mag(ref.size());
  kernels::reference::conv_forward(G, x.data(), w.data(), b.data(), ref.data(), batch);
  std::transform(x.begin(), x.end(), xa.begin(), [](double v) { return std::abs(v); });
  std::transform(w.begin(), w.end(), wa.begin(), [](double v) { return std::abs(v); });
  kernels::reference::conv_forward(G, xa.data(), wa.data(), static_cast<const double*>(nullptr), mag.data(), batch);
  double err = 0, scale = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    err = std::max(err, std::abs(double(y[i]) - ref[i]));
    scale = std::max(scale, mag[i] + std::abs(b[i % G.f]));
  }
  return err / scale;
}

// float's epsilon is 6e-8, double's 1.1e-16: a few roundings of the transforms and the sum over 9 C terms
// (F(2x2, 3x3)). F(4x4, 3x3)'s transforms carry coefficients up to 8 (A^T) and 5 (B^T) and G's 1/6, 1/12, 1/24
// rounded, so its error is about 10x F(2x2)'s: the largest scaled error
// over these cases on every architecture, measured, float: F(2x2) 1.6e-7, F(4x4) 1.6e-6 (dW by F(3x3, 4x4)
// 1.0e-6); double: F(4x4) 2.7e-15. F(4x4)'s bound: 4x F(2x2)'s.
template <class T, std::size_t M = 2>
constexpr double bound = (std::is_same_v<T, float> ? 1e-6 : 1e-14) * (M == 4 ? 4 : 1);

// err / scale < bound<T> for got against the double reference ref, scaled by the largest of mag (the
// reference run on the inputs' absolute values), with the geometry and batch captured.
template <conv_geometry G, class T, std::size_t M = 2>
void check_scaled(const std::vector<T>& got, const std::vector<double>& ref, const std::vector<double>& mag,
                  std::size_t batch) {
  double err = 0, scale = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    err = std::max(err, std::abs(double(got[i]) - ref[i]));
    scale = std::max(scale, mag[i]);
  }
  CAPTURE(G.h);
  CAPTURE(G.w);
  CAPTURE(G.c);
  CAPTURE(G.f);
  CAPTURE(batch);
  CAPTURE(M);
  CHECK(err / scale < bound<T, M>);
}

template <conv_geometry G, class Arch, class T = float, std::size_t M = kernels::cpu::winograd_m<G, T>>
void check_forward(std::size_t batch) {
  static_assert(kernels::cpu::winograd_v<G, Arch, T>);
  const conv_data d = make_data<G>(batch, G.h * 7 + G.c + batch);
  const std::vector<T> x(d.x.begin(), d.x.end()), w(d.w.begin(), d.w.end()), b(d.b.begin(), d.b.end());
  std::vector<T> y(batch * G.out_size(), T(1e30));
  kernels::cpu::winograd_forward<G, Arch, T, fn::identity_fn, M>(x.data(), w.data(), b.data(), y.data(), batch);
  const double e = scaled_error<G>(d, y, batch);
  CAPTURE(G.h);
  CAPTURE(G.w);
  CAPTURE(G.c);
  CAPTURE(G.f);
  CAPTURE(batch);
  CAPTURE(M);
  CHECK(e < bound<T, M>);
}

// dX: against the double reference's dx, scaled by the reference's dx of |dy| and |w|.
template <conv_geometry G, class Arch, class T = float,
          std::size_t M = kernels::cpu::winograd_m<kernels::cpu::winograd_dx_geometry<G>, T>>
void check_backward_input(std::size_t batch) {
  static_assert(kernels::cpu::winograd_dx_v<G, Arch, T>);
  const conv_data d = make_data<G>(batch, G.w * 5 + G.f + batch);
  rng g(batch + 1);
  std::vector<T> dy(batch * G.out_size()), dx(batch * G.in_size(), T(1e30));
  for (auto& e : dy) e = T(float(g.uniform(-1, 1)));
  const std::vector<T> wt(d.w.begin(), d.w.end());
  kernels::cpu::winograd_backward_input<G, Arch, T, M>(dy.data(), wt.data(), dx.data(), batch);
  const std::vector<double> x(d.x.begin(), d.x.end()), w(d.w.begin(), d.w.end()), dyd(dy.begin(), dy.end());
  std::vector<double> wa(w.size()), dya(dyd.size()), dw(w.size()), db(G.f), ref(dx.size()), mag(dx.size());
  std::transform(w.begin(), w.end(), wa.begin(), [](double v) { return std::abs(v); });
  std::transform(dyd.begin(), dyd.end(), dya.begin(), [](double v) { return std::abs(v); });
  kernels::reference::conv_backward(G, x.data(), w.data(), dyd.data(), dw.data(), db.data(), ref.data(), batch);
  kernels::reference::conv_backward(G, x.data(), wa.data(), dya.data(), dw.data(), db.data(), mag.data(), batch);
  check_scaled<G, T, M>(dx, ref, mag, batch);
}

template <class Arch>
void check_geometries() {
  constexpr std::size_t L = xsimd::batch<float, Arch>::size, C0 = std::max<std::size_t>(16, L);
  for (std::size_t batch : {1, 2, 5, 9}) {
    check_forward<geom3<13, 13, 32, 64, padding::valid>(), Arch>(batch);  // the CNN's conv2: 11 x 11, odd
    check_forward<geom3<10, 12, C0, C0, padding::valid>(), Arch>(batch);  // 8 x 10: even, whole tiles
    check_forward<geom3<7, 9, C0, 2 * C0, padding::same>(), Arch>(batch); // 7 x 9, same: padding on every side
    check_forward<geom3<8, 5, 2 * C0, C0, padding::same>(), Arch>(batch); // 8 x 5
  }
  check_forward<geom3<4, 4, 3 * C0, C0, padding::valid>(), Arch>(3);      // 2 x 2: one tile a sample (F(2x2))
  check_forward<geom3<30, 30, C0, C0, padding::same>(), Arch>(2);         // 64 tiles of 4x4: a chunk of one sample
  // F(2x2, 3x3) where winograd_m picks F(4x4, 3x3)
  for (std::size_t batch : {1, 5}) {
    check_forward<geom3<13, 13, 32, 64, padding::valid>(), Arch, float, 2>(batch);
    check_forward<geom3<7, 9, C0, 2 * C0, padding::same>(), Arch, float, 2>(batch);
  }
  check_forward<geom3<30, 30, C0, C0, padding::same>(), Arch, float, 2>(2);  // 225 tiles: a chunk of one sample
  check_forward<geom3<6, 6, C0, C0, padding::valid>(), Arch, float, 4>(3);   // 4 x 4: F(4x4) one tile a sample
}

// dW (winograd_backward_weights, F(3x3, 4x4) where winograd_m is 4, else F(3x3, 2x2)): against the double
// reference's dW, scaled by the reference's dW of |x| and |dy|.
template <conv_geometry G, class Arch, class T = float, std::size_t M = kernels::cpu::winograd_m<G, T>>
void check_backward_weights(std::size_t batch) {
  static_assert(kernels::cpu::winograd_v<G, Arch, T>);
  const conv_data d = make_data<G>(batch, G.h * 3 + G.f + batch);
  rng g(batch + 7);
  const std::vector<T> x(d.x.begin(), d.x.end());
  std::vector<T> dy(batch * G.out_size()), dw(9 * G.c * G.f, T(1e30));
  for (auto& e : dy) e = T(float(g.uniform(-1, 1)));
  constexpr std::size_t chunk = kernels::cpu::winograd_dw_chunk<G, M>;
  std::vector<T> partial((batch + chunk - 1) / chunk * dw.size());
  kernels::cpu::winograd_backward_weights<G, Arch, T, M>(x.data(), dy.data(), dw.data(), partial.data(), batch);
  const std::vector<double> xd(x.begin(), x.end()), w(d.w.begin(), d.w.end()), dyd(dy.begin(), dy.end());
  std::vector<double> xa(xd.size()), dya(dyd.size()), ref(dw.size()), mag(dw.size()), db(G.f);
  std::transform(xd.begin(), xd.end(), xa.begin(), [](double v) { return std::abs(v); });
  std::transform(dyd.begin(), dyd.end(), dya.begin(), [](double v) { return std::abs(v); });
  kernels::reference::conv_backward(G, xd.data(), w.data(), dyd.data(), ref.data(), db.data(), static_cast<double*>(nullptr), batch);
  kernels::reference::conv_backward(G, xa.data(), w.data(), dya.data(), mag.data(), db.data(), static_cast<double*>(nullptr), batch);
  check_scaled<G, T, M>(dw, ref, mag, batch);
  // with db: dW the same bits; db (the chunks' column sums of dy, added in chunk order) against the double
  // column sums, scaled by the column sums of |dy| (any order of the additions rounds within rows x epsilon)
  std::vector<T> dw2(dw.size(), T(1e30)), dbt(G.f, T(1e30));
  kernels::cpu::winograd_backward_weights<G, Arch, T, M>(x.data(), dy.data(), dw2.data(), partial.data(), batch,
                                                         dbt.data());
  CHECK(dw2 == dw);
  const std::size_t rows = batch * G.oh * G.ow;
  double err = 0, scale = 0;
  for (std::size_t f = 0; f < G.f; ++f) {
    double want = 0, mag_f = 0;
    for (std::size_t i = 0; i < rows; ++i) want += dyd[i * G.f + f], mag_f += dya[i * G.f + f];
    err = std::max(err, std::abs(double(dbt[f]) - want));
    scale = std::max(scale, mag_f);
  }
  CAPTURE(batch);
  CHECK(err / scale < double(rows) * (std::is_same_v<T, float> ? 6e-8 : 1.2e-16));
}

template <class Arch>
void check_backward_geometries() {
  constexpr std::size_t L = xsimd::batch<float, Arch>::size, C0 = std::max<std::size_t>(16, L);
  for (std::size_t batch : {1, 2, 5, 9}) {
    check_backward_input<geom3<13, 13, 32, 64, padding::valid>(), Arch>(batch);  // dx 13 x 13 from dy 11 x 11
    check_backward_input<geom3<10, 12, C0, C0, padding::valid>(), Arch>(batch);  // dx 10 x 12: even
    check_backward_input<geom3<7, 9, C0, 2 * C0, padding::same>(), Arch>(batch);
    check_backward_input<geom3<8, 5, 2 * C0, C0, padding::same>(), Arch>(batch);
  }
  check_backward_input<geom3<4, 4, C0, 3 * C0, padding::valid>(), Arch>(4);  // dy of 2 x 2: one tile of dy
  for (std::size_t batch : {1, 5}) {  // F(2x2, 3x3) where winograd_m picks F(4x4, 3x3)
    check_backward_input<geom3<13, 13, 32, 64, padding::valid>(), Arch, float, 2>(batch);
    check_backward_input<geom3<8, 5, 2 * C0, C0, padding::same>(), Arch, float, 2>(batch);
  }
}

template <class Arch>
void check_weight_geometries() {
  constexpr std::size_t L = xsimd::batch<float, Arch>::size, C0 = std::max<std::size_t>(16, L);
  // F(3x3, 4x4) (winograd_m 4): the CNN's conv2 in one chunk (8 samples, 72 tiles) or two, the last short
  for (std::size_t batch : {1, 9})
    check_backward_weights<geom3<13, 13, 32, 64, padding::valid>(), Arch>(batch);  // dy 11 x 11: partial tiles
  check_backward_weights<geom3<10, 12, C0, C0, padding::valid>(), Arch>(13);       // dy 8 x 10: 2 chunks of 12
  check_backward_weights<geom3<7, 9, C0, 2 * C0, padding::same>(), Arch>(9);
  check_backward_weights<geom3<8, 5, 2 * C0, C0, padding::same>(), Arch>(9);       // one chunk of 18 samples
  check_backward_weights<geom3<30, 30, C0, C0, padding::same>(), Arch>(2);         // 64 tiles: a chunk of one sample
  check_backward_weights<geom3<4, 4, C0, 3 * C0, padding::valid>(), Arch>(4);      // F(3x3, 2x2): dy of 2 x 2
  // F(3x3, 2x2) forced: conv2 in one chunk (4 samples, 144 tiles) or two, the last short
  for (std::size_t batch : {1, 5})
    check_backward_weights<geom3<13, 13, 32, 64, padding::valid>(), Arch, float, 2>(batch);
  check_backward_weights<geom3<10, 12, C0, C0, padding::valid>(), Arch, float, 2>(9);  // dy 8 x 10, whole tiles
  check_backward_weights<geom3<8, 5, 2 * C0, C0, padding::same>(), Arch, float, 2>(9);
  check_backward_weights<geom3<30, 30, C0, C0, padding::same>(), Arch, float, 2>(2);   // 225 tiles a chunk
}

// double (the layers' gradient checks run in double): the CNN's conv2 and a padded odd geometry
template <class Arch>
void check_double() {
  constexpr std::size_t C0 = std::max<std::size_t>(16, xsimd::batch<double, Arch>::size);
  for (std::size_t batch : {1, 3}) {
    check_forward<geom3<13, 13, 32, 64, padding::valid>(), Arch, double>(batch);
    check_forward<geom3<7, 9, C0, 2 * C0, padding::same>(), Arch, double>(batch);
    check_backward_input<geom3<13, 13, 32, 64, padding::valid>(), Arch, double>(batch);
    check_backward_input<geom3<7, 9, C0, 2 * C0, padding::same>(), Arch, double>(batch);
    check_backward_weights<geom3<13, 13, 32, 64, padding::valid>(), Arch, double>(batch);
    check_backward_weights<geom3<7, 9, C0, 2 * C0, padding::same>(), Arch, double>(batch);
  }
  check_forward<geom3<13, 13, 32, 64, padding::valid>(), Arch, double, 2>(2);  // F(2x2) where F(4x4) is picked
}

}  // namespace

TEST_CASE("winograd: F(2x2, 3x3) forward equals the double-precision direct sum up to rounding, every architecture") {
  CHECK(test::for_each_arch("winograd forward", [](auto arch, const char*) {
          using A = decltype(arch);
          if constexpr (kernels::cpu::simd_v<float, A>) check_geometries<A>();
        }) >= 1);
}

TEST_CASE("winograd: dX (the rotated kernel over dy padded by 2 - padding) equals the double-precision direct sum, every architecture") {
  CHECK(test::for_each_arch("winograd dx", [](auto arch, const char*) {
          using A = decltype(arch);
          if constexpr (kernels::cpu::simd_v<float, A>) check_backward_geometries<A>();
        }) >= 1);
}

TEST_CASE("winograd: dW by F(3x3, 2x2) equals the double-precision direct sum up to rounding, every architecture") {
  CHECK(test::for_each_arch("winograd dw", [](auto arch, const char*) {
          using A = decltype(arch);
          if constexpr (kernels::cpu::simd_v<float, A>) check_weight_geometries<A>();
        }) >= 1);
}

TEST_CASE("winograd: double forward, dX and dW equal the direct sum up to double's rounding, every architecture") {
  CHECK(test::for_each_arch("winograd double", [](auto arch, const char*) {
          using A = decltype(arch);
          if constexpr (kernels::cpu::simd_v<double, A>) check_double<A>();
        }) >= 1);
}

// The rule: 3x3, stride 1, float or double, C and F whole vectors of at least 16; not the C = 1 first layer,
// not a stride of 2 or a 5x5 kernel, not C = 8, not an int.
constexpr conv_geometry conv2 = geom3<13, 13, 32, 64, padding::valid>();
using avx2 = xsimd::fma3<xsimd::avx2>;
static_assert(kernels::cpu::winograd_v<conv2, avx2, float>);
static_assert(kernels::cpu::winograd_v<conv2, avx2, double>);
static_assert(!kernels::cpu::winograd_v<conv2, avx2, int>);
static_assert(!kernels::cpu::winograd_v<geom3<28, 28, 1, 32, padding::valid>(), avx2, float>);
static_assert(!kernels::cpu::winograd_v<geom3<13, 13, 8, 64, padding::valid>(), avx2, float>);
static_assert(!kernels::cpu::winograd_v<
              conv_geometry{13, 13, 32, 64, 3, 3, 2, 6, 6, 0, 0}, avx2, float>);  // stride 2
static_assert(!kernels::cpu::winograd_v<
              conv_geometry{13, 13, 32, 64, 5, 5, 1, 9, 9, 0, 0}, avx2, float>);  // 5x5
static_assert(kernels::cpu::winograd_dx_v<conv2, avx2, float>);
static_assert(kernels::cpu::winograd_dx_geometry<conv2>.h == 11 && kernels::cpu::winograd_dx_geometry<conv2>.oh == 13 &&
              kernels::cpu::winograd_dx_geometry<conv2>.pt == 2 && kernels::cpu::winograd_dx_geometry<conv2>.c == 64);
static_assert(kernels::cpu::winograd_dw_v<conv2, avx2, float> && kernels::cpu::winograd_dw_chunk<conv2> == 4 &&
              kernels::cpu::winograd_dw_chunk<conv2, 4> == 8);
static_assert(!kernels::cpu::winograd_dw_v<geom3<4, 4, 16, 48, padding::valid>(), avx2, float>);  // cols too small
static_assert(kernels::cpu::winograd_chunk<conv2> == 2 && kernels::cpu::winograd_tiles<conv2> == 36);
// F(4x4, 3x3) where it takes fewer multiplies (conv2: 9 tiles x 36 against 36 x 16; its dx 16 x 36 against 49 x 16),
// F(2x2, 3x3) below 4 outputs a side and where the half-used tiles cost more (5 x 5: 4 x 36 against 9 x 16)
static_assert(kernels::cpu::winograd_m<conv2, float> == 4 && kernels::cpu::winograd_m<conv2, double> == 4);
static_assert(kernels::cpu::winograd_m<kernels::cpu::winograd_dx_geometry<conv2>, float> == 4);
static_assert(kernels::cpu::winograd_tiles<conv2, 4> == 9 && kernels::cpu::winograd_chunk<conv2, 4> == 8);
static_assert(kernels::cpu::winograd_m<geom3<4, 4, 16, 16, padding::valid>(), float> == 2);
static_assert(kernels::cpu::winograd_m<geom3<7, 7, 16, 16, padding::valid>(), float> == 2);

TEST_CASE("winograd: conv_forward and conv_backward's dx and dW take it where the rules hold, cols as dW reads it") {
  using A = kernels::cpu::default_arch;
  if constexpr (kernels::cpu::winograd_v<conv2, A, float>) {
    for (std::size_t batch : {3, 9}) {  // one chunk of conv.hpp's (4 samples) or several
      const conv_data d = make_data<conv2>(batch, 3);
      std::vector<float> y(batch * conv2.out_size()), y1(y.size()), cols(batch * conv2.oh * conv2.ow * conv2.patch()),
          im(cols.size());
      kernels::cpu::conv_forward<conv2, A>(d.x.data(), d.w.data(), d.b.data(), y.data(), cols.data(), batch);
      kernels::cpu::winograd_forward<conv2, A>(d.x.data(), d.w.data(), d.b.data(), y1.data(), batch);
      CHECK(y == y1);
      if (kernels::cpu::winograd_dw_v<conv2, A, float> || batch > kernels::cpu::conv_chunk<conv2>) {
        CHECK(std::equal(d.x.begin(), d.x.end(), cols.begin()));  // the copy of x Winograd's or the chunked dW reads
      } else {
        kernels::cpu::im2col<conv2>(d.x.data(), im.data(), batch);
        CHECK(cols == im);
      }
      std::vector<float> dx(d.x.size()), dx1(dx.size()), dw(d.w.size()), db(d.b.size());
      kernels::cpu::conv_backward<conv2, A>(y.data(), d.w.data(), dw.data(), db.data(), dx.data(), cols.data(), batch);
      kernels::cpu::winograd_backward_input<conv2, A>(y.data(), d.w.data(), dx1.data(), batch);
      CHECK(dx == dx1);
      if constexpr (kernels::cpu::winograd_dw_v<conv2, A, float>) {
        std::vector<float> dw1(dw.size()), partial(batch * dw.size());
        kernels::cpu::winograd_backward_weights<conv2, A>(d.x.data(), y.data(), dw1.data(), partial.data(), batch);
        CHECK(dw == dw1);
      }
    }
  }
}

TEST_CASE("winograd: the same bits whatever the thread count") {
  const std::size_t before = kernels::cpu::threads();
  using A = kernels::cpu::default_arch;
  if constexpr (kernels::cpu::winograd_v<conv2, A, float>) {
    const std::size_t batch = 64;
    const conv_data d = make_data<conv2>(batch, 5);
    std::vector<float> one(batch * conv2.out_size()), y(one.size());
    kernels::cpu::set_threads(1);
    kernels::cpu::winograd_forward<conv2, A>(d.x.data(), d.w.data(), d.b.data(), one.data(), batch);
    for (std::size_t t : {2, 3}) {
      kernels::cpu::set_threads(t);
      kernels::cpu::winograd_forward<conv2, A>(d.x.data(), d.w.data(), d.b.data(), y.data(), batch);
      CHECK(y == one);
    }
    std::vector<float> dw_one(9 * conv2.c * conv2.f), dw(dw_one.size()), partial(batch * dw.size());
    std::vector<float> db_one(conv2.f), db(conv2.f);  // db: the chunks' column sums of dy, added in chunk order
    kernels::cpu::set_threads(1);
    kernels::cpu::winograd_backward_weights<conv2, A>(d.x.data(), one.data(), dw_one.data(), partial.data(), batch,
                                                      db_one.data());
    for (std::size_t t : {2, 3}) {
      kernels::cpu::set_threads(t);
      kernels::cpu::winograd_backward_weights<conv2, A>(d.x.data(), one.data(), dw.data(), partial.data(), batch,
                                                        db.data());
      CHECK(dw == dw_one);
      CHECK(db == db_one);
    }
  }
  kernels::cpu::set_threads(before);
}

TEST_CASE("winograd: the transforms over a run-time geometry (the compiled part's) give the fixed geometry's bits") {
  using A = kernels::cpu::default_arch;
  namespace k = kernels::cpu;
  if constexpr (k::winograd_v<conv2, A, float>) {
    constexpr conv_geometry G = conv2;
    constexpr k::detail::fixed_geometry<G> fixed{};
    const std::integral_constant<std::size_t, G.c> c{};
    const std::integral_constant<std::size_t, G.f> f{};
    const std::size_t batch = 3, tiles = k::winograd_tiles<G>;
    const conv_data d = make_data<G>(batch, 7);
    std::vector<float> u(16 * G.c * G.f), u1(u.size());
    k::detail::winograd_filters_of<A>(fixed, d.w.data(), u.data());
    k::winograd_filters_n<A>(G, d.w.data(), u1.data());
    CHECK(u == u1);
    // the entry (C = 32, F = 64: their compile-time loops) and the body over run-time counts (other counts)
    std::vector<float> v(16 * batch * tiles * G.c), v1(v.size()), v2(v.size());
    k::detail::winograd_input_of<A>(fixed, c, d.x.data(), v.data(), 0, batch);
    k::winograd_input_n<A>(G, d.x.data(), v1.data(), 0, batch);
    k::detail::winograd_input_of<A>(G, G.c, d.x.data(), v2.data(), 0, batch);
    CHECK(v == v1);
    CHECK(v == v2);
    std::vector<float> m(16 * batch * tiles * G.f);
    for (std::size_t i = 0; i < m.size(); ++i) m[i] = float(int(i % 17) - 8) * 0.25f;
    std::vector<float> y(batch * G.out_size()), y1(y.size()), y2(y.size());
    k::detail::winograd_output_of<A>(fixed, f, m.data(), d.b.data(), y.data(), 0, batch, fn::relu_fn{});
    k::winograd_output_n<A>(G, m.data(), d.b.data(), y1.data(), 0, batch, fn::relu_fn{});
    k::detail::winograd_output_of<A>(G, G.f, m.data(), d.b.data(), y2.data(), 0, batch, fn::relu_fn{});
    CHECK(y == y1);
    CHECK(y == y2);
    // dW's transforms: U of dy's tiles (an odd output: half tiles), and A^T M A (m read as 16 C x F matrices)
    const std::size_t es = batch * tiles * G.f + 16;
    std::vector<float> gu(16 * es, 1.f), gu1(gu.size(), 1.f), gu2(gu.size(), 1.f);  // the gaps between matrices kept
    k::detail::winograd_grad_tiles_of<A>(fixed, f, m.data(), gu.data(), 0, batch, es);  // m's values as a dy
    k::winograd_grad_tiles_n<A>(G, m.data(), gu1.data(), 0, batch, es);
    k::detail::winograd_grad_tiles_of<A>(G, G.f, m.data(), gu2.data(), 0, batch, es);
    CHECK(gu == gu1);
    CHECK(gu == gu2);
    std::vector<float> dw(9 * G.c * G.f), dw1(dw.size());
    k::detail::winograd_grad_output_of<A>(std::integral_constant<std::size_t, G.c * G.f>{}, m.data(), dw.data());
    k::winograd_grad_output_n<A>(G, m.data(), dw1.data());
    CHECK(dw == dw1);
    // F(4x4, 3x3)'s (9 tiles of 6x6 a sample, 36 matrices)
    const std::size_t tiles4 = k::winograd_tiles<G, 4>;
    std::vector<float> u4(36 * G.c * G.f), u41(u4.size());
    k::detail::winograd_filters_of<A, 4>(fixed, d.w.data(), u4.data());
    k::winograd_filters_n<A, float, 4>(G, d.w.data(), u41.data());
    CHECK(u4 == u41);
    std::vector<float> v4(36 * batch * tiles4 * G.c), v41(v4.size()), v42(v4.size());
    k::detail::winograd_input_of<A, 4>(fixed, c, d.x.data(), v4.data(), 0, batch);
    k::winograd_input_n<A, float, 4>(G, d.x.data(), v41.data(), 0, batch);
    k::detail::winograd_input_of<A, 4>(G, G.c, d.x.data(), v42.data(), 0, batch);
    CHECK(v4 == v41);
    CHECK(v4 == v42);
    std::vector<float> y4(batch * G.out_size()), y41(y4.size()), y42(y4.size());  // m: 36 x 27 x 64 values of 16 x 108 x 64
    k::detail::winograd_output_of<A, 4>(fixed, f, m.data(), d.b.data(), y4.data(), 0, batch, fn::relu_fn{});
    k::winograd_output_n<A, float, 4>(G, m.data(), d.b.data(), y41.data(), 0, batch, fn::relu_fn{});
    k::detail::winograd_output_of<A, 4>(G, G.f, m.data(), d.b.data(), y42.data(), 0, batch, fn::relu_fn{});
    CHECK(y4 == y41);
    CHECK(y4 == y42);
    // F(3x3, 4x4)'s dW transforms: U of dy's 4x4 tiles (partial at 11 x 11), G^T M G (m as 36 C x F matrices)
    const std::size_t es4 = batch * tiles4 * G.f + 16;
    std::vector<float> gu4(36 * es4, 1.f), gu41(gu4.size(), 1.f), gu42(gu4.size(), 1.f);
    k::detail::winograd_grad_tiles_of<A, 4>(fixed, f, m.data(), gu4.data(), 0, batch, es4);
    k::winograd_grad_tiles_n<A, float, 4>(G, m.data(), gu41.data(), 0, batch, es4);
    k::detail::winograd_grad_tiles_of<A, 4>(G, G.f, m.data(), gu42.data(), 0, batch, es4);
    CHECK(gu4 == gu41);
    CHECK(gu4 == gu42);
    std::vector<float> m4(36 * G.c * G.f);
    for (std::size_t i = 0; i < m4.size(); ++i) m4[i] = float(int(i % 13) - 6) * 0.5f;
    std::vector<float> dw4(9 * G.c * G.f), dw41(dw4.size());
    k::detail::winograd_grad_output_of<A, 4>(std::integral_constant<std::size_t, G.c * G.f>{}, m4.data(), dw4.data());
    k::winograd_grad_output_n<A, float, 4>(G, m4.data(), dw41.data());
    CHECK(dw4 == dw41);
  }
}

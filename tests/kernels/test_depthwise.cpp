// backends/cpu/depthwise.hpp: the depthwise convolution's forward and backward on every
// architecture this CPU runs (tests/kernels/archs.hpp), float and double, against an
// independent reference: the full convolution of kernels/conv_reference.hpp with the
// block-diagonal kernel the depthwise one stands for (w_full[i, k, c, c M + m] = w[i, k, c, m],
// 0 elsewhere), in double. Also the vector path (M = 1) against the scalar loops, and the
// bits independent of the thread count.
#include <doctest/doctest.h>

#include <ctnn/backends/cpu/depthwise.hpp>
#include <ctnn/backends/cpu/thread_pool.hpp>
#include <ctnn/kernels/conv_reference.hpp>
#include <ctnn/layers/padding.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/archs.hpp"

using namespace ctnn;
using kernels::conv_geometry;

namespace {
template <std::size_t H, std::size_t W, std::size_t C, std::size_t M, std::size_t K, std::size_t S, padding P>
constexpr conv_geometry dw_geom() {
  return window_geometry(H, W, C, C * M, K, K, S, P);
}

template <class T>
std::vector<T> values(std::size_t n, std::uint64_t seed) {
  std::vector<T> v(n);
  for (auto& e : v) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    e = T(double(std::int64_t(seed >> 40) % 2001 - 1000) / 1000.0);
  }
  return v;
}

template <conv_geometry G, std::size_t M>
std::vector<double> full_kernel(const std::vector<double>& w) {
  std::vector<double> f(G.kh * G.kw * G.c * G.f, 0.0);
  for (std::size_t p = 0; p < G.kh * G.kw; ++p)
    for (std::size_t c = 0; c < G.c; ++c)
      for (std::size_t m = 0; m < M; ++m) f[(p * G.c + c) * G.f + c * M + m] = w[p * G.f + c * M + m];
  return f;
}

template <class T>
void close(const std::vector<T>& got, const std::vector<double>& want, double tol, const char* what) {
  REQUIRE(got.size() == want.size());
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::abs(double(got[i]) - want[i]) / (1.0 + std::abs(want[i])));
  INFO(what << ": worst relative error " << worst);
  CHECK(worst < tol);
}

template <conv_geometry G, std::size_t M, class T, class Arch>
void check_geometry(std::size_t batch, bool with_bias) {
  INFO("H=" << G.h << " W=" << G.w << " C=" << G.c << " M=" << M << " K=" << G.kh << " S=" << G.stride
            << " pad=" << G.pt << " batch=" << batch << " bias=" << with_bias << " double=" << std::is_same_v<T, double>);
  const auto x = values<T>(batch * G.in_size(), G.h * 31 + G.c);
  const auto w = values<T>(G.kh * G.kw * G.f, G.w * 17 + M);
  const auto b = values<T>(G.f, 5);
  const auto dz = values<T>(batch * G.out_size(), 77 + G.f);
  const double tol = std::is_same_v<T, double> ? 1e-12 : 1e-5;

  // the reference, in double
  std::vector<double> xd(x.begin(), x.end()), wd(w.begin(), w.end()), bd(b.begin(), b.end()),
      dzd(dz.begin(), dz.end());
  if (!with_bias) std::fill(bd.begin(), bd.end(), 0.0);
  const auto wf = full_kernel<G, M>(wd);
  std::vector<double> yr(batch * G.out_size()), dwf(wf.size()), dbr(G.f), dxr(x.size());
  kernels::reference::conv_forward(G, xd.data(), wf.data(), bd.data(), yr.data(), batch);
  kernels::reference::conv_backward(G, xd.data(), wf.data(), dzd.data(), dwf.data(), dbr.data(), dxr.data(), batch);
  std::vector<double> dwr(w.size());
  for (std::size_t p = 0; p < G.kh * G.kw; ++p)
    for (std::size_t j = 0; j < G.f; ++j) dwr[p * G.f + j] = dwf[(p * G.c + j / M) * G.f + j];

  std::vector<T> y(yr.size(), T(9)), dw(w.size(), T(9)), db(G.f, T(9)), dx(x.size(), T(9));
  kernels::cpu::depthwise_forward<G, M, Arch>(x.data(), w.data(), with_bias ? b.data() : nullptr, y.data(), batch);
  close(y, yr, tol, "y");
  kernels::cpu::depthwise_backward<G, M, Arch>(x.data(), dz.data(), w.data(), dw.data(), with_bias ? db.data() : nullptr,
                                               dx.data(), batch);
  close(dw, dwr, tol, "dw");
  close(dx, dxr, tol, "dx");
  if (with_bias) close(db, dbr, tol, "db");
  else CHECK(db == std::vector<T>(G.f, T(9)));  // not written

  // the scalar loops (the vector path's reference, and the path of M > 1)
  std::vector<T> ys(y.size()), dws(dw.size()), dbs(G.f), dxs(dx.size());
  kernels::cpu::depthwise_forward_scalar<G, M>(x.data(), w.data(), with_bias ? b.data() : nullptr, ys.data(), 0, batch);
  kernels::cpu::depthwise_backward_weights_scalar<G, M>(x.data(), dz.data(), dws.data(), dbs.data(), batch, 0, G.f);
  kernels::cpu::depthwise_backward_input_scalar<G, M>(dz.data(), w.data(), dxs.data(), 0, batch);
  std::vector<double> ysd(ys.begin(), ys.end()), dwsd(dws.begin(), dws.end()), dxsd(dxs.begin(), dxs.end());
  close(y, ysd, tol, "y against the scalar loop");
  close(dw, dwsd, tol, "dw against the scalar loop");
  close(dx, dxsd, tol, "dx against the scalar loop");

  // no dx wanted: dw unchanged, nothing else written
  std::vector<T> dw2(dw.size());
  kernels::cpu::depthwise_backward<G, M, Arch>(x.data(), dz.data(), w.data(), dw2.data(), static_cast<T*>(nullptr),
                                               static_cast<T*>(nullptr), batch);
  CHECK(dw2 == dw);
}

template <class Arch, class T>
void check_all() {
  check_geometry<dw_geom<6, 6, 3, 1, 3, 1, padding::valid>(), 1, T, Arch>(2, true);  // fewer channels than a vector
  check_geometry<dw_geom<9, 8, 32, 1, 3, 1, padding::same>(), 1, T, Arch>(3, true);  // MobileNet's 3x3, same
  check_geometry<dw_geom<9, 7, 37, 1, 3, 2, padding::same>(), 1, T, Arch>(2, true);  // stride 2, a channel tail
  check_geometry<dw_geom<8, 8, 19, 1, 5, 3, padding::valid>(), 1, T, Arch>(2, false);  // no bias (separable's step)
  check_geometry<dw_geom<5, 6, 4, 3, 3, 1, padding::same>(), 3, T, Arch>(2, true);    // depth multiplier 3
  check_geometry<dw_geom<7, 5, 2, 2, 2, 2, padding::valid>(), 2, T, Arch>(3, false);
  check_geometry<dw_geom<4, 4, 16, 1, 1, 1, padding::valid>(), 1, T, Arch>(1, true);  // 1x1
}
}  // namespace

TEST_CASE("depthwise: forward and backward against the full convolution's reference, every architecture") {
  const int ran = test::for_each_arch("depthwise_forward / depthwise_backward", []<class Arch>(Arch, const char*) {
    check_all<Arch, float>();
    check_all<Arch, double>();
  });
  CHECK(ran >= 1);
}

TEST_CASE("depthwise: the bits do not depend on the thread count") {
  constexpr auto G = dw_geom<16, 16, 48, 1, 3, 1, padding::same>();
  constexpr std::size_t batch = 8;
  const auto x = values<float>(batch * G.in_size(), 3), w = values<float>(9 * G.f, 4), b = values<float>(G.f, 5),
             dz = values<float>(batch * G.out_size(), 6);
  auto run = [&](std::size_t threads) {
    kernels::cpu::thread_pool::global().resize(threads);
    std::vector<float> y(batch * G.out_size()), dw(w.size()), db(G.f), dx(x.size());
    kernels::cpu::depthwise_forward<G, 1>(x.data(), w.data(), b.data(), y.data(), batch);
    kernels::cpu::depthwise_backward<G, 1>(x.data(), dz.data(), w.data(), dw.data(), db.data(), dx.data(), batch);
    y.insert(y.end(), dw.begin(), dw.end());
    y.insert(y.end(), db.begin(), db.end());
    y.insert(y.end(), dx.begin(), dx.end());
    return y;
  };
  const std::size_t before = kernels::cpu::thread_pool::global().size();
  const auto one = run(1), two = run(2), three = run(3);
  kernels::cpu::thread_pool::global().resize(before);
  CHECK(one == two);
  CHECK(one == three);
}

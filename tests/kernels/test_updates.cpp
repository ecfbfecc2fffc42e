// The optimizers' update rules (kernels/functors.hpp: adam, amsgrad, adagrad,
// sgd, momentum, nesterov, rmsprop plain/centered/momentum) run as the
// optimizers run them, through the CPU's map (backends/cpu/map.hpp: xsimd
// batches and a scalar tail), against the scalar formulas written out here,
// on sizes 1, 3, 17, 255, 1000, float and double, on every xsimd architecture
// this CPU runs (tests/kernels/archs.hpp).
#include <doctest/doctest.h>

#include <ctnn/backends/cpu/map.hpp>
#include <ctnn/core/rng.hpp>
#include <ctnn/kernels/functors.hpp>

#include "kernels/archs.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <cmath>
#include <string>
#include <vector>

using namespace ctnn;

namespace {

// Each optimizer's choice of rule and slots (optimizers/*.hpp), through map<Arch>.
template <class T, class Arch>
bool adam_update(T* w, const T* g, T* m, T* v, T* vh, std::size_t n, T alpha, T b1, T b2, T eps, bool amsgrad) {
  using kernels::cpu::map;
  if (amsgrad) return map<Arch>(fn::amsgrad_update<T>{alpha, b1, b2, eps}, n, w, g, m, v, vh);
  return map<Arch>(fn::adam_update<T>{alpha, b1, b2, eps}, n, w, g, m, v);
}
template <class T, class Arch>
bool adagrad_update(T* w, const T* g, T* acc, std::size_t n, T lr, T eps) {
  return kernels::cpu::map<Arch>(fn::adagrad_update<T>{lr, eps}, n, w, g, acc);
}
template <class T, class Arch>
bool sgd_update(T* w, const T* g, T* m, std::size_t n, T lr, T mom, bool nesterov) {
  using kernels::cpu::map;
  if (mom == T(0)) return map<Arch>(fn::sgd_update<T>{lr}, n, w, g);
  return map<Arch>(fn::momentum_update<T>{lr, mom, nesterov}, n, w, g, m);
}
template <class T, class Arch>
bool rmsprop_update(T* w, const T* g, T* vel, T* mb, T* avg, std::size_t n, T lr, T r, T r1, T eps, T mom,
                    bool centered) {
  using kernels::cpu::map;
  const bool use_mom = mom > T(0);
  if (centered && use_mom) return map<Arch>(fn::rmsprop_update<T, true, true>{lr, r, r1, eps, mom}, n, w, g, vel, avg, mb);
  if (centered) return map<Arch>(fn::rmsprop_update<T, true, false>{lr, r, r1, eps, mom}, n, w, g, vel, avg);
  if (use_mom) return map<Arch>(fn::rmsprop_update<T, false, true>{lr, r, r1, eps, mom}, n, w, g, vel, mb);
  return map<Arch>(fn::rmsprop_update<T, false, false>{lr, r, r1, eps, mom}, n, w, g, vel);
}

template <class T>
std::vector<T> draw(std::size_t n, double lo, double hi, std::uint64_t seed) {
  rng g(seed);
  std::vector<T> v(n);
  for (auto& e : v) e = T(g.uniform(lo, hi));
  return v;
}

template <class T, class Arch>
void check_adam(std::size_t n, bool amsgrad, const char* arch) {
  auto w = draw<T>(n, -1, 1, n), g = draw<T>(n, -1, 1, n + 1), m = draw<T>(n, -0.1, 0.1, n + 2),
       v = draw<T>(n, 0, 0.1, n + 3), vh = draw<T>(n, 0, 0.1, n + 4);
  auto w2 = w, m2 = m, v2 = v, vh2 = vh;
  const T alpha = T(1e-3), b1 = T(0.1), b2 = T(0.001), eps = T(1e-7);
  for (int step = 0; step < 3; ++step) {
    adam_update<T, Arch>(w.data(), g.data(), m.data(), v.data(), vh.data(), n, alpha, b1, b2, eps, amsgrad);
    for (std::size_t i = 0; i < n; ++i) {
      m2[i] += (g[i] - m2[i]) * b1;
      v2[i] += (g[i] * g[i] - v2[i]) * b2;
      if (amsgrad) vh2[i] = std::max(vh2[i], v2[i]);
      w2[i] -= alpha * m2[i] / (std::sqrt(amsgrad ? vh2[i] : v2[i]) + eps);
    }
  }
  const double tol = std::is_same_v<T, float> ? 1e-6 : 1e-14;
  INFO(std::string(arch) << " n=" << n << " amsgrad=" << amsgrad << " float=" << std::is_same_v<T, float>);
  for (std::size_t i = 0; i < n; ++i) {
    CHECK(std::abs(double(w[i]) - double(w2[i])) <= tol);
    CHECK(std::abs(double(m[i]) - double(m2[i])) <= tol);
    CHECK(std::abs(double(v[i]) - double(v2[i])) <= tol);
    CHECK(std::abs(double(vh[i]) - double(vh2[i])) <= tol);
  }
}

template <class T, class Arch>
void check_adagrad(std::size_t n, const char* arch) {
  auto w = draw<T>(n, -1, 1, n), g = draw<T>(n, -1, 1, n + 1), acc = draw<T>(n, 0.1, 0.2, n + 2);
  auto w2 = w, acc2 = acc;
  const T lr = T(0.01), eps = T(1e-7);
  adagrad_update<T, Arch>(w.data(), g.data(), acc.data(), n, lr, eps);
  for (std::size_t i = 0; i < n; ++i) {
    acc2[i] += g[i] * g[i];
    w2[i] -= lr * g[i] / std::sqrt(acc2[i] + eps);
  }
  const double tol = std::is_same_v<T, float> ? 1e-6 : 1e-14;
  INFO(std::string(arch) << " n=" << n << " float=" << std::is_same_v<T, float>);
  for (std::size_t i = 0; i < n; ++i) {
    CHECK(std::abs(double(w[i]) - double(w2[i])) <= tol);
    CHECK(std::abs(double(acc[i]) - double(acc2[i])) <= tol);
  }
}

template <class T, class Arch>
void check_sgd(std::size_t n, T mom, bool nesterov, const char* arch) {
  auto w = draw<T>(n, -1, 1, n), g = draw<T>(n, -1, 1, n + 1), m = draw<T>(n, -0.1, 0.1, n + 2);
  auto w2 = w, m2 = m;
  const T lr = T(0.05);
  for (int step = 0; step < 3; ++step) {
    sgd_update<T, Arch>(w.data(), g.data(), m.data(), n, lr, mom, nesterov);
    for (std::size_t i = 0; i < n; ++i) {
      if (mom == T(0)) {
        w2[i] -= lr * g[i];
        continue;
      }
      m2[i] = mom * m2[i] - lr * g[i];
      w2[i] += nesterov ? mom * m2[i] - lr * g[i] : m2[i];
    }
  }
  const double tol = std::is_same_v<T, float> ? 1e-6 : 1e-14;
  INFO(std::string(arch) << " n=" << n << " mom=" << mom << " nesterov=" << nesterov << " float=" << std::is_same_v<T, float>);
  for (std::size_t i = 0; i < n; ++i) {
    CHECK(std::abs(double(w[i]) - double(w2[i])) <= tol);
    CHECK(std::abs(double(m[i]) - double(m2[i])) <= tol);  // untouched without momentum
  }
}

template <class T, class Arch>
void check_rmsprop(std::size_t n, T mom, bool centered, const char* arch) {
  auto w = draw<T>(n, -1, 1, n), g = draw<T>(n, -1, 1, n + 1), vel = draw<T>(n, 0.1, 0.2, n + 2),
       mb = draw<T>(n, -0.01, 0.01, n + 3), avg = draw<T>(n, -0.05, 0.05, n + 4);
  auto w2 = w, vel2 = vel, mb2 = mb, avg2 = avg;
  const T lr = T(0.01), r = T(0.8), r1 = T(1.0 - 0.8), eps = T(1e-7);
  for (int step = 0; step < 3; ++step) {
    rmsprop_update<T, Arch>(w.data(), g.data(), vel.data(), mb.data(), avg.data(), n, lr, r, r1, eps, mom,
                                 centered);
    for (std::size_t i = 0; i < n; ++i) {
      vel2[i] = r * vel2[i] + r1 * g[i] * g[i];
      T denom = vel2[i] + eps;
      if (centered) {
        avg2[i] = r * avg2[i] + r1 * g[i];
        denom = vel2[i] - avg2[i] * avg2[i] + eps;
      }
      const T inc = lr * g[i] / std::sqrt(denom);
      if (mom > T(0)) {
        mb2[i] = mom * mb2[i] + inc;
        w2[i] -= mb2[i];
      } else {
        w2[i] -= inc;
      }
    }
  }
  const double tol = std::is_same_v<T, float> ? 1e-6 : 1e-14;
  INFO(std::string(arch) << " n=" << n << " mom=" << mom << " centered=" << centered << " float=" << std::is_same_v<T, float>);
  for (std::size_t i = 0; i < n; ++i) {
    CHECK(std::abs(double(w[i]) - double(w2[i])) <= tol);
    CHECK(std::abs(double(vel[i]) - double(vel2[i])) <= tol);
    CHECK(std::abs(double(mb[i]) - double(mb2[i])) <= tol);
    CHECK(std::abs(double(avg[i]) - double(avg2[i])) <= tol);
  }
}

template <class T, class Arch>
void check_all(const char* arch) {
  for (std::size_t n : {1, 3, 17, 255, 1000}) {
    for (bool ams : {false, true}) check_adam<T, Arch>(n, ams, arch);
    check_adagrad<T, Arch>(n, arch);
    for (T mom : {T(0), T(0.9)})
      for (bool flag : {false, true}) {
        check_sgd<T, Arch>(n, mom, flag, arch);
        check_rmsprop<T, Arch>(n, mom, flag, arch);
      }
  }
}

}  // namespace

TEST_CASE("map with the adam, adagrad, sgd and rmsprop rules equals the scalar formulas on every architecture this "
          "CPU runs") {
  const int ran = test::for_each_arch("updates", [](auto arch, const char* name) {
    check_all<float, decltype(arch)>(name);
    check_all<double, decltype(arch)>(name);
  });
  CHECK(ran >= 1);  // x86-64 always has SSE2
}

namespace {
// Each update reports whether every new w is finite: a NaN or infinite gradient at position `bad`
// (in the vector part or in the scalar tail) makes it return false; finite inputs return true.
template <class T, class Arch>
void check_finite_flag(std::size_t n, std::size_t bad, T poison, const char* arch) {
  INFO(std::string(arch) << " n=" << n << " bad=" << bad << " poison=" << double(poison));
  auto run = [&](bool poisoned) {
    auto w = draw<T>(n, -1, 1, n), g = draw<T>(n, -1, 1, n + 1), s1 = draw<T>(n, 0.1, 0.2, n + 2),
         s2 = draw<T>(n, 0.1, 0.2, n + 3), s3 = draw<T>(n, 0.1, 0.2, n + 4);
    if (poisoned) g[bad] = poison;
    const T lr = T(0.01);
    return std::array<bool, 5>{
        adam_update<T, Arch>(w.data(), g.data(), s1.data(), s2.data(), s3.data(), n, lr, T(0.1), T(0.001),
                                           T(1e-7), false),
        adagrad_update<T, Arch>(w.data(), g.data(), s1.data(), n, lr, T(1e-7)),
        sgd_update<T, Arch>(w.data(), g.data(), s1.data(), n, lr, T(0.9), true),
        sgd_update<T, Arch>(w.data(), g.data(), nullptr, n, lr, T(0), false),
        rmsprop_update<T, Arch>(w.data(), g.data(), s1.data(), s2.data(), s3.data(), n, lr, T(0.9), T(0.1),
                                              T(1e-7), T(0.5), true)};
  };
  for (bool ok : run(false)) CHECK(ok);
  for (bool ok : run(true)) CHECK_FALSE(ok);
}
}  // namespace

TEST_CASE("updates report a non-finite parameter, in the vector part and in the scalar tail, on every architecture") {
  const int ran = test::for_each_arch("updates: finite flag", [](auto arch, const char* name) {
    using A = decltype(arch);
    for (std::size_t bad : {std::size_t(0), std::size_t(37), std::size_t(99)}) {
      check_finite_flag<float, A>(100, bad, std::numeric_limits<float>::quiet_NaN(), name);
      check_finite_flag<float, A>(100, bad, std::numeric_limits<float>::infinity(), name);
      check_finite_flag<double, A>(100, bad, -std::numeric_limits<double>::infinity(), name);
    }
  });
  CHECK(ran >= 1);
}

TEST_CASE("map's parts: as many per thread, on multiples of 64 values, the same bits on 1, 2 and 3 threads") {
  using kernels::cpu::map_partition;
  // the MLP's kernels (784 x 256 + 256 and its second layer's 32,896 values), the whole region,
  // one chunk, one chunk and one value
  for (std::size_t n : {std::size_t(200960), std::size_t(32896), std::size_t(235146), std::size_t(32768), std::size_t(32769)}) {
    for (std::size_t t : {std::size_t(1), std::size_t(2), std::size_t(3)}) {
      const auto p = map_partition(n, t);
      CAPTURE(n);
      CAPTURE(t);
      CHECK(p.count * p.length >= n);
      CHECK((p.count - 1) * p.length < n);
      if (p.count > 1) {
        CHECK(p.length % 64 == 0);
        CHECK(p.count % t == 0);  // here every count comes out whole: each thread as many parts
      }
    }
  }
  CHECK(map_partition(32768, 2).count == 1);
  CHECK(map_partition(32896, 2).count == 2);
  CHECK(map_partition(32896, 2).length == 16448);  // 32,768 and 128 before
  CHECK(map_partition(200960, 2).count == 8);       // 7 chunks of 2^15 before: 4 and 3 per thread
  // the same bits whatever the thread count: Adam over 70,003 values (3 chunks; 4 parts on 2 threads)
  const std::size_t n = 70003, before = kernels::cpu::threads();
  std::vector<std::vector<float>> w;
  for (std::size_t t : {std::size_t(1), std::size_t(2), std::size_t(3)}) {
    kernels::cpu::set_threads(t);
    auto x = draw<float>(n, -1, 1, 1), g = draw<float>(n, -1, 1, 2), m = draw<float>(n, -0.1, 0.1, 3),
         v = draw<float>(n, 0.1, 0.2, 4);
    CHECK(kernels::cpu::map<kernels::cpu::default_arch>(fn::adam_update<float>{0.01f, 0.1f, 0.001f, 1e-7f}, n, x.data(),
                                                         g.data(), m.data(), v.data()));
    x.insert(x.end(), m.begin(), m.end());
    x.insert(x.end(), v.begin(), v.end());
    w.push_back(x);
  }
  kernels::cpu::set_threads(before);
  CHECK(w[0] == w[1]);
  CHECK(w[0] == w[2]);
}

// tests/cuda/cuda_test.hpp — helpers of the CUDA tests.
//
// CTNN_REQUIRE_DEVICE() starts every test case: without a usable device it
// prints "CTNN_SKIP: <why>" (CTest then reports the test as skipped) and
// returns. to_device / to_host move float host values to and from device
// arrays of storage type T (rounded on the host, so the CPU reference can be
// computed from exactly the values the device sees: rounded()). Closeness is
// judged relative to the largest magnitude of the reference array:
//   max |got - want| <= tol * max(max |want|, 1e-30)
// tolerance<T>: float 1e-5; __half (float16_t) 2e-3 (two units of the 11-bit
// significand at the largest value: the output's rounding plus float32
// accumulation in another order); __nv_bfloat16 (bfloat16_t) 1.6e-2 (the same for its
// 8-bit significand).
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <ctnn/backends/cpu/half_ops.hpp>  // the CPU models under 16-bit policies the tests compare with
#include <ctnn/backends/cuda/cuda.cuh>

#define CTNN_REQUIRE_DEVICE()                                         \
  do {                                                                \
    if (::ctnn::device_count() == 0) {                                \
      MESSAGE("CTNN_SKIP: " << ::ctnn::device_status());              \
      return;                                                         \
    }                                                                 \
  } while (0)

namespace ctnn_test {

template <class T>
inline double tolerance() {
  if constexpr (std::is_same_v<T, float>)
    return 1e-5;
  else if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, ctnn::float16_t>)
    return 2e-3;
  else
    return 1.6e-2;
}

inline std::vector<float> random_values(std::size_t n, std::uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// The values as T would store them, widened back to float.
template <class T>
std::vector<float> rounded(std::vector<float> v) {
  for (auto& x : v) x = ctnn::cuda_detail::load(ctnn::cuda_detail::store<T>(x));
  return v;
}

template <class T>
ctnn::device_buffer<T> to_device(const std::vector<float>& v) {
  std::vector<T> h(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) h[i] = ctnn::cuda_detail::store<T>(v[i]);
  ctnn::device_buffer<T> d(std::max<std::size_t>(v.size(), 1));
  d.upload(h.data(), h.size());
  return d;
}

template <class T>
std::vector<float> to_host(const ctnn::device_buffer<T>& d, std::size_t n) {
  CTNN_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<T> h(n);
  d.download(h.data(), n);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = ctnn::cuda_detail::load(h[i]);
  return v;
}

// max |got - want| / max |want|
inline double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  double err = 0, mag = 1e-30;
  for (std::size_t i = 0; i < got.size(); ++i) {
    err = std::max(err, std::abs(double(got[i]) - double(want[i])));
    mag = std::max(mag, std::abs(double(want[i])));
  }
  return err / mag;
}

// Region r of a model's memory as float values on the host (a host view).
template <class M>
std::vector<float> download(const M& m, ctnn::role r) {
  const auto v = m.host_region(r);
  const float* p = reinterpret_cast<const float*>(v.data());
  return std::vector<float>(p, p + v.size() / sizeof(float));
}
inline std::vector<float> values(std::span<const float> s) { return {s.begin(), s.end()}; }

}  // namespace ctnn_test

#define CHECK_CLOSE(T, got, want)                                                             \
  do {                                                                                        \
    const double e_ = ::ctnn_test::relative_error(got, want);                                 \
    INFO(#got << " vs " << #want << " (" << ::ctnn::storage<T>::name << "): relative error " << e_); \
    CHECK(e_ <= ::ctnn_test::tolerance<T>());                                                 \
  } while (0)

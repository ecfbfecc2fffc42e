// backends/cpu/gemm/gemv.hpp: the one-row product (simd_gemm's gemv mode, M = 1)
// on every xsimd architecture this CPU runs (tests/kernels/archs.hpp), against
// a scalar reference in double, with x holding zeros as ReLU outputs and
// image backgrounds do (the rows of B they select are skipped): tails of N
// (1 to 4 vectors after the chunks, partial or not; after the whole-row groups of 16-register
// targets) and K, K = 1, K past the skip's bit words (every row read), bias or not,
// relu or none, x contiguous or strided (gathered first); rows skipped are
// never read; results bit-identical whatever the thread count (every architecture).
#include <doctest/doctest.h>

#include <ctnn/backends/cpu/gemm.hpp>
#include <ctnn/backends/cpu/gemm/gemv.hpp>
#include <ctnn/backends/cpu/simd_gemm.hpp>
#include <ctnn/backends/cpu/thread_pool.hpp>
#include <ctnn/core/rng.hpp>

#include "kernels/archs.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

using namespace ctnn;
using kernels::cpu::epilogue;
using kernels::cpu::strided;

namespace {

// x[p] for p < k: 0 where pattern says so, else uniform in [-1, 1] (never 0).
//   0: no zeros; 1: every other one; 2: about half, at random; 3: all but the
//   last; 4: all zeros; 5: the first 300 (a background), then every third.
template <class T>
std::vector<T> make_x(std::size_t k, int pattern, rng& g) {
  std::vector<T> x(k);
  for (std::size_t p = 0; p < k; ++p) {
    const double u = g.uniform(-1, 1), v = g.uniform(0, 1);
    const bool zero = pattern == 1 ? p % 2 == 0
                      : pattern == 2 ? v < 0.5
                      : pattern == 3 ? p + 1 < k
                      : pattern == 4 ? true
                      : pattern == 5 ? p < 300 || p % 3 == 0
                                     : false;
    x[p] = zero ? T(0) : T(u == 0 ? 0.5 : u);
  }
  return x;
}

template <class Arch, class T>
void check_gemv(const char* name) {
  const double eps = std::is_same_v<T, float> ? 1.2e-7 : 2.3e-16;
  rng g(11);
  // 30, 60: a tail of 4 vectors; with 16 registers 128, 168 take chunks of 12 vectors (AVX2
  // floats: 12 + 4; 12 + 8 and a tail), and past 24 vectors the rows go whole in groups of 8 and
  // blocks of 2 vectors up to a multiple of 4 vectors (gemv_groups; AVX2 floats: 205, 250, 256,
  // 400, then a tail of 13, 26, 0 and 16 columns); K = 1, 2, 3, 17, 65, 255 and the patterns (no
  // row read, one, half) leave 0 to 7 rows past the last group of 8
  for (std::size_t N : {1, 3, 10, 17, 30, 33, 60, 64, 128, 168, 205, 250, 256, 400})
    for (std::size_t K : {1, 2, 3, 17, 64, 65, 255, 784, 4097})
      for (int pattern = 0; pattern < 6; ++pattern)
        for (int variant = 0; variant < 4; ++variant) {
          if (K == 4097 && (pattern % 2 || N == 168)) continue;  // the long K: fewer cases
          const bool with_bias = variant & 1, relu = variant & 2, strided_x = (N + K + pattern) % 3 == 0;
          const std::vector<T> x = make_x<T>(K, pattern, g);
          std::vector<T> xs(2 * K, T(9)), b(K * N), bias(N);
          for (std::size_t p = 0; p < K; ++p) xs[2 * p] = x[p];
          for (auto& e : b) e = T(g.uniform(-1, 1));
          for (auto& e : bias) e = T(g.uniform(-1, 1));
          std::vector<T> y(N + 5, T(7));
          const strided<T> a = strided_x ? strided<T>{xs.data(), 2 * K, 2} : strided<T>{x.data(), K, 1};
          kernels::cpu::simd_gemm<Arch>(1, N, K, a, strided<T>{b.data(), N, 1}, y.data(), N,
                                        with_bias ? bias.data() : nullptr, relu ? epilogue::relu : epilogue::none);
          double worst = 0;  // error in units of (K + 2) * eps * sum |terms|
          for (std::size_t j = 0; j < N; ++j) {
            double s = with_bias ? double(bias[j]) : 0.0, sc = std::abs(s);
            for (std::size_t p = 0; p < K; ++p) {
              s += double(x[p]) * double(b[p * N + j]);
              sc += std::abs(double(x[p]) * double(b[p * N + j]));
            }
            if (relu) s = std::max(s, 0.0);
            worst = std::max(worst, std::abs(double(y[j]) - s) / ((double(K) + 2) * eps * sc + 1e-300));
          }
          INFO(std::string(name) << " N=" << N << " K=" << K << " pattern=" << pattern << " bias=" << with_bias
                                 << " relu=" << relu << " strided x=" << strided_x);
          CHECK(worst <= 1.0);
          for (std::size_t j = N; j < y.size(); ++j) CHECK(y[j] == T(7));  // nothing past y
        }
}

// The rows of B where x is 0 are not read: NaN there leaves y finite (a
// dense product gives NaN: 0 x NaN), where x is not 0 it reaches y.
template <class Arch, class T>
void check_skipped_rows(const char* name) {
  const T nan = std::numeric_limits<T>::quiet_NaN();
  for (std::size_t N : {3, 10, 64, 256})
    for (std::size_t K : {1, 2, 70, 784}) {
      rng g(N + K);
      std::vector<T> x = make_x<T>(K, 2, g), b(K * N), y(N);
      x[0] = T(0);
      if (K > 1) x[K - 1] = T(0.5);
      for (std::size_t p = 0; p < K; ++p)
        for (std::size_t j = 0; j < N; ++j) b[p * N + j] = x[p] == T(0) ? nan : T(g.uniform(-1, 1));
      kernels::cpu::simd_gemm<Arch>(1, N, K, strided<T>{x.data(), K, 1}, strided<T>{b.data(), N, 1}, y.data(), N,
                                    static_cast<const T*>(nullptr), epilogue::none);
      INFO(std::string(name) << " N=" << N << " K=" << K);
      CHECK(std::all_of(y.begin(), y.end(), [](T v) { return std::isfinite(v); }));
      if (K > 1) {
        const std::size_t p = std::size_t(std::find_if(x.begin(), x.end(), [](T v) { return v != T(0); }) - x.begin());
        REQUIRE(p < K);
        b[p * N + N - 1] = nan;  // a row that is read
        kernels::cpu::simd_gemm<Arch>(1, N, K, strided<T>{x.data(), K, 1}, strided<T>{b.data(), N, 1}, y.data(), N,
                                      static_cast<const T*>(nullptr), epilogue::none);
        CHECK(std::isnan(y[N - 1]));
      }
    }
}

// A NaN or infinite x is not 0: its row is read and y is NaN or infinite, as a
// dense product's (fit's NaN-loss checks and terminate_on_nan rely on it), also
// when the rest of x is zeros (the skipping path).
template <class Arch, class T>
void check_nonfinite_x(const char* name) {
  for (T bad : {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity()})
    for (std::size_t N : {1, 3, 10, 64, 256})
      for (std::size_t K : {1, 2, 9, 70, 784})
        for (std::size_t at : {std::size_t(0), K / 2, K - 1}) {
          std::vector<T> x(K, T(0)), b(K * N, T(1)), y(N);
          x[at] = bad;
          kernels::cpu::simd_gemm<Arch>(1, N, K, strided<T>{x.data(), K, 1}, strided<T>{b.data(), N, 1}, y.data(), N,
                                        static_cast<const T*>(nullptr), epilogue::none);
          INFO(std::string(name) << " N=" << N << " K=" << K << " at=" << at << " x=" << bad);
          CHECK(std::all_of(y.begin(), y.end(), [&](T v) { return std::isnan(bad) ? std::isnan(v) : std::isinf(v); }));
        }
}

// simd::nonzero_rows (the words that say which rows gemv reads) against a
// scalar loop: bit p % 64 of word p / 64 set where x[p] != 0 (NaN and
// infinities set, -0 and 0 not), for K across vector and word edges (a last
// partial vector; a last word of 1 to 63 values; a partial vector at a word's
// end), every architecture (AVX-512 mask registers, AVX and SSE movemask).
template <class Arch, class T>
void check_nonzero_rows(const char* name) {
  rng g(5);
  const T specials[] = {T(0), -T(0), std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                        -std::numeric_limits<T>::infinity(), std::numeric_limits<T>::min(), T(-1)};
  for (std::size_t K : {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 100, 127, 128, 129, 255, 784, 4095, 4096})
    for (int pattern = 0; pattern < 7; ++pattern) {
      std::vector<T> x = make_x<T>(K, pattern % 6, g);
      if (pattern == 6)  // the special values at random places, among zeros
        for (std::size_t p = 0; p < K; ++p) x[p] = specials[std::size_t(g.uniform(0, 7)) % 7];
      std::vector<std::uint64_t> words(kernels::cpu::simd::nonzero_words + 1, 0x5a5a5a5a5a5a5a5aull);
      kernels::cpu::simd::nonzero_rows<Arch>(K, x.data(), words.data());
      std::vector<std::uint64_t> want((K + 63) / 64, 0);
      for (std::size_t p = 0; p < K; ++p)
        if (!(x[p] == T(0))) want[p / 64] |= std::uint64_t(1) << (p % 64);
      INFO(std::string(name) << " K=" << K << " pattern=" << pattern);
      for (std::size_t w = 0; w < want.size(); ++w) CHECK(words[w] == want[w]);
      CHECK(words[want.size()] == 0x5a5a5a5a5a5a5a5aull);  // nothing past the last word
      // row_list: the selected rows' indices, ascending, as for_each_row visits them; it may
      // write up to k + 8 values, nothing past them
      if (K <= kernels::cpu::simd::nonzero_words * 64) {
        std::vector<std::uint16_t> list(K + 8 + 4, 0xabcd), loop;
        const std::size_t count = kernels::cpu::simd::row_list(K, words.data(), list.data());
        kernels::cpu::simd::for_each_row(K, words.data(), [&](std::size_t p) { loop.push_back(std::uint16_t(p)); });
        REQUIRE(count == loop.size());
        CHECK(std::equal(loop.begin(), loop.end(), list.begin()));
        for (std::size_t i = K + 8; i < list.size(); ++i) CHECK(list[i] == 0xabcd);
      }
    }
}

}  // namespace

TEST_CASE("gemv's row selection (nonzero_rows) equals a scalar loop on every architecture this CPU runs") {
  const int ran = test::for_each_arch("nonzero_rows", [](auto arch, const char* name) {
    check_nonzero_rows<decltype(arch), float>(name);
    check_nonzero_rows<decltype(arch), double>(name);
  });
  CHECK(ran >= 1);
}

TEST_CASE("gemv (one row) with zeros in x equals the reference on every architecture this CPU runs") {
  const int ran = test::for_each_arch("gemv", [](auto arch, const char* name) {
    check_gemv<decltype(arch), float>(name);
    check_gemv<decltype(arch), double>(name);
  });
  CHECK(ran >= 1);  // x86-64 always has SSE2
}

TEST_CASE("gemv reads the row of a NaN or infinite x (not 0) on every architecture this CPU runs") {
  const int ran = test::for_each_arch("gemv nonfinite x", [](auto arch, const char* name) {
    check_nonfinite_x<decltype(arch), float>(name);
    check_nonfinite_x<decltype(arch), double>(name);
  });
  CHECK(ran >= 1);
}

TEST_CASE("gemv reads no row of B where x is 0, on every architecture this CPU runs") {
  const int ran = test::for_each_arch("gemv skipped rows", [](auto arch, const char* name) {
    check_skipped_rows<decltype(arch), float>(name);
    check_skipped_rows<decltype(arch), double>(name);
  });
  CHECK(ran >= 1);
}

TEST_CASE("gemv with zeros in x: bit-identical whatever the thread count, on every architecture this CPU runs") {
  // The pool's tasks are column chunks of 8 vectors; one thread runs chunks of 16 (AVX-512) or
  // 12 and 8 (16 registers): every column must sum the same values in the same order in both.
  const std::size_t before = kernels::cpu::threads();
  const int ran = test::for_each_arch("gemv threads", [](auto arch, const char* name) {
    using Arch = decltype(arch);
    for (std::size_t N : {256, 300, 784})
      for (std::size_t K : {512, 784}) {
        rng g(N * K);
        const std::vector<float> x = make_x<float>(K, 5, g);
        std::vector<float> b(K * N), bias(N);
        for (auto& e : b) e = float(g.uniform(-1, 1));
        for (auto& e : bias) e = float(g.uniform(-1, 1));
        std::vector<std::vector<float>> out;
        for (std::size_t t : {1, 2, 3}) {
          kernels::cpu::set_threads(t);
          std::vector<float> y(N);
          kernels::cpu::simd_gemm<Arch>(1, N, K, strided<float>{x.data(), K, 1}, strided<float>{b.data(), N, 1},
                                        y.data(), N, bias.data(), epilogue::relu);
          out.push_back(std::move(y));
        }
        INFO(std::string(name) << " N=" << N << " K=" << K);
        CHECK(std::memcmp(out[0].data(), out[1].data(), N * sizeof(float)) == 0);
        CHECK(std::memcmp(out[0].data(), out[2].data(), N * sizeof(float)) == 0);
      }
  });
  CHECK(ran >= 1);
  kernels::cpu::set_threads(before);
}

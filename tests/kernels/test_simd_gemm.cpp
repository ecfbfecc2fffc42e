// backends/cpu/simd_gemm.hpp on every xsimd architecture the compiler enables
// and this CPU runs (the list in tests/kernels/archs.hpp, checked at run time
// with backends/cpu/arch.hpp), against a scalar reference in
// double precision, on awkward sizes, transposed operands, bias and relu; and
// bit-identical results whatever the thread count (backends/cpu/thread_pool.hpp).
#include <doctest/doctest.h>

#include <ctnn/core/rng.hpp>
#include <ctnn/backends/cpu/arch.hpp>
#include <ctnn/backends/cpu/gemm.hpp>
#include <ctnn/backends/cpu/simd_gemm.hpp>
#include <ctnn/backends/cpu/thread_pool.hpp>

#include "kernels/archs.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace ctnn;
using kernels::cpu::epilogue;
using kernels::cpu::strided;

namespace {

template <class T>
struct problem {
  std::size_t M, N, K;
  bool ta, tb;  // A stored as K x M, B stored as N x K
  std::vector<T> a, b, bias;
  problem(std::size_t m, std::size_t n, std::size_t k, bool ta_, bool tb_, std::uint64_t seed)
      : M(m), N(n), K(k), ta(ta_), tb(tb_), a(m * k), b(k * n), bias(n) {
    rng g(seed);
    for (auto* v : {&a, &b, &bias})
      for (auto& e : *v) e = T(g.uniform(-1, 1));
  }
  strided<T> A() const { return ta ? strided<T>{a.data(), 1, M} : strided<T>{a.data(), K, 1}; }
  strided<T> B() const { return tb ? strided<T>{b.data(), 1, K} : strided<T>{b.data(), N, 1}; }
  // Reference in double, and the scale sum |a||b| each output may be off by a few ulps of.
  void reference(const T* bias_p, bool relu, std::vector<double>& out, std::vector<double>& scale) const {
    out.assign(M * N, 0);
    scale.assign(M * N, 0);
    const auto A_ = A(), B_ = B();
    for (std::size_t i = 0; i < M; ++i)
      for (std::size_t j = 0; j < N; ++j) {
        double s = bias_p ? double(bias_p[j]) : 0.0, sc = bias_p ? std::abs(double(bias_p[j])) : 0.0;
        for (std::size_t p = 0; p < K; ++p) {
          const double t = double(A_.p[i * A_.rs + p * A_.cs]) * double(B_.p[p * B_.rs + j * B_.cs]);
          s += t;
          sc += std::abs(t);
        }
        out[i * N + j] = relu ? std::max(s, 0.0) : s;
        scale[i * N + j] = sc;
      }
  }
};

using sizes = std::vector<std::size_t>;

template <class Arch, class T>
void check_arch(const char* name, const sizes& Ms = {1, 2, 3, 8, 17, 24, 25, 64, 255},
                const sizes& Ns = {1, 2, 3, 10, 17, 33, 128, 400}, const sizes& Ks = {1, 3, 17, 255, 300},
                unsigned variants = 0xF) {  // bit v: variant v (ta = v & 1, tb = v & 2) runs
  const double eps = std::is_same_v<T, float> ? 1.2e-7 : 2.3e-16;
  for (std::size_t M : Ms)
    for (std::size_t N : Ns)
      for (std::size_t K : Ks)
        for (int variant = 0; variant < 4; ++variant) {
          if (!(variants >> variant & 1)) continue;
          const bool ta = variant & 1, tb = variant & 2;
          const problem<T> pr(M, N, K, ta, tb, M * 10007 + N * 101 + K + variant);
          const bool with_bias = (M + N + K + variant) % 2 == 0, relu = variant == 1 || variant == 2;
          const T* bias = with_bias ? pr.bias.data() : nullptr;
          std::vector<T> c(M * N + 5, T(7));
          kernels::cpu::simd_gemm<Arch>(M, N, K, pr.A(), pr.B(), c.data(), N, bias, relu ? epilogue::relu : epilogue::none);
          std::vector<double> ref, scale;
          pr.reference(bias, relu, ref, scale);
          double worst = 0;  // error in units of (K + 2) * eps * scale
          for (std::size_t i = 0; i < M * N; ++i)
            worst = std::max(worst, std::abs(double(c[i]) - ref[i]) / ((double(K) + 2) * eps * scale[i] + 1e-300));
          INFO(std::string(name) << " M=" << M << " N=" << N << " K=" << K << " ta=" << ta << " tb=" << tb << " bias=" << with_bias
                    << " relu=" << relu);
          CHECK(worst <= 1.0);
          // nothing written past C
          for (std::size_t i = M * N; i < c.size(); ++i) CHECK(c[i] == T(7));
        }
}

}  // namespace

TEST_CASE("simd_gemm equals the reference on every architecture this CPU runs") {
  const int ran = test::for_each_arch("simd_gemm", [](auto arch, const char* name) {
    check_arch<decltype(arch), float>(name);
    check_arch<decltype(arch), double>(name);
  });
  CHECK(ran >= 1);  // x86-64 always has SSE2
}

// K up to 16 with A's rows in place (plan.rows_run: dX = dY W^T of the 10-wide layer, a first
// convolution), up to 64 with A transposed (dW at batch 64): the full tiles of a panel in one
// run (simd::micro_run), partial row blocks and panels through the micro-kernel; several tasks
// (M = 97, 100, 192, 255).
TEST_CASE("simd_gemm with a short K (full tiles in one run) equals the reference on every architecture") {
  const int ran = test::for_each_arch("simd_gemm, short K", [](auto arch, const char* name) {
    const sizes Ms{6, 12, 13, 16, 97, 100, 192, 255}, Ns{8, 16, 17, 32, 128, 131}, Ks{2, 8, 9, 10, 16, 33, 64};
    check_arch<decltype(arch), float>(name, Ms, Ns, Ks);
    check_arch<decltype(arch), double>(name, Ms, Ns, Ks);
  });
  CHECK(ran >= 1);
}

// A transposed A of 512 rows or more and K from 128 to one block (384 with 16 registers, 256
// with 32) is packed before the tiles run (plan.hpp: pack_at; dW of 784x256 at batch 256),
// partial last row blocks (515 = 85 x 6 + 5 = 64 x 8 + 3, 784 = 130 x 6 + 4) and panels included,
// and none (528 = 88 x 6 = 44 x 12: the vector copy's strips of 8 blocks end at A's last column);
// K = 385 and 127 (and 300 with 32 registers) read it in place.
TEST_CASE("simd_gemm with a transposed A of many rows (packed) equals the reference on every architecture") {
  const int ran = test::for_each_arch("simd_gemm, many rows", [](auto arch, const char* name) {
    const sizes Ms{512, 515, 528, 784}, Ns{16, 33}, Ks{127, 128, 255, 300, 385};
    check_arch<decltype(arch), float>(name, Ms, Ns, Ks);
    check_arch<decltype(arch), double>(name, {515}, {17}, {128, 300});
  });
  CHECK(ran >= 1);
}

// A's rows in place with a last row task over whole tiles, some of MR - 1 rows (plan.short_tiles: M = 33
// is 3 tiles of 11 on AVX-512, 22 is 11 11 there and 6 6 5 5 on 16 registers; 92 = 48 + 4 tiles of 11),
// K blocked at 300.
TEST_CASE("simd_gemm with tiles of MR - 1 rows equals the reference on every architecture") {
  const int ran = test::for_each_arch("simd_gemm, short tiles", [](auto arch, const char* name) {
    const sizes Ms{7, 14, 22, 23, 28, 30, 33, 92}, Ns{32, 33, 512}, Ks{1, 28, 300};
    check_arch<decltype(arch), float>(name, Ms, Ns, Ks);
    check_arch<decltype(arch), double>(name, {5, 28}, {17, 33}, {28});
  });
  CHECK(ran >= 1);
}

// K blocks of at most 128 rows outermost (plan.hpp: a product too wide for blocks of 256 in the L2
// budget, M + N from 513 to 1024: dR of an LSTM(128), 128 x 512), each block packed while the one
// before runs; partial row blocks and panels (77 rows, 520 columns), 3 and 5 blocks.
TEST_CASE("simd_gemm with K blocks of 128 rows outermost equals the reference on every architecture") {
  const int ran = test::for_each_arch("simd_gemm, K blocks of 128", [](auto arch, const char* name) {
    check_arch<decltype(arch), float>(name, {77}, {520}, {300, 600});
    check_arch<decltype(arch), double>(name, {77}, {520}, {300});
  });
  CHECK(ran >= 1);
}

// A's rows in place, a C over the L2 budget and K over two blocks (plan.hpp: wide_c, 1024^2): B packed in K
// blocks outermost, C loaded and stored once per block; partial last row blocks and panels (515 x 260, 257 x 257),
// 3 blocks of 174; row-major A only (variants 0 and 2: B row-major and transposed).
TEST_CASE("simd_gemm with a C over the L2 budget and K blocks outermost equals the reference on every architecture") {
  const int ran = test::for_each_arch("simd_gemm, wide C", [](auto arch, const char* name) {
    check_arch<decltype(arch), float>(name, {515}, {260}, {520}, 0b0101);
    check_arch<decltype(arch), double>(name, {257}, {257}, {520}, 0b0001);
  });
  CHECK(ran >= 1);
}

// A transposed A of more than two row blocks and a long K (plan.hpp: dW of an LSTM(128)'s kernel, 28 x 512 over
// 28 steps): B packed in K blocks outermost instead of read in place; a partial last row block (28, 17 rows on
// AVX-512) and panel (40 columns), 5 blocks of 120.
TEST_CASE("simd_gemm with a transposed A of a few row blocks and a long K equals the reference on every architecture") {
  const int ran = test::for_each_arch("simd_gemm, few rows, long K", [](auto arch, const char* name) {
    check_arch<decltype(arch), float>(name, {28}, {40, 512}, {600});
    check_arch<decltype(arch), double>(name, {17}, {33}, {600});
  });
  CHECK(ran >= 1);
}

// simd_v<T, Arch>: xsimd for float and double on an architecture the compiler targets, else scalar.
static_assert(kernels::cpu::simd_v<float, xsimd::sse2> && kernels::cpu::simd_v<double, xsimd::sse2>);
static_assert(!kernels::cpu::simd_v<int, xsimd::sse2> && !kernels::cpu::simd_v<long double, xsimd::sse2>);
static_assert(!kernels::cpu::simd_v<float, xsimd::unavailable>);
static_assert(kernels::cpu::has_simd_v<float> == kernels::cpu::simd_v<float, kernels::cpu::default_arch>);

TEST_CASE("the default architecture is one the CPU runs") {
  CHECK(kernels::cpu::arch_available<kernels::cpu::default_arch>());
}

TEST_CASE("run-time gemm: strided operands, ldc > N, and bad arguments") {
  const problem<float> pr(5, 7, 300, true, true, 3);
  std::vector<float> c(5 * 9, -1.0f);
  kernels::cpu::gemm(5, 7, 300, pr.A(), pr.B(), c.data(), 9, pr.bias.data(), epilogue::relu);
  std::vector<double> ref, scale;
  pr.reference(pr.bias.data(), true, ref, scale);
  for (std::size_t i = 0; i < 5; ++i) {
    for (std::size_t j = 0; j < 7; ++j) CHECK(std::abs(c[i * 9 + j] - ref[i * 7 + j]) <= 1e-5 * (scale[i * 7 + j] + 1));
    CHECK(c[i * 9 + 7] == -1.0f);  // the gap between rows is untouched
    CHECK(c[i * 9 + 8] == -1.0f);
  }
  // two rows and a small B: one gemv per row (simd::gemv_rows_max), each row at its ldc
  const problem<float> p2(2, 7, 300, false, false, 4);
  std::vector<float> c2(2 * 9, -1.0f);
  kernels::cpu::gemm(2, 7, 300, p2.A(), p2.B(), c2.data(), 9, p2.bias.data(), epilogue::relu);
  p2.reference(p2.bias.data(), true, ref, scale);
  for (std::size_t i = 0; i < 2; ++i) {
    for (std::size_t j = 0; j < 7; ++j) CHECK(std::abs(c2[i * 9 + j] - ref[i * 7 + j]) <= 1e-5 * (scale[i * 7 + j] + 1));
    CHECK(c2[i * 9 + 7] == -1.0f);
    CHECK(c2[i * 9 + 8] == -1.0f);
  }
  // K = 0: the bias (through the epilogue) alone
  std::vector<float> z(3 * 7);
  kernels::cpu::gemm<float>(3, 7, 0, {nullptr, 0, 1}, {nullptr, 7, 1}, z.data(), 7, pr.bias.data());
  for (std::size_t j = 0; j < 7; ++j) CHECK(z[2 * 7 + j] == pr.bias[j]);
  CHECK_THROWS_WITH(kernels::cpu::gemm(5, 7, 300, pr.A(), pr.B(), c.data(), 6),
                    doctest::Contains("kernels::cpu::gemm: ldc (6) is smaller than N (7)"));
  CHECK_THROWS_WITH(kernels::cpu::gemm<float>(5, 7, 300, {nullptr, 300, 1}, pr.B(), c.data(), 9),
                    doctest::Contains("null matrix pointer"));
}

TEST_CASE("results are bit-identical whatever the thread count") {
  const std::size_t before = kernels::cpu::threads();
  struct shape {
    std::size_t M, N, K;
    bool ta, tb;
  };
  for (const shape s : {shape{256, 256, 784, false, false}, shape{784, 256, 256, true, false},
                        shape{256, 784, 256, false, true}, shape{300, 130, 513, false, false}, shape{16, 256, 784, false, false},
                        shape{1, 784, 512, false, false}, shape{1, 300, 256, false, true},
                        shape{288, 64, 7744, true, false} /* dW of a conv: K blocks outermost */,
                        shape{128, 512, 1728, true, false} /* dR of an LSTM(128) at batch 64: K blocks of 124 */,
                        shape{9, 32, 5000, true, false} /* few rows, long K */,
                        shape{28, 512, 1792, true, false} /* dW of an LSTM(128) at batch 64: B packed in K blocks */,
                        shape{128, 10, 4096, true, false} /* dW of a 10-wide layer: C^T on AVX2 */,
                        shape{256, 10, 128, false, false} /* Y = X W of a 10-wide layer: C^T on AVX2 */,
                        shape{4096, 10, 128, false, false} /* the same with several tasks of X^T panels */,
                        shape{64, 784, 256, false, true} /* dX: B^T packed by 8 x 8 transposes */,
                        shape{1000, 128, 10, false, true} /* dX of a 10-wide layer: short K, tiles in runs */,
                        shape{256, 128, 64, true, false} /* dW at batch 64: A transposed, tiles in runs */,
                        shape{64, 784, 256, false, false} /* 64 rows: B in place */,
                        shape{515, 40, 300, true, false} /* A transposed, 515 rows: packed with 16 registers */}) {
    const problem<float> pr(s.M, s.N, s.K, s.ta, s.tb, s.M + s.N + s.K);
    std::vector<std::vector<float>> out;
    for (std::size_t t : {1, 2, 3}) {
      kernels::cpu::set_threads(t);
      CHECK(kernels::cpu::threads() == t);
      std::vector<float> c(s.M * s.N);
      kernels::cpu::gemm(s.M, s.N, s.K, pr.A(), pr.B(), c.data(), s.N, pr.bias.data(), epilogue::none);
      out.push_back(std::move(c));
    }
    INFO("M=" << s.M << " N=" << s.N << " K=" << s.K);
    CHECK(std::memcmp(out[0].data(), out[1].data(), out[0].size() * sizeof(float)) == 0);
    CHECK(std::memcmp(out[0].data(), out[2].data(), out[0].size() * sizeof(float)) == 0);
  }
  kernels::cpu::set_threads(before);
}

TEST_CASE("thread_pool runs every task exactly once, nested runs serially, and checks its size") {
  kernels::cpu::thread_pool pool(3);
  CHECK(pool.size() == 3);
  for (std::size_t tasks : {0, 1, 2, 7, 1000}) {
    std::vector<int> hits(tasks, 0);
    pool.run(tasks, [&](std::size_t t) {
      ++hits[t];
      pool.run(2, [&](std::size_t) {});  // nested: serial on this thread, no deadlock
    });
    CHECK(std::count(hits.begin(), hits.end(), 1) == std::ptrdiff_t(tasks));
  }
  pool.resize(1);
  CHECK(pool.size() == 1);
  CHECK_THROWS_WITH(pool.resize(0), doctest::Contains("thread_pool::resize: the thread count must be in [1, 256], got 0"));
}

TEST_CASE("thread_pool::run(tasks, f, parallel): serial runs go in order on the calling thread, functors are called in place") {
  kernels::cpu::thread_pool pool(3);
  const auto caller = std::this_thread::get_id();
  std::vector<std::size_t> order;
  std::vector<std::thread::id> where;
  pool.run(
      50,
      [&](std::size_t t) {
        order.push_back(t);
        where.push_back(std::this_thread::get_id());
      },
      false);
  REQUIRE(order.size() == 50);
  for (std::size_t t = 0; t < 50; ++t) CHECK(order[t] == t);
  CHECK(std::count(where.begin(), where.end(), caller) == 50);
  // parallel: every task once, on any thread.
  std::vector<std::atomic<int>> hits(200);
  std::atomic<int> calls{0};
  const auto counting = [&](std::size_t t) {
    ++hits[t];
    calls.fetch_add(1);
  };
  pool.run(200, counting, true);
  CHECK(calls.load() == 200);
  CHECK(std::all_of(hits.begin(), hits.end(), [](const std::atomic<int>& h) { return h.load() == 1; }));
  // A functor with state, passed as an lvalue, is called on that object, not on a copy.
  struct tally {
    int n = 0;
    void operator()(std::size_t) { ++n; }
  } count;
  pool.run(7, count, false);
  pool.run(1, count);  // one task: on the caller
  CHECK(count.n == 8);
  pool.run(0, counting, false);  // no task, no call
  CHECK(calls.load() == 200);
}

TEST_CASE("thread_pool: back-to-back runs on 2 and 3 threads run every task once, the caller's tasks a prefix") {
  // The caller takes tasks from the front and the workers from the back, so the caller's tasks
  // are [0, k) for some k; many short runs in a row, with resizes and sleeps (the workers' 200 us
  // spin over) between, exercise how workers join a run.
  for (std::size_t threads : {2, 3}) {
    kernels::cpu::thread_pool pool(threads);
    const auto caller = std::this_thread::get_id();
    std::atomic<unsigned> sink{0};
    for (int round = 0; round < 3; ++round) {
      for (int r = 0; r < 500; ++r) {
        const std::size_t tasks = 2 + std::size_t(r % 37);
        std::vector<std::atomic<int>> hits(tasks);
        std::vector<std::atomic<bool>> on_caller(tasks);
        pool.run(tasks, [&](std::size_t t) {
          ++hits[t];
          on_caller[t] = std::this_thread::get_id() == caller;
          unsigned x = unsigned(t);  // a little work, so that the threads overlap
          for (int i = 0; i < 200; ++i) x = x * 1664525u + 1013904223u;
          sink += x;
        });
        std::size_t k = 0;
        while (k < tasks && on_caller[k]) ++k;
        INFO("threads " << threads << ", run " << r << ", tasks " << tasks << ", caller's prefix " << k);
        CHECK(std::all_of(hits.begin(), hits.end(), [](const std::atomic<int>& h) { return h.load() == 1; }));
        CHECK(std::none_of(on_caller.begin() + std::ptrdiff_t(k), on_caller.end(),
                           [](const std::atomic<bool>& c) { return c.load(); }));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the workers go to sleep
      pool.resize(round % 2 ? threads : threads + 1);
    }
  }
}

TEST_CASE("thread_pool::probe records each run, its tasks by thread and CPU time, serial runs them in order on the caller, split half and half") {
  kernels::cpu::thread_pool pool(2);
  using pool_t = kernels::cpu::thread_pool;
  pool_t::probe p;
  p.records.reserve(3);
  pool.attach(&p);
  std::atomic<unsigned> sink{0};
  const auto work = [&](std::size_t t) {
    unsigned x = unsigned(t);
    for (int i = 0; i < 2000; ++i) x = x * 1664525u + 1013904223u;
    sink += x;
    pool.run(2, [](std::size_t) {});  // nested: not recorded
  };
  for (int r = 0; r < 4; ++r) pool.run(64, work);  // the fourth is past the capacity: not recorded
  pool.attach(nullptr);
  pool.run(8, work);  // detached: not recorded
  REQUIRE(p.records.size() == 3);
  for (const pool_t::run_record& q : p.records) {
    CHECK(q.tasks == 64);
    CHECK(bool(q.fn));
    CHECK(q.ran[0] + q.ran[1] == 64);
    CHECK(q.cpu_ns[0] >= 0);
    CHECK(q.cpu_ns[1] >= 0);
    CHECK(q.wall_ns > 0);
    CHECK(q.shared);
  }
  CHECK(bool(p.records[0].fn == p.records[2].fn));
  // serial: the same runs, every task on the caller in order
  p.records.clear();
  p.serial = true;
  std::vector<std::size_t> order;
  std::vector<std::thread::id> where;
  pool.attach(&p);
  pool.run(40, [&](std::size_t t) {
    order.push_back(t);
    where.push_back(std::this_thread::get_id());
  });
  pool.attach(nullptr);
  REQUIRE(p.records.size() == 1);
  CHECK(p.records[0].ran[0] == 40);
  CHECK(p.records[0].ran[1] == 0);
  CHECK_FALSE(p.records[0].shared);
  REQUIRE(order.size() == 40);
  for (std::size_t t = 0; t < 40; ++t) CHECK(order[t] == t);
  CHECK(std::count(where.begin(), where.end(), std::this_thread::get_id()) == 40);
  // split: the first half on the caller in order, then the rest on the worker, every task once
  p.records.clear();
  p.serial = false;
  p.split = true;
  std::vector<std::atomic<int>> hits(40);
  std::vector<std::atomic<bool>> on_caller(40);
  const auto caller = std::this_thread::get_id();
  pool.attach(&p);
  pool.run(40, [&](std::size_t t) {
    ++hits[t];
    on_caller[t] = std::this_thread::get_id() == caller;
  });
  pool.attach(nullptr);
  REQUIRE(p.records.size() == 1);
  CHECK(p.records[0].ran[0] == 20);
  CHECK(p.records[0].ran[1] == 20);
  CHECK(p.records[0].shared);
  CHECK(std::all_of(hits.begin(), hits.end(), [](const std::atomic<int>& h) { return h.load() == 1; }));
  for (std::size_t t = 0; t < 40; ++t) CHECK(on_caller[t].load() == (t < 20));
}

namespace {
// simd::narrow_weights_gradient<Arch, N>: dW = X^T dY for N below the vector length.
template <class Arch, class T, std::size_t N>
void check_narrow(const char* name) {
  if constexpr (N < xsimd::batch<T, Arch>::size) {
    const double eps = std::is_same_v<T, float> ? 1.2e-7 : 2.3e-16;
    for (std::size_t K : {1, 17, 32, 70, 128})
      for (std::size_t m : {0, 1, 5, 64}) {
        rng g(K * 31 + m + N);
        std::vector<T> x(m * K), dy(m * N), dw(K * N + 3, T(7));
        for (auto& e : x) e = T(g.uniform(-1, 1));
        for (auto& e : dy) e = T(g.uniform(-1, 1));
        kernels::cpu::simd::narrow_weights_gradient<Arch, N>(K, m, x.data(), dy.data(), dw.data());
        double worst = 0;
        for (std::size_t i = 0; i < K; ++i)
          for (std::size_t j = 0; j < N; ++j) {
            double s = 0, sc = 0;
            for (std::size_t p = 0; p < m; ++p) {
              s += double(x[p * K + i]) * double(dy[p * N + j]);
              sc += std::abs(double(x[p * K + i]) * double(dy[p * N + j]));
            }
            worst = std::max(worst, std::abs(double(dw[i * N + j]) - s) / ((double(m) + 2) * eps * sc + 1e-300));
          }
        INFO(std::string(name) << " N=" << N << " K=" << K << " m=" << m);
        CHECK(worst <= 1.0);
        for (std::size_t i = K * N; i < dw.size(); ++i) CHECK(dw[i] == T(7));  // nothing past dW
      }
  }
}
}  // namespace

TEST_CASE("narrow_weights_gradient (dW of a layer narrower than a vector) equals the reference on every architecture") {
  const int ran = test::for_each_arch("narrow_weights_gradient", [](auto arch, const char* name) {
    using Arch = decltype(arch);
    check_narrow<Arch, float, 1>(name);
    check_narrow<Arch, float, 3>(name);
    check_narrow<Arch, float, 7>(name);
    check_narrow<Arch, float, 10>(name);
    check_narrow<Arch, float, 15>(name);  // AVX-512: every lane of the 16 x 16 transpose's stores but one
    check_narrow<Arch, double, 1>(name);
    check_narrow<Arch, double, 3>(name);
    check_narrow<Arch, double, 7>(name);
  });
  CHECK(ran >= 1);
}

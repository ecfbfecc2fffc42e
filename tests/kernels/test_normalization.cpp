// backends/cpu/normalization.hpp (ops<cpu<>>'s has_layer_ops) against scalar
// references written out here in double: batch normalization forward (training,
// inference) and backward (training, frozen), for float, double and a 16-bit
// compute type with float32 moving statistics; dropout's masks are the
// generator's uniforms in order, and backward multiplies by them; batch
// normalization gives the same bits whatever the thread count (its channel sums in fixed chunks of rows
// over the pool, checked against double sums at the CNN's shape), and over a run-time channel count
// (batch_norm_forward_n, _backward_n: the compiled part's body) the same bits as over a compile-time one.
#include <doctest/doctest.h>

#include <ctnn/backends/cpu/normalization.hpp>
#include <ctnn/backends/cpu/ops.hpp>
#include <ctnn/backends/cpu/thread_pool.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <type_traits>
#include <vector>

using namespace ctnn;

namespace {
constexpr std::size_t C = 5, rows = 37;

struct reference {  // every value in double
  std::vector<double> y, mean, inv, moving_mean, moving_var, dgamma, dbeta, dx;
};

reference batch_norm_reference(const std::vector<double>& x, const std::vector<double>& dy,
                               const std::vector<double>& gamma, const std::vector<double>& beta,
                               std::vector<double> mm, std::vector<double> mv, double mom, double eps, bool training) {
  reference r;
  r.mean.assign(C, 0), r.inv.assign(C, 0), r.y.assign(rows * C, 0), r.dx.assign(rows * C, 0);
  r.dgamma.assign(C, 0), r.dbeta.assign(C, 0);
  for (std::size_t c = 0; c < C; ++c) {
    double mu = 0, var = 0;
    if (training) {
      for (std::size_t i = 0; i < rows; ++i) mu += x[i * C + c] / rows;
      for (std::size_t i = 0; i < rows; ++i) var += (x[i * C + c] - mu) * (x[i * C + c] - mu) / rows;
      mm[c] = mm[c] * mom + mu * (1 - mom);
      mv[c] = mv[c] * mom + var * (1 - mom);
    } else {
      mu = mm[c], var = mv[c];
    }
    const double inv = 1 / std::sqrt(var + eps);
    r.mean[c] = mu, r.inv[c] = inv;
    for (std::size_t i = 0; i < rows; ++i) {
      const double xhat = (x[i * C + c] - mu) * inv;
      r.y[i * C + c] = gamma[c] * xhat + beta[c];
      r.dgamma[c] += dy[i * C + c] * xhat;
      r.dbeta[c] += dy[i * C + c];
    }
    for (std::size_t i = 0; i < rows; ++i) {
      const double xhat = (x[i * C + c] - mu) * inv;
      r.dx[i * C + c] = training ? gamma[c] * inv / rows * (rows * dy[i * C + c] - r.dbeta[c] - xhat * r.dgamma[c])
                                 : gamma[c] * inv * dy[i * C + c];
    }
  }
  r.moving_mean = mm, r.moving_var = mv;
  return r;
}

template <class T>
std::vector<double> wide(const std::vector<T>& v) {
  std::vector<double> r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    if constexpr (std::is_same_v<T, double>) r[i] = v[i];
    else r[i] = double(float(v[i]));
  }
  return r;
}
template <class T>
std::vector<T> narrow(const std::vector<double>& v) {
  std::vector<T> r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) r[i] = T(v[i]);
  return r;
}

// max |got - want| / max(1, max |want|)
double error(const std::vector<double>& got, const std::vector<double>& want) {
  double d = 0, s = 1;
  for (std::size_t i = 0; i < want.size(); ++i) d = std::max(d, std::abs(got[i] - want[i])), s = std::max(s, std::abs(want[i]));
  return d / s;
}

template <class T, class S>
void check_batch_norm(double tol) {
  rng g(5);
  std::vector<double> x(rows * C), dy(rows * C), gamma(C), beta(C), mm(C), mv(C);
  for (auto& v : x) v = g.uniform(-2, 3);
  for (auto& v : dy) v = g.uniform(-1, 1);
  for (std::size_t c = 0; c < C; ++c) gamma[c] = g.uniform(0.5, 1.5), beta[c] = g.uniform(-1, 1),
                                      mm[c] = g.uniform(-0.5, 0.5), mv[c] = g.uniform(0.5, 2);
  // the reference reads the inputs as the kernel sees them (rounded to T and S)
  x = wide(narrow<T>(x)), dy = wide(narrow<T>(dy)), gamma = wide(narrow<T>(gamma)), beta = wide(narrow<T>(beta));
  mm = wide(narrow<S>(mm)), mv = wide(narrow<S>(mv));
  for (bool training : {true, false}) {
    INFO("training = " << training);
    const reference want = batch_norm_reference(x, dy, gamma, beta, mm, mv, 0.9, 1e-3, training);
    const auto tx = narrow<T>(x), tdy = narrow<T>(dy), tg = narrow<T>(gamma), tb = narrow<T>(beta);
    auto smm = narrow<S>(mm), smv = narrow<S>(mv);
    std::vector<T> y(rows * C), mean(C), inv(C), dg(C), db(C), dx(rows * C);
    ops<cpu<>>::batch_norm_forward<C>(tx.data(), y.data(), tg.data(), tb.data(), smm.data(), smv.data(), mean.data(),
                                      inv.data(), rows, 0.9, 1e-3, training);
    ops<cpu<>>::batch_norm_backward<C>(tx.data(), tdy.data(), dx.data(), tg.data(), mean.data(), inv.data(), dg.data(),
                                       db.data(), rows, training);
    CHECK(error(wide(y), want.y) <= tol);
    CHECK(error(wide(mean), want.mean) <= tol);
    CHECK(error(wide(inv), want.inv) <= tol);
    CHECK(error(wide(smm), want.moving_mean) <= tol);
    CHECK(error(wide(smv), want.moving_var) <= tol);
    CHECK(error(wide(dg), want.dgamma) <= tol * rows);  // sums over the rows
    CHECK(error(wide(db), want.dbeta) <= tol * rows);
    CHECK(error(wide(dx), want.dx) <= tol * 4);
    std::vector<T> dg2(C), db2(C);  // dx may be null: the parameter gradients alone
    ops<cpu<>>::batch_norm_backward<C>(tx.data(), tdy.data(), static_cast<T*>(nullptr), tg.data(), mean.data(),
                                       inv.data(), dg2.data(), db2.data(), rows, training);
    CHECK(wide(dg2) == wide(dg));
    CHECK(wide(db2) == wide(db));
  }
}
}  // namespace

TEST_CASE("batch_norm_forward and _backward of ops<cpu<>> match the scalar reference") {
  SUBCASE("double") { check_batch_norm<double, double>(1e-12); }
  SUBCASE("float") { check_batch_norm<float, float>(1e-5); }
  SUBCASE("float16_t with float32 moving statistics (mixed_float16)") { check_batch_norm<float16_t, float>(4e-3); }
}

namespace {
// batch_norm_forward then _backward (training or not) of rows x CC floats on `threads` threads: every output.
// RunTimeC: through batch_norm_forward_n and _backward_n (the channel count at run time, the compiled part's body).
template <std::size_t CC, bool RunTimeC = false>
std::vector<float> batch_norm_run(std::size_t threads, std::size_t n, bool training) {
  kernels::cpu::set_threads(threads);
  rng g(9);
  std::vector<float> x(n * CC), dy(n * CC), gamma(CC), beta(CC), mm(CC, 0.1f), mv(CC, 1.5f);
  for (auto& v : x) v = float(g.uniform(-2, 3));
  for (auto& v : dy) v = float(g.uniform(-1, 1));
  for (std::size_t c = 0; c < CC; ++c) gamma[c] = float(g.uniform(0.5, 1.5)), beta[c] = float(g.uniform(-1, 1));
  std::vector<float> y(n * CC), mean(CC), inv(CC), dg(CC), db(CC), dx(n * CC);
  if constexpr (RunTimeC) {
    using A = xsimd::default_arch;
    kernels::cpu::batch_norm_forward_n<A>(CC, x.data(), y.data(), gamma.data(), beta.data(), mm.data(), mv.data(),
                                          mean.data(), inv.data(), n, 0.9, 1e-3, training);
    kernels::cpu::batch_norm_backward_n<A>(CC, x.data(), dy.data(), dx.data(), gamma.data(), mean.data(), inv.data(),
                                           dg.data(), db.data(), n, training);
  } else {
    ops<cpu<>>::batch_norm_forward<CC>(x.data(), y.data(), gamma.data(), beta.data(), mm.data(), mv.data(),
                                       mean.data(), inv.data(), n, 0.9, 1e-3, training);
    ops<cpu<>>::batch_norm_backward<CC>(x.data(), dy.data(), dx.data(), gamma.data(), mean.data(), inv.data(),
                                        dg.data(), db.data(), n, training);
  }
  for (auto* v : {&mean, &inv, &mm, &mv, &dg, &db, &dx}) y.insert(y.end(), v->begin(), v->end());
  return y;
}
}  // namespace

TEST_CASE("batch_norm of ops<cpu<>> gives the same bits whatever the thread count (rows split over the pool)") {
  const std::size_t before = kernels::cpu::threads();
  for (bool training : {true, false}) {
    INFO("training = " << training);
    const auto a = batch_norm_run<32>(1, 64 * 169, training), b = batch_norm_run<64>(1, 64 * 25, training);
    const auto c = batch_norm_run<5>(1, 4099, training);  // odd rows and channels
    for (std::size_t t : {2, 3, 4}) {
      CHECK(batch_norm_run<32>(t, 64 * 169, training) == a);
      CHECK(batch_norm_run<64>(t, 64 * 25, training) == b);
      CHECK(batch_norm_run<5>(t, 4099, training) == c);
    }
  }
  kernels::cpu::set_threads(before);
}

// The CNN's batch norm 1 (64 samples x 13 x 13 positions, 32 channels): the per-channel sums run in
// chunks of batch_norm_chunk_rows(C) rows over the pool, added in chunk order. The same bits on 1, 2 and
// 3 threads; against sums in double: the mean (scaled by the mean of |x|), dbeta (by the sum of |dy|)
// and dgamma (by the sum of |dy xhat|, xhat from the kernel's cached mean and inverse std) within rows x
// float's epsilon (a bound of any order of the additions), inv within 1e-5.
TEST_CASE("batch_norm's channel sums in fixed chunks over the pool: 1, 2, 3 threads the same bits, near double sums") {
  constexpr std::size_t CC = 32, n = 64 * 169;
  static_assert(kernels::cpu::batch_norm_chunk_rows(CC) == 256 && kernels::cpu::batch_norm_chunk_rows(5) == 1638);
  const std::size_t before = kernels::cpu::threads();
  const auto one = batch_norm_run<CC>(1, n, true);
  for (std::size_t t : {2, 3}) CHECK(batch_norm_run<CC>(t, n, true) == one);
  kernels::cpu::set_threads(before);
  // batch_norm_run's inputs again (seed 9), and its outputs: y, mean, inv, mm, mv, dg, db, dx
  rng g(9);
  std::vector<double> x(n * CC), dy(n * CC);
  for (auto& v : x) v = double(float(g.uniform(-2, 3)));
  for (auto& v : dy) v = double(float(g.uniform(-1, 1)));
  const float* mean = one.data() + n * CC;
  const float* inv = mean + CC;
  const float* dg = inv + 3 * CC;
  const float* db = dg + CC;
  constexpr double eps = 6e-8;  // float's unit roundoff, rounded up
  for (std::size_t c = 0; c < CC; ++c) {
    CAPTURE(c);
    double sx = 0, ax = 0, sdy = 0, ady = 0, sdg = 0, adg = 0;
    for (std::size_t i = 0; i < n; ++i) sx += x[i * CC + c], ax += std::abs(x[i * CC + c]);
    const double mu = sx / n;
    double var = 0;
    for (std::size_t i = 0; i < n; ++i) var += (x[i * CC + c] - mu) * (x[i * CC + c] - mu) / n;
    for (std::size_t i = 0; i < n; ++i) {
      const double xhat = (x[i * CC + c] - double(mean[c])) * double(inv[c]), d = dy[i * CC + c];
      sdy += d, ady += std::abs(d), sdg += d * xhat, adg += std::abs(d * xhat);
    }
    CHECK(std::abs(double(mean[c]) - mu) <= (n + 2) * eps * ax / n);
    CHECK(std::abs(double(db[c]) - sdy) <= n * eps * ady);
    CHECK(std::abs(double(dg[c]) - sdg) <= (n + 4) * eps * adg);
    CHECK(std::abs(double(inv[c]) * std::sqrt(var + 1e-3) - 1) < 1e-5);
  }
}

TEST_CASE("batch_norm over a run-time channel count (the compiled part's body) gives the compile-time count's bits") {
  const std::size_t before = kernels::cpu::threads();
  for (bool training : {true, false}) {
    INFO("training = " << training);
    for (std::size_t t : {1, 3}) {
      CHECK(batch_norm_run<32, true>(t, 64 * 13, training) == batch_norm_run<32>(t, 64 * 13, training));
      CHECK(batch_norm_run<5, true>(t, 4099, training) == batch_norm_run<5>(t, 4099, training));
    }
  }
  kernels::cpu::set_threads(before);
}

TEST_CASE("dropout_forward of ops<cpu<>> draws one uniform per value from the generator, in order") {
  const std::size_t n = 3001;
  std::vector<float> x(n), y(n), mask(n), dy(n), dx(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = float(i % 13) - 6.5f, dy[i] = float(i % 7) - 3.0f;
  const float rate_in_memory = 0.3f;
  for (int pass = 0; pass < 2; ++pass) {
    INFO("rate " << (pass ? "in memory" : "as a value"));
    rng gen(17), draws(17);
    if (pass == 0) ops<cpu<>>::dropout_forward(x.data(), y.data(), mask.data(), n, double(rate_in_memory), gen);
    else ops<cpu<>>::dropout_forward(x.data(), y.data(), mask.data(), n, &rate_in_memory, gen);
    const float scale = 1.0f / (1.0f - rate_in_memory);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const float m = draws.uniform() >= double(rate_in_memory) ? scale : 0.0f;
      wrong += mask[i] != m || y[i] != x[i] * m;
    }
    CHECK(wrong == 0);
    CHECK(gen.next() == draws.next());  // exactly n draws
    ops<cpu<>>::dropout_backward(mask.data(), dy.data(), dx.data(), n);
    for (std::size_t i = 0; i < n; ++i) wrong += dx[i] != dy[i] * mask[i];
    CHECK(wrong == 0);
  }
  rng gen(1);
  const float bad = 1.0f;
  CHECK_THROWS_WITH(ops<cpu<>>::dropout_forward(x.data(), y.data(), mask.data(), n, &bad, gen),
                    "the dropout rate must be in [0, 1), got 1");
}

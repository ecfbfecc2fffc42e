// pruning/schedules.hpp: TFMOT's ConstantSparsity and PolynomialDecay, values
// at chosen steps against numbers computed by hand from TFMOT's formulas.
#include <doctest/doctest.h>

#include <ctnn/pruning/prune.hpp>
#include <ctnn/pruning/schedules.hpp>

using namespace ctnn;

// PolynomialDecay(initial 0.0, final 0.8, begin 100, end 1100, power 3, frequency 100)
using poly = polynomial_sparsity<0.0, 0.8, 100, 1100, 3, 100>;
// ConstantSparsity(0.5, begin 200, frequency 50)
using cons = constant_sparsity<0.5, 200, 50>;

// _should_prune_in_step: begin <= step (<= end or end < 0) and (step - begin) % frequency == 0
static_assert(!poly::should_prune(0) && !poly::should_prune(99) && poly::should_prune(100));
static_assert(!poly::should_prune(150) && poly::should_prune(200) && poly::should_prune(1100));
static_assert(!poly::should_prune(1200));  // past end_step
static_assert(!cons::should_prune(199) && cons::should_prune(200) && cons::should_prune(250) && !cons::should_prune(260));
static_assert(cons::should_prune(1'000'000));  // end_step = -1: forever
static_assert(cons::final_sparsity == 0.5 && cons::sparsity(0) == 0.5 && cons::end_step == -1);
// the stripped size follows from the final sparsity: round_half_even(n * (1 - s)), at least 1
static_assert(detail::keep_count(784 * 256, 0.8) == 40141);  // 40140.8
static_assert(detail::keep_count(10, 0.75) == 2);            // 2.5 -> 2 (half to even)
static_assert(detail::keep_count(14, 0.75) == 4);            // 3.5 -> 4
static_assert(detail::keep_count(10, 0.99) == 1);            // 0.1 -> at least 1
static_assert(detail::kept_at<n_of_m<2, 4>, 8, 3>(0.9) == 12);
static_assert(detail::kept_at<block<2, 2>, 4, 4>(0.5) == 8);

TEST_CASE("polynomial_sparsity: TFMOT's PolynomialDecay at chosen steps") {
  // p = (step - 100) / 1000, sparsity = (0 - 0.8) * (1 - p)^3 + 0.8
  CHECK(poly::sparsity(100) == doctest::Approx(0.0));
  CHECK(poly::sparsity(200) == doctest::Approx(0.8 - 0.8 * 0.729));       // p = 0.1: 0.2168
  CHECK(poly::sparsity(200) == doctest::Approx(0.2168));
  CHECK(poly::sparsity(600) == doctest::Approx(0.7));                     // p = 0.5: 0.8 - 0.8/8
  CHECK(poly::sparsity(1000) == doctest::Approx(0.7992));                 // p = 0.9: 0.8 - 0.8 * 0.001
  CHECK(poly::sparsity(1100) == 0.8);                                     // p = 1, exactly the final
  CHECK(poly::sparsity(5000) == 0.8);                                     // clipped to p = 1
  CHECK(poly::sparsity(0) == doctest::Approx(0.0));                       // clipped to p = 0
  using p1 = polynomial_sparsity<0.5, 0.9, 0, 400, 1, 100>;               // power 1: linear
  CHECK(p1::sparsity(100) == doctest::Approx(0.6));
  CHECK(p1::sparsity(300) == doctest::Approx(0.8));
  using p2 = polynomial_sparsity<0.2, 0.6, 10, 30, 2, 5>;                 // p = 0.25: 0.6 - 0.4 * 0.5625
  CHECK(p2::sparsity(15) == doctest::Approx(0.375));
  CHECK(p2::should_prune(15));
  CHECK_FALSE(p2::should_prune(16));
  CHECK(poly::name() == "polynomial_sparsity<0, 0.8, 100, 1100, 3, 100>");
  CHECK(cons::name() == "constant_sparsity<0.5, 200, 50>");
}

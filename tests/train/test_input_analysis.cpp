// input_analysis.hpp: the input-bound verdict and where fit and epoch_logger show it.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/train/input_analysis.hpp>

#include <sstream>

using namespace ctnn;

TEST_CASE("input_analysis: thresholds of the TF profiler (20% highly, 5% moderately)") {
  static_assert(input_bound(0.25) == input_bound_level::highly);
  static_assert(input_bound(0.20) == input_bound_level::highly);
  static_assert(input_bound(0.1999) == input_bound_level::moderately);
  static_assert(input_bound(0.05) == input_bound_level::moderately);
  static_assert(input_bound(0.049) == input_bound_level::no);
  CHECK(input_verdict(0.073) == "moderately input-bound: 7.3% of step time is spent waiting for data");
  CHECK(input_verdict(0.5) == "highly input-bound: 50.0% of step time is spent waiting for data");
  CHECK(input_verdict(0.01) == "not input-bound: 1.0% of step time is spent waiting for data");
}

using net = sequential<input<2>, dense<2>>;

TEST_CASE("input_analysis: fit logs input_bound, history and epoch_logger give the verdict") {
  data::in_memory<shape<2>, sparse_labels> d(std::vector<float>{0, 1, 1, 0, 1, 1, 0, 0}, std::vector<int>{0, 1, 1, 0});
  auto m = make_model<net>(1);
  sgd opt;
  std::ostringstream out, brief;
  auto h = fit(m, sparse_categorical_crossentropy{}, opt, d.batch(2), epochs{2}, epoch_logger{out, /*verbose=*/true},
               epoch_logger{brief});
  REQUIRE(h.contains("input_bound"));
  for (std::size_t e = 0; e < 2; ++e) {
    CHECK(h["input_bound"][e] == double(int(input_bound(h["input_share"][e]))));
    CHECK(out.str().find(h.input_verdict(e)) != std::string::npos);
  }
  // the compact line says it in words when the epoch was input-bound
  for (std::size_t e = 0; e < 2; ++e)
    if (h["input_bound"][e] > 0) CHECK(brief.str().find("input-bound") != std::string::npos);
  CHECK(out.str().find("input_bound:") == std::string::npos);  // said in words, not as a number
  CHECK_THROWS_WITH_AS(h.input_verdict(2), doctest::Contains("history: no epoch 2 (it has 2)"), std::out_of_range);
}

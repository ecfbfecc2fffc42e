// check_numerics.hpp: input batches holding NaN or infinity are refused, naming the sample.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>

#include <cmath>
#include <limits>
#include <vector>

using namespace ctnn;

TEST_CASE("check_numerics: names the value, the sample and the pass of the first NaN or infinity") {
  std::vector<float> x(10 * 3, 1.0f);
  x[7 * 3 + 2] = std::numeric_limits<float>::quiet_NaN();
  const data::in_memory<shape<3>, sparse_labels> ds(x, std::vector<int>(10, 0));
  const auto checked = data::check_numerics(ds.batch(4));
  static_assert(data::Dataset<decltype(checked)>);
  auto c = checked.open(2);
  data::batch_for<decltype(checked)> b;
  CHECK(c.next(b));  // samples 0..3
  CHECK_THROWS_WITH_AS(c.next(b), "check_numerics: input value 2 of sample 7 of pass 2 (batch 1, row 3) is NaN",
                       numeric_error);
  CHECK(checked.batches_per_epoch() == 3);

  x[7 * 3 + 2] = 0;
  x[0] = -std::numeric_limits<float>::infinity();
  const auto p = data::check_numerics(data::from_tensors<shape<3>>(x, std::vector<int>(10, 0)).batch(5));
  auto pc = p.open(0);
  CHECK_THROWS_WITH_AS(pc.next(b), doctest::Contains("input value 0 of sample 0 of pass 0 (batch 0, row 0) is -Inf"),
                       numeric_error);

  x[0] = 0;
  const auto ok = data::check_numerics(data::in_memory<shape<3>, sparse_labels>(x, std::vector<int>(10, 0)).batch(3));
  auto oc = ok.open(0);
  std::size_t n = 0;
  while (oc.next(b)) n += b.size;
  CHECK(n == 10);
}

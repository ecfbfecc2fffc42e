// reshape.hpp (flatten, reshape) and input.hpp.
#include <doctest/doctest.h>

#include <ctnn/backends/cpu/ops.hpp>  // the bound layers run on cpu<> (layer headers declare ops<B> only)
#include <ctnn/core/sequential.hpp>
#include <ctnn/core/input.hpp>
#include <ctnn/layers/reshape.hpp>

#include <vector>

using namespace ctnn;

static_assert(std::is_same_v<flatten::bind<shape<2, 3, 4>, float, cpu<>>::out_shape, shape<24>>);
static_assert(std::is_same_v<reshape<4, 6>::bind<shape<2, 3, 4>, float, cpu<>>::out_shape, shape<4, 6>>);
static_assert(is_input_v<input<3, 4>> && !is_input_v<shape<3>>);
static_assert(std::is_same_v<input<3, 4>::shape_type, shape<3, 4>>);

TEST_CASE("flatten and reshape keep the values in order, forward and backward") {
  using L = reshape<3, 2>::bind<shape<2, 3>, float, cpu<>>;
  const std::vector<float> x{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  std::vector<float> y(12), dx(12);
  L::forward({}, x.data(), y.data(), run_info{2, false, nullptr});
  CHECK(y == x);
  std::vector<float> dy = x;
  L::backward({}, x.data(), y.data(), dy.data(), dx.data(), run_info{2, true, nullptr});
  CHECK(dx == x);
  CHECK(reshape<3, 2>::name() == "reshape<3x2>");
  CHECK(flatten::name() == "flatten");
}

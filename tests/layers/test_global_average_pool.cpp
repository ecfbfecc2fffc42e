// layers/global_average_pool.hpp: output shape<C> for rank-2 and rank-3 inputs, wiring.
#include <doctest/doctest.h>

#include <ctnn/backends/cpu/ops.hpp>  // the bound layers run on cpu<> (layer headers declare ops<B> only)
#include <ctnn/layers/global_average_pool.hpp>

#include <vector>

using namespace ctnn;

static_assert(std::is_same_v<global_average_pool::bind<shape<5, 5, 64>, float, cpu<>>::out_shape, shape<64>>);
static_assert(std::is_same_v<global_average_pool::bind<shape<7, 3>, float, cpu<>>::out_shape, shape<3>>);

TEST_CASE("global_average_pool: the mean over positions, per channel") {
  using L = global_average_pool::bind<shape<2, 2, 2>, float, cpu<>>;
  const std::vector<float> x{1, -1, 2, -2, 3, -3, 6, -6};
  std::vector<float> y(2), dy{4, 8}, dx(8);
  L::forward({}, x.data(), y.data(), run_info{1, false, nullptr});
  CHECK(y == std::vector<float>{3, -3});
  L::backward({}, x.data(), y.data(), dy.data(), dx.data(), run_info{1, true, nullptr});
  CHECK(dx == std::vector<float>{1, 2, 1, 2, 1, 2, 1, 2});
  CHECK(global_average_pool::name() == "global_average_pool");
}

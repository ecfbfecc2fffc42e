// layers/average_pool2d.hpp: output shapes by the Keras formulas, spec text,
// forward/backward wiring.
#include <doctest/doctest.h>

#include <ctnn/backends/cpu/ops.hpp>  // the bound layers run on cpu<> (layer headers declare ops<B> only)
#include <ctnn/layers/average_pool2d.hpp>

#include <vector>

using namespace ctnn;

template <class Spec, class In>
using bound = typename Spec::template bind<In, float, cpu<>>;

static_assert(std::is_same_v<bound<average_pool2d<>, shape<26, 26, 32>>::out_shape, shape<13, 13, 32>>);
static_assert(std::is_same_v<bound<average_pool2d<3>, shape<10, 10, 1>>::out_shape, shape<3, 3, 1>>);
static_assert(std::is_same_v<bound<average_pool2d<3, 3, padding::same>, shape<10, 10, 1>>::out_shape, shape<4, 4, 1>>);

TEST_CASE("average_pool2d spec text and layer wiring") {
  CHECK(average_pool2d<>::name() == "average_pool2d<2>");
  CHECK(average_pool2d<3, 1, padding::same>::name() == "average_pool2d<3, 1, same>");
  using L = bound<average_pool2d<2>, shape<2, 4, 1>>;
  static_assert(L::cache_per_sample == 0);
  const std::vector<float> x{1, 5, 2, 0, 3, 4, 8, 2};
  std::vector<float> y(2), dy{4, 8}, dx(8);
  L::forward({}, x.data(), y.data(), run_info{1, true, nullptr});
  CHECK(y == std::vector<float>{3.25f, 3});
  L::backward({}, x.data(), y.data(), dy.data(), dx.data(), run_info{1, true, nullptr});
  CHECK(dx == std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2});
}

// layers/max_pool2d.hpp (and the shared layers/pool2d.hpp): output shapes by
// the Keras formulas, spec text, forward/backward wiring.
#include <doctest/doctest.h>

#include <ctnn/backends/cpu/ops.hpp>  // the bound layers run on cpu<> (layer headers declare ops<B> only)
#include <ctnn/layers/max_pool2d.hpp>

#include <vector>

using namespace ctnn;

template <class Spec, class In>
using bound = typename Spec::template bind<In, float, cpu<>>;

static_assert(std::is_same_v<bound<max_pool2d<>, shape<26, 26, 32>>::out_shape, shape<13, 13, 32>>);
static_assert(std::is_same_v<bound<max_pool2d<2>, shape<11, 11, 64>>::out_shape, shape<5, 5, 64>>);
static_assert(std::is_same_v<bound<max_pool2d<2, 2, padding::same>, shape<11, 11, 64>>::out_shape, shape<6, 6, 64>>);
static_assert(std::is_same_v<bound<max_pool2d<3, 2>, shape<13, 13, 8>>::out_shape, shape<6, 6, 8>>);
static_assert(std::is_same_v<bound<max_pool2d<3, 1, padding::same>, shape<5, 7, 2>>::out_shape, shape<5, 7, 2>>);
static_assert(bound<max_pool2d<>, shape<4, 4, 1>>::parameter_count == 0);
static_assert(max_pool2d<3>::pool_size == 3 && max_pool2d<3>::stride == 3);

TEST_CASE("max_pool2d spec text: pool size, then stride and padding when not the defaults") {
  CHECK(max_pool2d<>::name() == "max_pool2d<2>");
  CHECK(max_pool2d<3, 2>::name() == "max_pool2d<3, 2>");
  CHECK(max_pool2d<2, 2, padding::same>::name() == "max_pool2d<2, 2, same>");
}

TEST_CASE("max_pool2d layer: forward and backward through the kernels") {
  using L = bound<max_pool2d<2>, shape<2, 4, 1>>;
  const std::vector<float> x{1, 5, 2, 0, 3, 4, 8, 1};
  static_assert(L::cache_per_sample == 2);  // one index per output value
  std::vector<float> y(2), dy{1, 2}, dx(8), cache(L::cache_per_sample);
  layer_slot<float> s{nullptr, nullptr, nullptr, cache.data()};
  L::forward(s, x.data(), y.data(), run_info{1, true, nullptr});
  CHECK(y == std::vector<float>{5, 8});
  L::backward(s, x.data(), y.data(), dy.data(), dx.data(), run_info{1, true, nullptr});
  CHECK(dx == std::vector<float>{0, 1, 0, 0, 0, 0, 2, 0});
}

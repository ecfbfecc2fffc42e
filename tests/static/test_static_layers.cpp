// Compile-time guarantees of the layers of issue 5 (conv2d, pooling, dropout,
// batch_norm) and the l1 / l1_l2 regularizers: concepts, shapes through a
// whole network, parameter and state counts, the memory plan.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>

using namespace ctnn;

using cnn = sequential<input<28, 28>, conv2d<32, 3, 3, 1, padding::valid, relu>, max_pool2d<2>, batch_norm,
                       conv2d<64, 3, 3, 1, padding::valid, relu, l1_l2<>>, max_pool2d<2>, batch_norm, flatten,
                       dense<128, relu, l1<1e-5f>>, dropout<0.5f>, dense<10>>;

static_assert(LayerSpec<conv2d<8, 3, 3>> && LayerSpec<max_pool2d<>> && LayerSpec<average_pool2d<>> &&
              LayerSpec<global_average_pool> && LayerSpec<dropout<0.1f>> && LayerSpec<batch_norm>);
static_assert(BoundLayer<conv2d<8, 3, 3, 2, padding::same>::bind<shape<9, 9, 3>, float, cpu<>>>);
static_assert(BoundLayer<max_pool2d<2>::bind<shape<4, 4, 2>, double, cpu<>>>);
static_assert(BoundLayer<average_pool2d<2>::bind<shape<4, 4, 2>, float, cpu<>>>);
static_assert(BoundLayer<global_average_pool::bind<shape<4, 4, 2>, float, cpu<>>>);
static_assert(BoundLayer<dropout<0.5f>::bind<shape<10>, float, cpu<>>>);
static_assert(BoundLayer<batch_norm::bind<shape<4, 4, 2>, float, cpu<>>>);
static_assert(Regularizer<l1<0.1f>> && Regularizer<l1_l2<>> && Regularizer<l2<0.1f>>);

// shapes through the network: 28x28 -> 26x26x32 -> 13x13x32 -> 11x11x64 -> 5x5x64 -> 1600 -> 128 -> 10
static_assert(std::is_same_v<std::tuple_element_t<0, cnn::bound<float>>::out_shape, shape<26, 26, 32>>);
static_assert(std::is_same_v<std::tuple_element_t<1, cnn::bound<float>>::out_shape, shape<13, 13, 32>>);
static_assert(std::is_same_v<std::tuple_element_t<3, cnn::bound<float>>::out_shape, shape<11, 11, 64>>);
static_assert(std::is_same_v<std::tuple_element_t<4, cnn::bound<float>>::out_shape, shape<5, 5, 64>>);
static_assert(std::is_same_v<std::tuple_element_t<6, cnn::bound<float>>::out_shape, shape<1600>>);
static_assert(cnn::output_shape == shape<10>{});
static_assert(cnn::parameter_count ==
              320 + 64 + 18'496 + 128 + 1600 * 128 + 128 + 128 * 10 + 10);  // Keras' summary: 225,226 trainable
static_assert(cnn::state_count == 192);                                      // Keras: 192 non-trainable
// the plan holds the largest cache: the second conv's im2col rows, 11*11 * 3*3*32 per sample
static_assert(cnn::plan<float>::bytes(role::cache, 64, 2) >= 64 * (26 * 26 * 9 + 11 * 11 * 288) * sizeof(float));

TEST_CASE("static: the compile-time checks of the issue-5 layers were built") {
  CHECK(cnn::spec_string() ==
        "input<28x28> | conv2d<32, 3, 3, 1, valid, relu> | max_pool2d<2> | batch_norm | "
        "conv2d<64, 3, 3, 1, valid, relu, l1_l2<0.01, 0.01>> | max_pool2d<2> | batch_norm | flatten | "
        "dense<128, relu, l1<1e-05>> | dropout<0.5> | dense<10>");
}

// Compile-time guarantees: this file is mostly static_asserts; the one test
// case only makes the executable report that it was built.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>

using namespace ctnn;

using mlp = sequential<input<28, 28>, flatten, dense<256, relu, l2<0.001f>>, dense<128, relu>, dense<10>>;

// shapes
static_assert(shape<28, 28>::size == 784 && shape<28, 28>::rank == 2);
static_assert(shape<3>{} == shape<3>{} && !(shape<3>{} == shape<4>{}) && !(shape<3>{} == shape<3, 1>{}));
static_assert(mlp::input_shape == shape<28, 28>{});
static_assert(mlp::output_shape == shape<10>{});
static_assert(mlp::layer_count == 4);
static_assert(mlp::parameter_count == 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
static_assert(mlp::state_count == 0);
static_assert(std::is_same_v<std::tuple_element_t<1, mlp::bound<float>>::in_shape, shape<784>>);
static_assert(std::is_same_v<std::tuple_element_t<1, mlp::bound<float>>::out_shape, shape<256>>);
static_assert(std::is_same_v<sequential<input<2, 3, 4>, reshape<6, 4>, softmax>::output_type, shape<6, 4>>);

// the memory plan is constexpr and consistent
constexpr auto plan = mlp::memory_plan<float>(64, adam<>::max_slots_per_parameter);
static_assert(plan.parameters >= mlp::parameter_count * sizeof(float));
static_assert(plan.parameters < mlp::parameter_count * sizeof(float) + 4 * 64);  // padding at most 64 B per layer
static_assert(plan.gradients == plan.parameters);
static_assert(plan.optimizer >= 3 * mlp::parameter_count * sizeof(float));
// activations: layer outputs (256 + 128 + 10) * 64 (flatten's output is its input's memory) plus two
// backward buffers of 784 * 64
static_assert(plan.activations == ((256 + 128 + 10) * 64 + 2 * 784 * 64) * sizeof(float));
static_assert(plan.total == plan.parameters + plan.gradients + plan.state + plan.optimizer + plan.activations);
static_assert(mlp::memory_plan<double>(1).parameters == 2 * mlp::memory_plan<float>(1).parameters + 0 ||
              mlp::memory_plan<double>(1).parameters >= mlp::parameter_count * sizeof(double));

// concepts
static_assert(LayerSpec<dense<3>> && LayerSpec<relu> && LayerSpec<flatten> && LayerSpec<reshape<2, 2>>);
static_assert(!LayerSpec<int> && !LayerSpec<input<3>>);
static_assert(BoundLayer<dense<3, relu>::bind<shape<5>, float, cpu<>>>);
static_assert(BoundLayer<softmax::bind<shape<2, 5>, double, cpu<>>>);
static_assert(Optimizer<sgd<>> && Optimizer<adam<>> && Optimizer<rmsprop<>> && Optimizer<adagrad<>>);
static_assert(Optimizer<adam<exponential_decay>>);
static_assert(!Optimizer<int>);
static_assert(Schedule<constant_schedule> && Schedule<exponential_decay> && !Schedule<int>);
static_assert(Loss<sparse_categorical_crossentropy> && Loss<categorical_crossentropy> && Loss<mean_squared_error>);
static_assert(Metric<accuracy> && Metric<sparse_categorical_accuracy> && Metric<mean_absolute_error>);
static_assert(Callback<epoch_logger> && !Callback<int>);
static_assert(data::Dataset<data::fashion_mnist::dataset>);
static_assert(Network<mlp> && !Network<int>);
static_assert(Model<model<mlp>>);

// CTAD picks constant_schedule for a number
static_assert(std::is_same_v<decltype(adam{0.01}), adam<constant_schedule>>);
static_assert(std::is_same_v<decltype(sgd{0.1, 0.9}), sgd<constant_schedule>>);

// the architecture text and its fingerprint distinguish networks
TEST_CASE("static: the compile-time checks of this file were built") {
  CHECK(mlp::spec_string() == "input<28x28> | flatten | dense<256, relu, l2<0.001>> | dense<128, relu> | dense<10>");
  CHECK(mlp::fingerprint() != sequential<input<28, 28>, flatten, dense<10>>::fingerprint());
}

// core/diagnostics.hpp: every check is a class template that passes when its
// condition holds (the failing side is locked in by tests/compile_fail).
static_assert(diag::dense_input_not_flat<diag::layer<1>, diag::input_rank<1>, true>::value);
static_assert(diag::reshape_element_count_mismatch<diag::layer<2>, diag::input_elements<6>, diag::target_elements<6>,
                                                   true>::value);
static_assert(diag::dataset_input_mismatch<diag::dataset_elements<4>, diag::network_elements<4>, true>::value);

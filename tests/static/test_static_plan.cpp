// core/plan.hpp, core/precision.hpp, core/backend.hpp: the typed memory plan is
// computed at compile time from the buffers each bound layer declares, for
// the precision and backend that run; only static_asserts (plus one
// doctest case so the file registers).
#include <doctest/doctest.h>

#include <ctnn/backends/cuda/backend.hpp>
#include <ctnn/ctnn.hpp>

#include <cstdint>
#include <tuple>
#include <type_traits>

using namespace ctnn;

namespace {
using mlp = sequential<input<28, 28>, flatten, dense<256, relu>, dense<128, relu>, dense<10>>;
using L1 = std::tuple_element_t<1, mlp::bound<float>>;

// dense declares its kernel [K, N] and bias [N]; nothing else.
static_assert(L1::buffers.size() == 2);
static_assert(L1::buffers[0].name == "kernel" && L1::buffers[0].rank == 2 && L1::buffers[0].dims[0] == 784 &&
              L1::buffers[0].dims[1] == 256 && L1::buffers[0].kind == role::parameter);
static_assert(L1::buffers[1].name == "bias" && L1::buffers[1].extent == 256);

// Bytes per role: parameters are each layer's block rounded to 64 bytes.
constexpr std::size_t p32 = (784 * 256 + 256) * 4 + ((256 * 128 + 128) * 4 + 63) / 64 * 64 + (128 * 10 + 10) * 4 + 24;
static_assert(mlp::plan<precision::float32>::bytes(role::parameter, 1) == p32);
static_assert(mlp::plan<precision::float32>::bytes(role::gradient, 1) == p32);
static_assert(mlp::plan<precision::float32>::bytes(role::optimizer_slot, 1, 3) == 3 * p32);
static_assert(mlp::plan<precision::float32>::bytes(role::mask, 1) == 0);
// activations: each layer's output per sample, per batch, 64-byte blocks, but flatten's: its output is
// its input's memory (aliases_input, nothing copied); the deltas: two of the widest
static_assert(aliases_input<std::tuple_element_t<0, mlp::bound<float>>> && !aliases_input<L1>);
static_assert(mlp::plan<precision::float32>::aliases == std::array{true, false, false, false});
static_assert(mlp::plan<precision::float32>::bytes(role::activation, 64) == 64 * (256 + 128 + 10) * 4);
static_assert(mlp::plan<precision::float32>::bytes(role::delta, 64) == 2 * 64 * 784 * 4);
// float64 doubles every region; a plain element type names its uniform policy
static_assert(mlp::plan<double>::bytes(role::parameter, 1) >= 2 * mlp::parameter_count * 4);
static_assert(std::is_same_v<mlp::plan<float>, mlp::plan<precision::float32>>);
// memory_plan is the same plan in bytes per role, and the total is the sum of the regions
constexpr auto mp = mlp::memory_plan(64, adam<>::max_slots_per_parameter);
static_assert(mp.total == mp.parameters + mp.gradients + mp.state + mp.masks + mp.metadata + mp.optimizer + mp.activations);
static_assert(mp.optimizer == 3 * mp.parameters);

// A layer with float32 variables, 16-bit activations and a mask is expressible: the plan sizes each
// buffer by the element type the policy gives its kind (what the mixed-precision and pruning work uses).
struct toy_pruned {
  using in_shape = shape<8>;
  using out_shape = shape<4>;
  static constexpr std::array<buffer, 4> buffers{buffer::parameter("kernel", {8, 4}), buffer::parameter("bias", {4}),
                                                 buffer::mask("kernel_mask", {8, 4}), buffer::cache("scratch", 6)};
};
using mixed = precision::policy<float, std::uint16_t>;
using toy_plan = detail::net_plan<std::tuple<toy_pruned>, mixed>;
static_assert(toy_plan::bytes(role::parameter, 1) == 192);     // 36 floats = 144 bytes -> 192
static_assert(toy_plan::bytes(role::mask, 1) == 64);             // 32 uint8 -> one block
static_assert(toy_plan::bytes(role::cache, 10) == 128);          // 6 x 10 x 2 bytes = 120 -> 128
static_assert(toy_plan::bytes(role::activation, 10) == 128);     // 4 x 10 x 2 bytes = 80 -> 128
static_assert(buffer_offset<mixed>(toy_pruned::buffers, 1) == 8 * 4 * 4);  // the bias follows the kernel
static_assert(layer_role_bytes<mixed>(toy_pruned::buffers, role::parameter) == 36 * 4);

// A buffer may ask for an alignment inside its region (buffer::aligned: an int8 layer's packed kernel
// on a cache line): the plan pads before it, a file never holds the padding (layer_role_value_bytes).
struct toy_aligned {
  static constexpr std::array<buffer, 2> buffers{buffer::make(role::state, elem::i32, "sum", {3}),
                                                 buffer::make(role::state, elem::i8, "kernel", {5}).aligned(64)};
};
struct toy_state {
  static constexpr std::array<buffer, 1> buffers{buffer::state("moving", {5})};
};
static_assert(buffer_offset<precision::float32>(toy_aligned::buffers, 1) == 64);
static_assert(layer_role_bytes<precision::float32>(toy_aligned::buffers, role::state) == 69);
static_assert(layer_role_value_bytes<precision::float32>(toy_aligned::buffers, role::state) == 17);
static_assert(role_alignment(toy_aligned::buffers, role::state) == 64 && role_alignment(toy_state::buffers, role::state) == 1);
// inside a graph layer, such a child starts on its alignment, so that its own offsets hold in the
// graph's flat buffer list too (plain 20 bytes, then the two aligned children at 64 and 192)
using toy_graph = detail::graph_offsets<precision::float32, toy_state, toy_aligned, toy_aligned>;
static_assert(toy_graph::state == std::array<std::size_t, 4>{0, 64, 192, 261});
constexpr auto toy_flat = detail::graph_buffers<precision::float32, std::array<buffer, 0>, toy_state, toy_aligned, toy_aligned>(no_buffers);
static_assert(toy_flat[2].name == "1.sum" && toy_flat[6].name == "2.kernel");
static_assert(buffer_offset<precision::float32>(toy_flat, 2) == toy_graph::state[1] &&
              buffer_offset<precision::float32>(toy_flat, 3) == toy_graph::state[1] + 64 &&
              buffer_offset<precision::float32>(toy_flat, 5) == toy_graph::state[2] &&
              buffer_offset<precision::float32>(toy_flat, 6) == toy_graph::state[2] + 64);
static_assert(layer_role_bytes<precision::float32>(toy_flat, role::state) == toy_graph::state[3]);

// batch_norm declares trainable gamma, beta and non-trainable moving statistics
using bn = std::tuple_element_t<0, sequential<input<4, 3>, batch_norm>::bound<float>>;
static_assert(count_of(bn::buffers, role::parameter) == 6 && count_of(bn::buffers, role::state) == 6);
static_assert(bn::buffers[2].name == "moving_mean");
// max pooling keeps a uint32 index per output value in its cache
using mp2 = std::tuple_element_t<0, sequential<input<4, 4, 2>, max_pool2d<2>>::bound<float>>;
static_assert(mp2::buffers[0].type == elem::u32 && mp2::cache_per_sample == 2 * 2 * 2);

// Backends are types: the architecture is part of cpu<Arch>
static_assert(Backend<cpu<>>);
static_assert(!std::is_same_v<cpu<xsimd::sse2>, cpu<xsimd::avx2>>);
static_assert(!Backend<cuda<90>>);  // named, but it has no memory on the host compiler
static_assert(std::is_same_v<model<mlp>::backend, cpu<xsimd::default_arch>>);
// Layers, losses, metrics and optimizers are checked for the element type that runs
static_assert(Loss<sparse_categorical_crossentropy, double> && Loss<mean_squared_error, float>);
static_assert(Metric<accuracy, double> && Metric<mean_absolute_error, float>);
static_assert(Optimizer<adam<>, double> && Optimizer<with_options<sgd<>>, float>);
// The optimizer's update count is the model's, not a public field of the optimizer
template <class O>
concept has_public_iterations = requires(O o) { o.iterations; };
template <class M>
concept can_set_iterations = requires(M m) { m.optimizer_state().iterations = 3; };
static_assert(!has_public_iterations<adam<>> && !has_public_iterations<with_options<adam<>>>);
static_assert(!can_set_iterations<model<mlp>>);
// Real-valued template parameters keep the value as written: exact in a double model
static_assert(leaky_relu<>::alpha == 0.2 && dropout<0.1>::rate == 0.1 && l2<0.001>::lambda == 0.001);
static_assert(batch_norm::momentum == 0.99 && batch_norm::epsilon == 0.001);
// input<> lives in core/
static_assert(std::is_same_v<input<2>::shape_type, shape<2>>);
}  // namespace

TEST_CASE("the typed plan is a compile-time value") { CHECK(mp.total > 0); }

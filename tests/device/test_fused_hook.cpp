// The optional fused small-MLP hook (core/fused_mlp_hook.hpp) as the generic
// model finds it (cpu<>'s own: tests/kernels/test_fused_mlp.cpp): hooked::device is the simulated device whose ops<> add the
// hook for networks of dense and reshape layers only, run layer by layer on
// the CPU kernels and counting its calls. The model calls it (inference;
// training's backward when fused_mlp().backward) where it exists, and falls
// back to the layers otherwise (another network, the option off, the hook
// not ready), with cpu<>'s bits either way.
#include <doctest/doctest.h>

#include <ctnn/core/fused_mlp_hook.hpp>  // the header under test
#include <ctnn/ctnn.hpp>

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "device/simulated_device.hpp"

namespace hooked {
struct device : sim::device {
  static std::string name() { return "hooked_device"; }
};
struct calls {
  static inline int ready = 0, forward = 0, backward = 0;
  static inline bool is_ready = true;  // what fused_mlp_ready answers
  static void reset() {
    ready = forward = backward = 0;
    is_ready = true;
  }
};
// The networks the hook takes: dense and reshape layers only (as CUDA's: dense and flatten).
template <class L>
inline constexpr bool takes_layer = std::is_same_v<typename L::kind, ctnn::layer_kind::dense> ||
                                    std::is_same_v<typename L::kind, ctnn::layer_kind::reshape>;
template <class Layers>
inline constexpr bool takes = []<std::size_t... I>(std::index_sequence<I...>) {
  return (takes_layer<std::tuple_element_t<I, Layers>> && ...);
}(std::make_index_sequence<std::tuple_size_v<Layers>>{});
}  // namespace hooked

template <>
struct ctnn::ops<hooked::device> : ctnn::ops<sim::device> {
  template <class Layers>
    requires hooked::takes<Layers>
  static bool fused_mlp_ready() {
    ++hooked::calls::ready;
    return hooked::calls::is_ready;
  }
  template <class Layers>
    requires hooked::takes<Layers>
  static bool fused_mlp_backward_ready() {
    return hooked::calls::is_ready;
  }
  // The "fused" pass: every layer's own forward, in the backend's host scratch.
  template <class Layers, class T>
    requires hooked::takes<Layers>
  static void fused_mlp_forward(const T* x, T* y, std::size_t batch, const T* const* params) {
    ++hooked::calls::forward;
    const sim::scope open;
    using L0 = std::tuple_element_t<0, Layers>;
    std::vector<T> a(x, x + batch * L0::in_shape::size), b;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((void)[&] {
        using L = std::tuple_element_t<I, Layers>;
        b.assign(batch * L::out_shape::size, T(0));
        L::forward(ctnn::layer_slot<T>{const_cast<T*>(params[I])}, a.data(), b.data(), ctnn::run_info{batch, false, nullptr});
        std::swap(a, b);
      }(), ...);
    }(std::make_index_sequence<std::tuple_size_v<Layers>>{});
    std::copy(a.begin(), a.end(), y);
  }
  // Every layer's own backward from the last down, on the training forward's rows in io.
  template <class Layers, class T>
    requires hooked::takes<Layers>
  static void fused_mlp_backward(const T* dy, std::size_t batch, const ctnn::fused_layer_io<T>* io) {
    ++hooked::calls::backward;
    const sim::scope open;
    constexpr std::size_t n = std::tuple_size_v<Layers>;
    using Last = std::tuple_element_t<n - 1, Layers>;
    std::vector<T> d(dy, dy + batch * Last::out_shape::size), dx;
    [&]<std::size_t... J>(std::index_sequence<J...>) {
      ((void)[&] {
        constexpr std::size_t I = n - 1 - J;
        using L = std::tuple_element_t<I, Layers>;
        dx.assign(batch * L::in_shape::size, T(0));
        const ctnn::layer_slot<T> s{const_cast<T*>(io[I].params), io[I].grads};
        L::backward(s, io[I].in, io[I].out, d.data(), I == 0 ? nullptr : dx.data(), ctnn::run_info{batch, true, nullptr});
        std::swap(d, dx);
      }(), ...);
    }(std::make_index_sequence<n>{});
  }
};

namespace {
using namespace ctnn;

using mlp = sequential<input<6, 4>, flatten, dense<16, relu>, dense<8, leaky_relu<0.1>>, dense<3>>;
using with_dropout = sequential<input<6, 4>, flatten, dense<16, relu>, dropout<0.25f>, dense<3>>;

template <class Net, class B>
using layers_of = typename model<Net, float, B>::layers;
static_assert(has_fused_mlp_forward<hooked::device, layers_of<mlp, hooked::device>, float>);
static_assert(has_fused_mlp_backward<hooked::device, layers_of<mlp, hooked::device>, float>);
static_assert(!has_fused_mlp_forward<hooked::device, layers_of<with_dropout, hooked::device>, float>);
static_assert(!has_fused_mlp_forward<sim::device, layers_of<mlp, sim::device>, float>);
// cpu<> has the hook for its own layers (backends/cpu/fused_mlp.hpp): inference and training's backward
static_assert(has_fused_mlp_forward<cpu<>, layers_of<mlp, cpu<>>, float>);
static_assert(has_fused_mlp_backward<cpu<>, layers_of<mlp, cpu<>>, float>);
static_assert(!has_fused_mlp_forward<cpu<>, layers_of<with_dropout, cpu<>>, float>);

data::in_memory<shape<6, 4>, sparse_labels> samples(std::size_t n, std::uint64_t seed) {
  std::vector<float> x(n * 24);
  std::vector<std::int32_t> y(n);
  rng g(seed);
  for (std::size_t i = 0; i < n; ++i) {
    y[i] = std::int32_t(g.below(3));
    for (std::size_t j = 0; j < 24; ++j) x[i * 24 + j] = float(g.uniform(-1, 1)) + (j % 3 == std::size_t(y[i]) ? 1.0f : 0.0f);
  }
  return {x, y};
}

template <class M>
std::string variables(const M& m) {
  std::string v;
  m.for_each_variable([&](const variable_ref& r) { v.append(reinterpret_cast<const char*>(r.data), r.extent * r.element_bytes); });
  return v;
}

// fit (2 epochs), evaluate and predict on model m and on cpu<>'s model of the same seed: the same bits.
template <class Net, class M>
void same_as_cpu(M& m) {
  auto c = make_model<Net>(5);
  const auto train = samples(64, 1).batch(16);
  const auto test = samples(40, 2).batch(16);
  const sparse_categorical_crossentropy loss{.from_logits = true};
  adam o1{1e-2}, o2{1e-2};
  const auto hm = fit(m, loss, o1, train, epochs{2});
  const auto hc = fit(c, loss, o2, train, epochs{2});
  CHECK(hm["loss"] == hc["loss"]);
  CHECK(variables(m) == variables(c));
  CHECK(evaluate(m, loss, test)["loss"] == evaluate(c, loss, test)["loss"]);
  const std::vector<float> x(40 * 24, 0.5f);
  CHECK(m.predict(x.data(), 40, 16) == c.predict(x.data(), 40, 16));
  CHECK(m.predict(x.data(), 40, 40) == c.predict(x.data(), 40, 40));  // above the capacity: predict's scratch
}
}  // namespace

TEST_CASE("the generic model calls a backend's fused MLP hook where it has one, with cpu<>'s bits") {
  hooked::calls::reset();
  auto m = make_model<mlp, float, hooked::device>(5);
  CHECK(m.fused_mlp_active());
  CHECK_FALSE(m.fused_mlp_backward_active());  // off by default
  m.fused_mlp().backward = true;
  CHECK(m.fused_mlp_backward_active());
  same_as_cpu<mlp>(m);
  CHECK(hooked::calls::forward > 0);   // evaluate and predict
  CHECK(hooked::calls::backward == 8);  // fit: 2 epochs of 4 batches
}

TEST_CASE("the generic model falls back to the layers when the hook is absent, off or not ready") {
  SUBCASE("forward on, backward off (the default): the training backward runs the layers") {
    hooked::calls::reset();
    auto m = make_model<mlp, float, hooked::device>(5);
    same_as_cpu<mlp>(m);
    CHECK(hooked::calls::forward > 0);
    CHECK(hooked::calls::backward == 0);
  }
  SUBCASE("both off") {
    hooked::calls::reset();
    auto m = make_model<mlp, float, hooked::device>(5);
    m.fused_mlp().forward = false;
    m.fused_mlp().backward = false;
    CHECK_FALSE(m.fused_mlp_active());
    same_as_cpu<mlp>(m);
    CHECK(hooked::calls::forward == 0);
    CHECK(hooked::calls::backward == 0);
  }
  SUBCASE("the backend says the hook cannot run now") {
    hooked::calls::reset();
    hooked::calls::is_ready = false;
    auto m = make_model<mlp, float, hooked::device>(5);
    m.fused_mlp().backward = true;
    same_as_cpu<mlp>(m);
    CHECK(hooked::calls::ready > 0);
    CHECK(hooked::calls::forward == 0);
    CHECK(hooked::calls::backward == 0);
    hooked::calls::reset();
  }
  SUBCASE("a network the hook does not take (dropout)") {
    hooked::calls::reset();
    auto m = make_model<with_dropout, float, hooked::device>(5);
    m.fused_mlp().backward = true;
    CHECK_FALSE(m.fused_mlp_active());
    same_as_cpu<with_dropout>(m);
    CHECK(hooked::calls::ready == 0);
    CHECK(hooked::calls::forward == 0);
    CHECK(hooked::calls::backward == 0);
  }
}

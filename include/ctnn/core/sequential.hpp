// ctnn/core/sequential.hpp — sequential<input<D...>, Layers...>: a network type.
//
// A flat list: the first element is the sample shape, the rest are layer
// specs. Shapes are inferred by a fold over the list; a spec that cannot take
// its input fails to compile with a message naming its position (1 = first
// layer after input). Everything below is a compile-time constant:
//   input_shape, output_shape (values of shape<...>), layer_count,
//   parameter_count, state_count, spec_string() (the architecture text),
//   layout<T>(batch, optimizer_slots) — the arena plan, in elements,
//   memory_plan<T>(batch, optimizer_slots) — the same plan in bytes.
// bound<T, Backend> is the std::tuple of bound layers a model runs.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>

#include "../layers/input.hpp"
#include "arena.hpp"
#include "backend.hpp"
#include "concepts.hpp"
#include "diagnostics.hpp"
#include "shape.hpp"

namespace ctnn {

namespace detail {

template <class... L>
struct type_list {};

template <class L, class List>
struct prepend;
template <class L, class... Ls>
struct prepend<L, type_list<Ls...>> {
  using type = type_list<L, Ls...>;
};

template <class S>
inline constexpr bool check_spec_v = diag::not_a_layer_spec<S, LayerSpec<S>>::value;

template <class S, Shape In, std::size_t Pos>
constexpr bool check_layer() {
  if constexpr (requires { S::template check<In, Pos>(); }) {
    return S::template check<In, Pos>();
  } else {
    return true;
  }
}

// Binds specs one after another, threading the output shape through.
template <Shape In, class T, class B, std::size_t Pos, class... Specs>
struct bind_all {
  using type = type_list<>;
  using out_shape = In;
};
template <Shape In, class T, class B, std::size_t Pos, class S, class... Rest>
struct bind_all<In, T, B, Pos, S, Rest...> {
  static_assert(check_spec_v<S>);
  static_assert(check_layer<S, In, Pos>());
  using layer = typename S::template bind<In, T, B>;
  static_assert(BoundLayer<layer>, "sequential: a bound layer does not satisfy ctnn::BoundLayer");
  using next = bind_all<typename layer::out_shape, T, B, Pos + 1, Rest...>;
  using type = typename prepend<layer, typename next::type>::type;
  using out_shape = typename next::out_shape;
};

template <class List>
struct as_tuple;
template <class... L>
struct as_tuple<type_list<L...>> {
  using type = std::tuple<L...>;
};

template <class Tuple>
struct layer_constants;
template <class... L>
struct layer_constants<std::tuple<L...>> {
  static constexpr std::size_t count = sizeof...(L);
  static constexpr std::array<std::size_t, count> params{L::parameter_count...};
  static constexpr std::array<std::size_t, count> states{L::state_count...};
  static constexpr std::array<std::size_t, count> caches{L::cache_per_sample...};
  static constexpr std::array<std::size_t, count> outs{L::out_shape::size...};
  static constexpr std::array<std::size_t, count> ins{L::in_shape::size...};
};

}  // namespace detail

// Where everything of a model lives in its arena, in elements of T.
struct arena_layout {
  std::size_t parameters = 0, gradients = 0, state = 0, optimizer = 0, activations = 0, deltas = 0, cache = 0;
  std::size_t parameters_size = 0, state_size = 0, optimizer_size = 0, activations_size = 0, deltas_size = 0,
              cache_size = 0, total = 0;
};

// The same plan in bytes.
struct memory_plan_bytes {
  std::size_t parameters = 0, gradients = 0, state = 0, optimizer = 0, activations = 0, total = 0;
};

template <class First, class... Layers>
struct sequential {
  static_assert(diag::sequential_needs_input_first<is_input_v<First>>::value);
  static_assert(diag::sequential_needs_a_layer<(sizeof...(Layers) > 0)>::value);

  using input_type = typename First::shape_type;
  static constexpr input_type input_shape{};

  template <class T, class Backend = cpu>
  using bound = typename detail::as_tuple<typename detail::bind_all<input_type, T, Backend, 1, Layers...>::type>::type;

 private:
  using probe = bound<float, cpu>;
  using consts = detail::layer_constants<probe>;

  template <std::size_t... I>
  static constexpr std::size_t sum(const std::array<std::size_t, sizeof...(Layers)>& a,
                                   std::index_sequence<I...>) {
    return (std::size_t{0} + ... + a[I]);
  }

 public:
  using output_type = typename std::tuple_element_t<sizeof...(Layers) - 1, probe>::out_shape;
  static constexpr output_type output_shape{};
  static constexpr std::size_t layer_count = sizeof...(Layers);
  static constexpr std::size_t parameter_count = sum(consts::params, std::make_index_sequence<layer_count>{});
  static constexpr std::size_t state_count = sum(consts::states, std::make_index_sequence<layer_count>{});

  // Per-layer offsets (in elements of T) into the parameter, state,
  // activation and cache regions; each layer's block starts 64-byte aligned.
  template <class T>
  static constexpr std::array<std::size_t, layer_count + 1> param_offsets() {
    std::array<std::size_t, layer_count + 1> o{};
    for (std::size_t i = 0; i < layer_count; ++i) o[i + 1] = o[i] + aligned_count<T>(consts::params[i]);
    return o;
  }
  template <class T>
  static constexpr std::array<std::size_t, layer_count + 1> state_offsets() {
    std::array<std::size_t, layer_count + 1> o{};
    for (std::size_t i = 0; i < layer_count; ++i) o[i + 1] = o[i] + aligned_count<T>(consts::states[i]);
    return o;
  }
  template <class T>
  static constexpr std::array<std::size_t, layer_count + 1> activation_offsets(std::size_t batch) {
    std::array<std::size_t, layer_count + 1> o{};
    for (std::size_t i = 0; i < layer_count; ++i) o[i + 1] = o[i] + aligned_count<T>(consts::outs[i] * batch);
    return o;
  }
  template <class T>
  static constexpr std::array<std::size_t, layer_count + 1> cache_offsets(std::size_t batch) {
    std::array<std::size_t, layer_count + 1> o{};
    for (std::size_t i = 0; i < layer_count; ++i) o[i + 1] = o[i] + aligned_count<T>(consts::caches[i] * batch);
    return o;
  }
  // Widest tensor a backward pass hands between layers (per sample).
  static constexpr std::size_t max_width() {
    std::size_t m = 0;
    for (std::size_t i = 0; i < layer_count; ++i) {
      m = consts::outs[i] > m ? consts::outs[i] : m;
      m = consts::ins[i] > m ? consts::ins[i] : m;
    }
    return m;
  }

  template <class T>
  static constexpr arena_layout layout(std::size_t batch, std::size_t optimizer_slots) {
    arena_layout l;
    l.parameters_size = param_offsets<T>()[layer_count];
    l.state_size = state_offsets<T>()[layer_count];
    l.optimizer_size = aligned_count<T>(parameter_count) * optimizer_slots;
    l.activations_size = activation_offsets<T>(batch)[layer_count];
    l.deltas_size = 2 * aligned_count<T>(max_width() * batch);
    l.cache_size = cache_offsets<T>(batch)[layer_count];
    l.parameters = 0;
    l.gradients = l.parameters + l.parameters_size;
    l.state = l.gradients + l.parameters_size;
    l.optimizer = l.state + l.state_size;
    l.activations = l.optimizer + l.optimizer_size;
    l.deltas = l.activations + l.activations_size;
    l.cache = l.deltas + l.deltas_size;
    l.total = l.cache + l.cache_size;
    return l;
  }

  // Bytes needed to train at `batch` with an optimizer keeping
  // `optimizer_slots` values per parameter (e.g. adam<>::slots_per_parameter).
  // activations counts layer outputs, the two backward buffers and caches.
  template <class T = float>
  static constexpr memory_plan_bytes memory_plan(std::size_t batch, std::size_t optimizer_slots = 0) {
    const arena_layout l = layout<T>(batch, optimizer_slots);
    memory_plan_bytes m;
    m.parameters = l.parameters_size * sizeof(T);
    m.gradients = l.parameters_size * sizeof(T);
    m.state = l.state_size * sizeof(T);
    m.optimizer = l.optimizer_size * sizeof(T);
    m.activations = (l.activations_size + l.deltas_size + l.cache_size) * sizeof(T);
    m.total = l.total * sizeof(T);
    return m;
  }

  // The architecture as text: "input<28x28> | flatten | dense<256, relu> | dense<10>".
  static std::string spec_string() {
    std::string s = "input<" + input_type::str() + ">";
    ((s += " | " + Layers::spec()), ...);
    return s;
  }

  // FNV-1a of spec_string(): the architecture fingerprint in weight files.
  static std::uint64_t fingerprint() {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : spec_string()) {
      h ^= c;
      h *= 0x100000001b3ull;
    }
    return h;
  }
};

template <class T>
inline constexpr bool is_sequential_v = false;
template <class... L>
inline constexpr bool is_sequential_v<sequential<L...>> = true;

template <class N>
concept Network = is_sequential_v<N>;

}  // namespace ctnn

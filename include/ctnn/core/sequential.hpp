// ctnn/core/sequential.hpp — sequential<input<D...>, Layers...>: a network type.
//
// A flat list: the first element is the sample shape, the rest are layer
// specs. Shapes are inferred by a fold over the list; a spec that cannot take
// its input fails to compile with a message naming its position (1 = first
// layer after input). Everything below is a compile-time constant:
//   input_shape, output_shape (values of shape<...>), layer_count,
//   parameter_count, state_count, spec_string() (the architecture text),
//   plan<P, B> — the typed memory plan of the binding that runs under
//                precision policy P on backend B (core/plan.hpp):
//                plan<P, B>::bytes(role, batch, slots), ::layout(batch, slots),
//   memory_plan<P>(batch, optimizer_slots) — its bytes per role on cpu<>.
// bound<P, B> is the std::tuple of bound layers a model runs (P: a policy,
// or float/double for float32/float64).
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>

#include "../backends/cpu/backend.hpp"
#include "concepts.hpp"
#include "diagnostics.hpp"
#include "input.hpp"
#include "mixed_layer.hpp"
#include "plan.hpp"
#include "precision.hpp"
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

// One spec bound under policy P on backend B. Under a 16-bit policy on a backend
// that runs host code (core/backend.hpp), the spec's float32 binding runs inside mixed_layer
// (core/mixed_layer.hpp); keep_float32<S> keeps its variables unrounded.
template <class S, Shape In, class P, class B>
struct bind_one {
  using type = typename S::template bind<In, P, B>;
};
template <class S, Shape In, class P, class B>
  requires(P::half && runs_host_code<B>)
struct bind_one<S, In, P, B> {
  using spec = std::conditional_t<is_keep_float32_v<S>, typename keep_spec<S>::type, S>;
  using type = mixed_layer<typename spec::template bind<In, precision::float32, B>, P, B, !is_keep_float32_v<S>>;
};

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
  using layer = typename bind_one<S, In, T, B>::type;
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

template <class Tuple, class P>
struct net_plan;

// The typed memory plan of a bound network (a std::tuple of bound layers)
// under precision policy P: every region's bytes and each layer's offsets,
// computed from the buffers each bound layer declares. All constexpr.
template <class P, class... L>
struct net_plan<std::tuple<L...>, P> {
  using policy = P;
  using compute = typename P::compute_type;
  using io = typename P::io_type;  // the last layer's output and dL/dy
  static constexpr std::size_t layer_count = sizeof...(L);
  static constexpr std::array<std::size_t, layer_count> outs{L::out_shape::size...};
  static constexpr std::array<std::size_t, layer_count> ins{L::in_shape::size...};

  // bytes of layer i's region of role r (cache: per sample; activation: its output per sample)
  static constexpr std::size_t unit_bytes(std::size_t i, role r) {
    if (r == role::activation) return outs[i] * (i + 1 == layer_count ? sizeof(io) : sizeof(compute));
    if (r == role::gradient) r = role::parameter;
    constexpr std::array<std::array<std::size_t, role_count>, layer_count> table{{[] {
      std::array<std::size_t, role_count> a{};
      for (std::size_t k = 0; k < role_count; ++k) a[k] = layer_role_bytes<P>(L::buffers, role(k));
      return a;
    }()...}};
    return table[i][std::size_t(r)];
  }
  static constexpr bool per_sample(role r) { return r == role::cache || r == role::activation; }

  // Byte offset of layer i's block inside the region of role r; each block starts 64-byte aligned.
  static constexpr std::size_t offset(std::size_t i, role r, std::size_t batch) {
    std::size_t o = 0;
    for (std::size_t j = 0; j < i; ++j) o += align_bytes(unit_bytes(j, r) * (per_sample(r) ? batch : 1));
    return o;
  }
  static constexpr std::size_t region(role r, std::size_t batch) { return offset(layer_count, r, batch); }

  // Widest tensor a backward pass hands between layers (per sample).
  static constexpr std::size_t max_width() {
    std::size_t m = 0;
    for (std::size_t i = 0; i < layer_count; ++i) m = std::max({m, outs[i], ins[i]});
    return m;
  }
  // One delta buffer (the two alternate): max_width() * batch compute values
  // (or the output's io values, dL/dy, when those take more bytes).
  static constexpr std::size_t delta_bytes(std::size_t batch) {
    return align_bytes(std::max(max_width() * sizeof(compute), outs[layer_count - 1] * sizeof(io)) * batch);
  }

  // The whole plan at a batch size and an optimizer keeping `slots` values per parameter.
  // Regions in this order: the batch-independent ones first, so growing the
  // batch keeps their offsets.
  static constexpr plan_layout layout(std::size_t batch, std::size_t slots) {
    plan_layout l;
    constexpr std::array<role, role_count> order{role::parameter, role::gradient, role::state,      role::mask,  role::metadata,
                                                 role::optimizer_slot, role::activation, role::delta, role::cache};
    std::size_t at = 0;
    for (role r : order) {
      std::size_t n = 0;
      if (r == role::optimizer_slot) n = region(role::parameter, 1) * slots;
      else if (r == role::delta) n = 2 * delta_bytes(batch);
      else n = region(r, batch);
      l.offset[std::size_t(r)] = at;
      l.size[std::size_t(r)] = n;
      at += n;
    }
    l.total = at;
    return l;
  }
  static constexpr std::size_t bytes(role r, std::size_t batch, std::size_t slots = 0) { return layout(batch, slots).bytes(r); }
  static constexpr memory_plan_bytes memory(std::size_t batch, std::size_t slots = 0) {
    return memory_plan_bytes::of(layout(batch, slots));
  }
};

template <class Tuple>
struct element_counts;
template <class... L>
struct element_counts<std::tuple<L...>> {
  static constexpr std::size_t parameters = (std::size_t{0} + ... + count_of(L::buffers, role::parameter));
  static constexpr std::size_t state = (std::size_t{0} + ... + count_of(L::buffers, role::state));
};

}  // namespace detail

template <class First, class... Layers>
struct sequential {
  static_assert(diag::sequential_needs_input_first<is_input_v<First>>::value);
  static_assert(diag::sequential_needs_a_layer<(sizeof...(Layers) > 0)>::value);

  using input_type = typename First::shape_type;
  static constexpr input_type input_shape{};

  // The bound layers for element type or precision policy P and backend B.
  template <class P, class B = cpu<>>
  using bound = typename detail::as_tuple<
      typename detail::bind_all<input_type, precision::policy_of_t<P>, B, 1, Layers...>::type>::type;

  // The typed memory plan of the binding that runs under policy P on backend B.
  template <class P = precision::float32, class B = cpu<>>
  using plan = detail::net_plan<bound<P, B>, precision::policy_of_t<P>>;

 private:
  using probe = bound<precision::float32, cpu<>>;  // shapes and element counts only

 public:
  using output_type = typename std::tuple_element_t<sizeof...(Layers) - 1, probe>::out_shape;
  static constexpr output_type output_shape{};
  static constexpr std::size_t layer_count = sizeof...(Layers);
  static constexpr std::size_t parameter_count = detail::element_counts<probe>::parameters;
  static constexpr std::size_t state_count = detail::element_counts<probe>::state;

  // Bytes needed to train at `batch` with an optimizer keeping
  // `optimizer_slots` values per parameter (e.g. adam<>::slots_per_parameter),
  // for element type or policy P on the default CPU backend; plan<P, B> for another.
  template <class P = float>
  static constexpr memory_plan_bytes memory_plan(std::size_t batch, std::size_t optimizer_slots = 0) {
    return plan<P>::memory(batch, optimizer_slots);
  }

  // The architecture as text: "input<28x28> | flatten | dense<256, relu> | dense<10>".
  static std::string spec_string() {
    std::string s = "input<" + input_type::str() + ">";
    ((s += " | " + Layers::name()), ...);
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

// ctnn/core/sequential.hpp — sequential<input<D...>, Layers...>: a network type.
//
// A flat list: the first element is the sample shape, the rest are layer
// specs. Shapes are inferred by a fold over the list; a spec that cannot take
// its input fails to compile with a message naming its position (1 = first
// layer after input). Everything below is a compile-time constant:
//   input_shape, output_shape (values of shape<...>), layer_count,
//   parameter_count, state_count, parameter_bytes, state_bytes (float32, each buffer at its
//   element size: int8 kernels 1 byte a value; the values, as a weights file holds them, without the
//   plan's alignment padding), spec_string() (the architecture text),
//   plan<P, B> — the typed memory plan of the binding that runs under
//                precision policy P on backend B (core/plan.hpp):
//                plan<P, B>::bytes(role, batch, slots), ::layout(batch, slots); a layer's
//                activation block holds its output_element where it declares one (an int8
//                layer feeding another: 1 byte a value), else its compute type,
//   memory_plan<P>(batch, optimizer_slots) — its bytes per role on cpu<>.
// bound<P, B> is the std::tuple of bound layers a model runs (P: a policy,
// or float/double for float32/float64): each bound with ONE compute type
// (under mixed_float16 every layer sees float16_t; keep_float32<S> float);
// variable_bound<P, B> binds the same specs with the variable type (init,
// penalties). keep_float32<Spec> is declared here.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <tuple>
#include <type_traits>

#include "../backends/cpu/backend.hpp"
#include "concepts.hpp"
#include "diagnostics.hpp"
#include "input.hpp"
#include "plan.hpp"
#include "precision.hpp"
#include "shape.hpp"
#include "type_at.hpp"

namespace ctnn {

// keep_float32<Spec>: Spec computing in float32 under any policy (Keras: a
// layer made with dtype="float32" inside a mixed model): bound with float as
// its compute type, it reads the float32 variables themselves (no
// compute-type copy) and writes float32 gradients; the model converts its
// input and output from and to its neighbours' types. Under float32 or
// float64 it is Spec itself.
template <class Spec>
struct keep_float32 {
  using is_layer_spec = void;
  using spec = Spec;
  static std::string name() { return "keep_float32<" + Spec::name() + ">"; }
  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    if constexpr (requires { Spec::template check<In, Pos>(); }) return Spec::template check<In, Pos>();
    else return true;
  }
  template <Shape In, class P, class Backend>
  using bind = typename Spec::template bind<In, P, Backend>;  // sequential binds it with a float32 compute type
};

template <class S>
inline constexpr bool is_keep_float32_v = false;
template <class S>
inline constexpr bool is_keep_float32_v<keep_float32<S>> = true;

namespace detail {
template <class S>
struct keep_spec {
  using type = S;
};
template <class S>
struct keep_spec<keep_float32<S>> {
  using type = S;
};

template <class S>
inline constexpr bool check_spec_v = diag::not_a_layer_spec<S, LayerSpec<S>>::value;
// The first error names the position and the type ("layer 2 (not_a_layer): not a layer spec ...").
template <class S, std::size_t Pos>
constexpr bool check_spec() {
  if constexpr (!LayerSpec<S>) {
    constexpr bool located = diag::require<false, &diag::not_a_layer_text<Pos, S>>();
    return located && check_spec_v<S>;
  } else {
    return true;
  }
}
template <class First>
constexpr bool check_input_first() {
  if constexpr (!is_input_v<First>) {
    constexpr bool located = diag::require<false, &diag::input_first_text<First>>();
    return located && diag::sequential_needs_input_first<is_input_v<First>>::value;
  } else {
    return true;
  }
}

template <class S, Shape In, std::size_t Pos>
constexpr bool check_layer() {
  if constexpr (requires { S::template check<In, Pos>(); }) {
    return S::template check<In, Pos>();
  } else {
    return true;
  }
}

// One spec bound under policy P on backend B: with layer_policy_t<P> (the
// compute type throughout, core/precision.hpp). keep_float32<S> binds S with
// float as its compute type under a 16-bit policy (the model converts its
// input and output). variable_binding is the spec bound with the variable
// type (float when that is 16-bit): what init, penalty and the penalty
// gradient run on, over the float32 variables (docs/mixed-precision.md).
template <class P>
using variable_policy_t =
    std::conditional_t<is_half_v<typename P::variable_type>, precision::float32, precision::policy<typename P::variable_type>>;

template <class S, Shape In, class P, class B>
struct bind_one {
  using spec = typename keep_spec<S>::type;
  using layer_policy = std::conditional_t<is_keep_float32_v<S>, precision::float_compute_t<precision::layer_policy_t<P>>,
                                          precision::layer_policy_t<P>>;
  using type = typename spec::template bind<In, layer_policy, B>;
  using variable_binding = typename spec::template bind<In, variable_policy_t<P>, B>;
};

// Binds specs one after another, threading the output shape through. Linear in
// the depth: step<I> names its spec by index (at_t) and its input by the
// previous step, never a suffix of the list, and the pack expansion in collect
// instantiates step<0>, step<1>, ... in order, so each finds the one before it
// complete (instantiation depth stays constant; docs/performance.md).
template <Shape In, class P, class B, class Specs>
struct bind_all {
  using specs = Specs;
  template <std::size_t I>
  struct step;
  template <std::size_t I, class = void>
  struct in_of {
    using type = typename step<I - 1>::layer::out_shape;
  };
  template <class D>
  struct in_of<0, D> {
    using type = In;
  };
  template <std::size_t I>
  struct step {
    using spec = at_t<I, specs>;
    using in_shape = typename in_of<I>::type;
    static_assert(check_spec<spec, I + 1>());
    static_assert(check_layer<spec, in_shape, I + 1>());
    using layer = typename bind_one<spec, in_shape, P, B>::type;
    static_assert(BoundLayer<layer>, "sequential: a bound layer does not satisfy ctnn::BoundLayer");
    using variable_binding = typename bind_one<spec, in_shape, P, B>::variable_binding;
  };
  template <class Seq>
  struct collect;
  template <std::size_t... I>
  struct collect<std::index_sequence<I...>> {
    using type = std::tuple<typename step<I>::layer...>;
    using variables = std::tuple<typename step<I>::variable_binding...>;
  };
  using all = collect<std::make_index_sequence<Specs::size>>;
  using type = typename all::type;            // std::tuple of the bound layers
  using variables = typename all::variables;  // the same specs bound with the variable type
};

template <class Tuple, class P>
struct net_plan;

// A bound layer's compute type (the policy's for a layer that does not name one).
template <class L, class P>
struct compute_of {
  using type = typename P::compute_type;
};
template <class L, class P>
  requires requires { typename L::compute_type; }
struct compute_of<L, P> {
  using type = typename L::compute_type;
};

// A bound layer's activation element types: its output_element and input_element (the int8
// layers between two full-integer layers, layers/quantized_dense.hpp), else its compute type.
template <class L, class P>
struct output_element_of : compute_of<L, P> {};
template <class L, class P>
  requires requires { typename L::output_element; }
struct output_element_of<L, P> {
  using type = typename L::output_element;
};
template <class L, class P>
struct input_element_of : compute_of<L, P> {};
template <class L, class P>
  requires requires { typename L::input_element; }
struct input_element_of<L, P> {
  using type = typename L::input_element;
};

// Layer I's compute type under plan Plan (a net_plan), and the type of its
// input: the model's io type, else the previous layer's compute type.
template <std::size_t I, class Plan>
using compute_at_t = typename compute_of<at_t<I, typename Plan::layers>, typename Plan::policy>::type;
template <std::size_t I, class Plan>
using input_at_t = typename std::conditional_t<I == 0, std::type_identity<typename Plan::io>,
                                               compute_of<at_t<I - (I > 0), typename Plan::layers>, typename Plan::policy>>::type;

// The typed memory plan of a bound network (a std::tuple of bound layers)
// under precision policy P: every region's bytes and each layer's offsets,
// computed from the buffers each bound layer declares, each sized by the
// layer's own compute type. All constexpr.
template <class P, class... L>
struct net_plan<std::tuple<L...>, P> {
  using policy = P;
  using variable = typename P::variable_type;
  using compute = typename P::compute_type;
  using io = typename P::io_type;  // the model's input, output and dL/dy
  static constexpr std::size_t layer_count = sizeof...(L);
  static constexpr std::array<std::size_t, layer_count> outs{L::out_shape::size...};
  static constexpr std::array<std::size_t, layer_count> ins{L::in_shape::size...};
  // layer i's output is its input's memory (flatten, reshape: `aliases_input`): it has no
  // activation block, and the model neither runs its forward nor its backward (dL/dx is dL/dy)
  static constexpr std::array<bool, layer_count> aliases{aliases_input<L>...};
  using layers = pack<L...>;
  // (per-layer types: compute_at_t<I, net_plan> and input_at_t, outside; a member template of a
  // class whose arguments hold the pack costs g++ 12 the whole pack per I)
  static constexpr std::array<std::size_t, layer_count> sizes{sizeof(typename compute_of<L, P>::type)...};
  // the bytes of one value of layer i's output (its activation block): the compute type's, or 1
  // where an int8 layer hands int8 values to the next (output_element)
  static constexpr std::array<std::size_t, layer_count> out_sizes{sizeof(typename output_element_of<L, P>::type)...};
  // an int8 output feeds a layer taking int8 input, and only such a layer takes one (the first
  // layer's input is the model's io)
  static constexpr bool int8_paired = [] {
    constexpr bool out8[] = {std::is_same_v<typename output_element_of<L, P>::type, std::int8_t>..., false};
    constexpr bool in8[] = {std::is_same_v<typename input_element_of<L, P>::type, std::int8_t>...};
    for (std::size_t i = 0; i < layer_count; ++i)
      if (in8[i] != (i > 0 && out8[i - 1]) || (i + 1 == layer_count && out8[i])) return false;
    return true;
  }();
  static_assert(int8_paired, "sequential: a layer writing int8 values (quantization::int8_io) must be followed by one "
                             "reading them, and only such a layer reads them (quantized_t sets it)");
  // layer i keeps a compute-type copy of its parameters (its compute type is not the variable type)
  static constexpr std::array<bool, layer_count> copies{!std::is_same_v<typename compute_of<L, P>::type, variable>...};
  // layer i's input is converted to its compute type first
  static constexpr std::array<bool, layer_count> converts_input = []<std::size_t... I>(std::index_sequence<I...>) {
    return std::array<bool, layer_count>{!std::is_same_v<input_at_t<I, net_plan>, compute_at_t<I, net_plan>>...};
  }(std::make_index_sequence<layer_count>{});
  // the last layer's output is widened to io
  static constexpr bool converts_output = !std::is_same_v<compute_at_t<layer_count - 1, net_plan>, io>;

  // role_bytes[i][r]: bytes of layer i's region of role r (per sample for the
  // per-sample roles). A static member, not a constexpr local of unit_bytes:
  // the model calls unit_bytes at run time (offsets at a run-time batch),
  // and g++ 12 built a local table on the stack at every call (rep stos;
  // docs/performance.md, "Inference at batch 1").
  static constexpr std::array<std::array<std::size_t, role_count>, layer_count> role_bytes{{[] {
    using C = typename compute_of<L, P>::type;
    std::array<std::size_t, role_count> a{};
    for (std::size_t k = 0; k < role_count; ++k) a[k] = layer_role_bytes<precision::policy<variable, C>>(L::buffers, role(k));
    a[std::size_t(role::compute_parameter)] =
        std::is_same_v<C, variable> ? 0 : layer_role_bytes<precision::policy<C>>(L::buffers, role::parameter);
    return a;
  }()...}};
  // fixed_offsets[i][r]: offset(i, r, batch) of the roles whose blocks do not grow with the batch
  // (not per_sample), so that a run-time layer index (the model's variable_slot, block) reads one
  // value instead of summing the blocks before it, unrolled over the layers in every caller.
  static constexpr std::array<std::array<std::size_t, role_count>, layer_count + 1> fixed_offsets = [] {
    std::array<std::array<std::size_t, role_count>, layer_count + 1> o{};
    for (std::size_t i = 0; i < layer_count; ++i)
      for (std::size_t k = 0; k < role_count; ++k) {
        // unit_bytes' aliases: a gradient block is its parameter block's size
        const std::size_t u = k == std::size_t(role::gradient)           ? std::size_t(role::parameter)
                              : k == std::size_t(role::compute_gradient) ? std::size_t(role::compute_parameter)
                                                                         : k;
        o[i + 1][k] = o[i][k] + align_bytes(role_bytes[i][u]);
      }
    return o;
  }();
  static constexpr std::size_t unit_bytes(std::size_t i, role r) {
    if (r == role::activation) return aliases[i] ? 0 : outs[i] * out_sizes[i];
    if (r == role::gradient) r = role::parameter;
    if (r == role::compute_gradient) r = role::compute_parameter;
    return role_bytes[i][std::size_t(r)];
  }
  static constexpr bool per_sample(role r) { return r == role::cache || r == role::activation || r == role::converted; }
  // Bytes of layer i's converted-input part (its output widened to io follows, 64-byte aligned).
  static constexpr std::size_t converted_input_bytes(std::size_t i, std::size_t batch) {
    return converts_input[i] ? align_bytes(ins[i] * sizes[i] * batch) : 0;
  }
  static constexpr std::size_t block_bytes(std::size_t i, role r, std::size_t batch) {
    if (r == role::converted)
      return converted_input_bytes(i, batch) + (i + 1 == layer_count && converts_output ? outs[i] * sizeof(io) * batch : 0);
    return unit_bytes(i, r) * (per_sample(r) ? batch : 1);
  }

  // Byte offset of layer i's block inside the region of role r; each block starts 64-byte aligned.
  static constexpr std::size_t offset(std::size_t i, role r, std::size_t batch) {
    if (!per_sample(r)) return fixed_offsets[i][std::size_t(r)];
    std::size_t o = 0;
    for (std::size_t j = 0; j < i; ++j) o += align_bytes(block_bytes(j, r, batch));
    return o;
  }
  static constexpr std::size_t region(role r, std::size_t batch) { return offset(layer_count, r, batch); }

  // Widest tensor a backward pass hands between layers (per sample).
  static constexpr std::size_t max_width() {
    std::size_t m = 0;
    for (std::size_t i = 0; i < layer_count; ++i) m = std::max({m, outs[i], ins[i]});
    return m;
  }
  // One delta buffer (the two alternate): the widest dL/dx or dL/dy of any
  // layer in its compute type, or the output's dL/dy in io, times the batch.
  static constexpr std::size_t delta_bytes(std::size_t batch) {
    std::size_t m = outs[layer_count - 1] * sizeof(io);
    for (std::size_t i = 0; i < layer_count; ++i) m = std::max(m, std::max(outs[i], ins[i]) * sizes[i]);
    return align_bytes(m * batch);
  }

  // The whole plan at a batch size and an optimizer keeping `slots` values per parameter.
  // Regions in this order: the batch-independent ones first, so growing the
  // batch keeps their offsets.
  static constexpr plan_layout layout(std::size_t batch, std::size_t slots) {
    plan_layout l;
    constexpr std::array<role, role_count> order{role::parameter,         role::gradient,         role::state,
                                                 role::mask,              role::metadata,         role::optimizer_slot,
                                                 role::compute_parameter, role::compute_gradient, role::derived,
                                                 role::activation,        role::converted,        role::delta,
                                                 role::cache};
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
  static constexpr std::size_t parameters = sum_of({std::size_t{0}, count_of(L::buffers, role::parameter)...});
  static constexpr std::size_t state = sum_of({std::size_t{0}, count_of(L::buffers, role::state)...});
  // their bytes at each buffer's element size (float32 variables; int8 and int32 buffers as such), without
  // the plan's padding (buffer::aligned): the values a weights file holds
  static constexpr std::size_t parameter_bytes =
      sum_of({std::size_t{0}, layer_role_value_bytes<precision::float32>(L::buffers, role::parameter)...});
  static constexpr std::size_t state_bytes =
      sum_of({std::size_t{0}, layer_role_value_bytes<precision::float32>(L::buffers, role::state)...});
};

}  // namespace detail

template <class First, class... Layers>
struct sequential {
  static_assert(detail::check_input_first<First>());
  static_assert(diag::sequential_needs_a_layer<(sizeof...(Layers) > 0)>::value);

  using input_type = typename First::shape_type;
  static constexpr input_type input_shape{};

  // The bound layers for element type or precision policy P and backend B.
  template <class P, class B = cpu<>>
  using bound = typename detail::bind_all<input_type, precision::policy_of_t<P>, B, detail::pack<Layers...>>::type;
  // The same specs bound with the variable type (float when it is 16-bit):
  // what a model runs init, penalty and the penalty gradient with.
  template <class P, class B = cpu<>>
  using variable_bound = typename detail::bind_all<input_type, precision::policy_of_t<P>, B, detail::pack<Layers...>>::variables;

  // The typed memory plan of the binding that runs under policy P on backend B.
  template <class P = precision::float32, class B = cpu<>>
  using plan = detail::net_plan<bound<P, B>, precision::policy_of_t<P>>;

 private:
  using probe = bound<precision::float32, cpu<>>;  // shapes and element counts only

 public:
  using output_type = typename detail::type_at_t<sizeof...(Layers) - 1, probe>::out_shape;
  static constexpr output_type output_shape{};
  static constexpr std::size_t layer_count = sizeof...(Layers);
  static constexpr std::size_t parameter_count = detail::element_counts<probe>::parameters;
  static constexpr std::size_t state_count = detail::element_counts<probe>::state;
  // The bytes of those values under float32, each at its element size (an int8 kernel 1 byte per
  // weight), without the plan's alignment: what summary() prints in KB.
  static constexpr std::size_t parameter_bytes = detail::element_counts<probe>::parameter_bytes;
  static constexpr std::size_t state_bytes = detail::element_counts<probe>::state_bytes;

  // Bytes needed to train at `batch` with an optimizer keeping
  // `optimizer_slots` values per parameter (e.g. adam<>::max_slots_per_parameter),
  // for element type or policy P on the default CPU backend; plan<P, B> for another.
  template <class P = float>
  static constexpr memory_plan_bytes memory_plan(std::size_t batch, std::size_t optimizer_slots = 0) {
    return plan<P>::memory(batch, optimizer_slots);
  }

  // The architecture as text: "input<28x28> | flatten | dense<256, relu> | dense<10>".
  static std::string spec_string() {
    std::string s = "input<" + input_type::str() + ">";
    (void)std::initializer_list<int>{((s += " | " + Layers::name()), 0)...};
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

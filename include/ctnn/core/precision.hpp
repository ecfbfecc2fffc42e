// ctnn/core/precision.hpp — precision policies: which element type each buffer role uses.
//
// A policy names variable_type (parameters, their gradients, non-trainable
// state, optimizer slots: what is saved and updated) and compute_type
// (activations, backward deltas, caches: what the layers compute in).
// float32 and float64 use one type for both. mixed_float16 and
// mixed_bfloat16 (Keras' policies of those names) keep the variables,
// gradients and optimizer slots in float and store activations, deltas in
// float16_t / bfloat16_t; float16 stores everything in float16_t (inference:
// half the memory of a deployed model). io_type is what a model takes and
// returns (inputs, outputs, the loss's dL/dy): float for the 16-bit policies,
// so losses, metrics and the final softmax run in float32. When the variable
// and compute types differ, the plan adds a copy of the parameters in the
// compute type and the layers are bound with ONE type, the compute type
// (layer_policy_t<P>, docs/mixed-precision.md); keep_float32<Spec>
// (core/sequential.hpp) binds one layer with float instead.
// A model's precision is chosen where it is made (make_model<Net, P, B>);
// the network type never changes with it. policy_of_t<X> maps a plain
// element type (float, double) to its uniform policy and a policy to itself.
#pragma once
#include <array>
#include <cstddef>
#include <type_traits>

#include "half.hpp"

namespace ctnn::precision {

// The Keras name of an element type: its own name() (float16_t, bfloat16_t:
// core/half.hpp), "float32" for float and "float64" for double; null for others.
template <class T>
constexpr const char* element_name() {
  if constexpr (requires { T::name(); }) return T::name();
  else if constexpr (std::is_same_v<T, float>) return "float32";
  else if constexpr (std::is_same_v<T, double>) return "float64";
  else return nullptr;
}

namespace detail {
// A policy's name from its types: uniform policies are named by their type,
// float variables with a 16-bit compute type are "mixed_" and that type's
// name (Keras' mixed_float16, mixed_bfloat16); anything else is "custom".
template <class V, class C>
struct policy_name {
  static constexpr std::array<char, 32> text = [] {
    constexpr bool mixed = std::is_same_v<V, float> && is_half_v<C>;
    constexpr const char* type = std::is_same_v<V, C> || mixed ? element_name<C>() : nullptr;
    std::array<char, 32> a{};
    std::size_t n = 0;
    for (const char* p = type ? (mixed ? "mixed_" : "") : "custom"; *p; ++p) a[n++] = *p;
    if (type)
      for (const char* p = type; *p; ++p) a[n++] = *p;
    return a;
  }();
};
}  // namespace detail

template <class Variable, class Compute = Variable>
struct policy {
  using variable_type = Variable;
  using compute_type = Compute;
  static constexpr bool uniform = std::is_same_v<Variable, Compute>;
  // a 16-bit storage type is involved (the CPU runs it through backends/cpu/half_ops.hpp)
  static constexpr bool half = is_half_v<Variable> || is_half_v<Compute>;
  using io_type = std::conditional_t<half, float, Compute>;
  // "float32", "float64", "float16", "mixed_float16", "mixed_bfloat16", else "custom"
  static constexpr const char* name() { return detail::policy_name<Variable, Compute>::text.data(); }
};

using float32 = policy<float>;
using float64 = policy<double>;
using mixed_float16 = policy<float, float16_t>;
using mixed_bfloat16 = policy<float, bfloat16_t>;
using float16 = policy<float16_t, float16_t>;  // inference: variables stored in float16 too

// Whether P is one of the 16-bit policies (mixed or float16).
template <class P>
inline constexpr bool is_half_policy_v = P::half;
// The policy's name, as Keras spells it ("float32", "mixed_float16", ...): P::name().
template <class P>
constexpr const char* name_of() {
  return P::name();
}

// The policy a layer of a model under a non-uniform policy is bound with:
// every buffer the layer sees in the compute type C, except its state
// (batch_norm's moving statistics), which stays in the model's variable type
// S (float32 under the mixed policies, as Keras). state_type_t<P> is that
// type for any policy (the variable type of a plain one).
template <class S, class C>
struct layer_policy : policy<C> {
  using state_type = S;
};
template <class P>
struct state_type_of {
  using type = typename P::variable_type;
};
template <class P>
  requires requires { typename P::state_type; }
struct state_type_of<P> {
  using type = typename P::state_type;
};
template <class P>
using state_type_t = typename state_type_of<P>::type;

// The type a layer computes its scalar formulas in: float for the 16-bit
// storage types (arithmetic on them happens in float), T otherwise.
template <class T>
using arithmetic_t = std::conditional_t<is_half_v<T>, float, T>;

template <class X>
struct policy_of {
  using type = policy<X>;
};
template <class V, class C>
struct policy_of<policy<V, C>> {
  using type = policy<V, C>;
};
template <class S, class C>
struct policy_of<layer_policy<S, C>> {
  using type = layer_policy<S, C>;
};
template <class X>
using policy_of_t = typename policy_of<X>::type;

// The policy of a layer that computes in float where P's compute type is
// 16-bit (keep_float32<Spec>, the sparse layers): P otherwise.
template <class P>
using float_compute_t =
    std::conditional_t<!is_half_v<typename P::compute_type>, P,
                       std::conditional_t<is_half_v<state_type_t<P>>, layer_policy<state_type_t<P>, float>, policy<float>>>;

// The policy the layers of a model under policy P are bound with: P itself
// when it is uniform, else layer_policy<variable_type, compute_type>.
template <class P>
using layer_policy_t = std::conditional_t<P::uniform, P, layer_policy<typename P::variable_type, typename P::compute_type>>;

}  // namespace ctnn::precision

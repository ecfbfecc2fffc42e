// ctnn/core/precision.hpp — precision policies: which element type each buffer role uses.
//
// A policy names variable_type (parameters, their gradients, non-trainable
// state, optimizer slots: what is saved and updated) and compute_type
// (activations, backward deltas, caches: what the layers compute in).
// float32 and float64 use one type for both; the mixed policies of the
// mixed-precision issue keep float variables and compute in a 16-bit type.
// A model's precision is chosen where it is made (make_model<Net, P, B>);
// the network type never changes with it. policy_of_t<X> maps a plain
// element type (float, double) to its uniform policy and a policy to itself.
#pragma once
#include <type_traits>

namespace ctnn::precision {

template <class Variable, class Compute = Variable>
struct policy {
  using variable_type = Variable;
  using compute_type = Compute;
  static constexpr bool uniform = std::is_same_v<Variable, Compute>;
};

using float32 = policy<float>;
using float64 = policy<double>;

template <class X>
struct policy_of {
  using type = policy<X>;
};
template <class V, class C>
struct policy_of<policy<V, C>> {
  using type = policy<V, C>;
};
template <class X>
using policy_of_t = typename policy_of<X>::type;

}  // namespace ctnn::precision

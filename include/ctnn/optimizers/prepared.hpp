// ctnn/optimizers/prepared.hpp — which optimizers the training step may run through prepare(...).run:
// detail::prepared_update (update<B> and prepare<T> declared by one class: adam and with_options<adam>,
// not a type derived from adam that replaces update alone) and detail::prepare_without_update (prepare
// replaced alone: refused by the step, train/step.hpp). A header of its own so that the step needs
// only it, not the optimizers' base (a program may include the step without any optimizer header).
#pragma once
#include <concepts>
#include <type_traits>

#include "../core/compile_message.hpp"
#include "../core/concepts.hpp"

namespace ctnn::detail {
// The class that declares a member function: &D::f names D's own f, or the base's that D inherits.
template <class P>
struct member_owner {};
template <class R, class C, class... A>
struct member_owner<R (C::*)(A...) const> {
  using type = C;
};
template <class R, class C, class... A>
struct member_owner<R (C::*)(A...) const noexcept> {
  using type = C;
};
template <class O, class B, class T>
using update_owner = typename member_owner<decltype(&O::template update<B, T>)>::type;
template <class O, class T>
using prepare_owner = typename member_owner<decltype(&O::template prepare<T>)>::type;
// An optimizer whose update's coefficients can be computed once for several calls (adam::prepare:
// the training step's per-layer update, train/step.hpp): prepare<T>(iteration, rate).run<B>(args),
// declared by the class that declares update<B> (whose promise is that update<B>(a) is
// prepare<T>(a.iteration, a.learning_rate).run<B>(a)). A type derived from adam that replaces
// update only is not one: the step calls its update.
template <class O, class B, class T>
concept prepared_update = requires(const O& o, const update_args<T>& a) {
  { o.template prepare<T>(a.iteration, a.learning_rate).template run<B>(a) } -> std::same_as<bool>;
  typename update_owner<O, B, T>;
  typename prepare_owner<O, T>;
} && std::is_same_v<update_owner<O, B, T>, prepare_owner<O, T>>;
// prepare<T> replaced by a class derived from the one that declares update<B>: that update calls
// its own class's prepare, so the replacement would be ignored (the step refuses it).
template <class O, class B, class T>
constexpr bool prepare_without_update() {
  if constexpr (requires {
                  typename update_owner<O, B, T>;
                  typename prepare_owner<O, T>;
                })
    return !std::is_same_v<update_owner<O, B, T>, prepare_owner<O, T>> &&
           std::is_base_of_v<update_owner<O, B, T>, prepare_owner<O, T>>;
  else
    return false;
}
// "optimizer: <O> replaces prepare but not update (...)"
template <class O>
constexpr diag::message prepare_without_update_text() {
  diag::message m;
  m << "optimizer: ";
  m.type<O>() << " replaces prepare but not update, so update ignores it (it calls the prepare of its own class); replace update too "
                 "(update<B>(a) is prepare<T>(a.iteration, a.learning_rate).run<B>(a)) or neither";
  return m;
}
}  // namespace ctnn::detail

// ctnn/core/type_at.hpp — the I-th type of a pack or of a std::tuple, in
// constant instantiation depth and linear memory over a whole network.
//
//   detail::pack_at_t<I, T...>      the I-th of T...
//   detail::type_at_t<I, Tuple>     the I-th element type of a std::tuple
//   detail::any_of_v<B...>, detail::sum_of({n...})   flat folds (see below)
//
// std::tuple_element_t<I, std::tuple<L...>> in libstdc++ 12 peels three types
// per step (_Nth_type), so looking up every layer of an N-layer network
// instantiates about N^2 / 6 class templates, each holding a suffix of the
// pack: memory grows with N^3 (docs/performance.md#compile-time-and-memory).
// Here: the compiler's __type_pack_element where it has one (clang, g++ >= 14),
// else a two-level deduction from base classes (below).
#pragma once
#include <cstddef>
#include <initializer_list>
#include <tuple>
#include <type_traits>
#include <utility>

namespace ctnn::detail {

#if defined(__has_builtin)
#if __has_builtin(__type_pack_element)
#define CTNN_HAS_TYPE_PACK_ELEMENT 1
#endif
#endif

// One class per pack: a lookup names only the pack's class and I, so it costs
// the same at any depth (a lookup that spelled the pack out, pack_at_t<I,
// T...>, made the compiler substitute and keep N arguments per I: quadratic).
template <class... T>
struct pack;
#ifdef CTNN_HAS_TYPE_PACK_ELEMENT
template <class... T>
struct pack {
  static constexpr std::size_t size = sizeof...(T);
  template <std::size_t I>
  using at = __type_pack_element<I, T...>;
};
#else
// Two levels: the pack in blocks of 16 (peeled once per pack), then the type
// inside its block, each deduced from a walk of that level's base classes.
template <std::size_t J, class T>
struct indexed {};
template <std::size_t B, class Seq, class... T>
struct block_of;
template <std::size_t B, std::size_t... J, class... T>
struct block_of<B, std::index_sequence<J...>, T...> : indexed<J, T>... {};
template <std::size_t B, class Block>
struct block_tag {};  // names its block without deriving from it: the walk skips the leaves
template <std::size_t B, class... T>
struct blocks : block_tag<B, block_of<B, std::index_sequence_for<T...>, T...>> {};
template <std::size_t B, class T0, class T1, class T2, class T3, class T4, class T5, class T6, class T7, class T8, class T9,
          class T10, class T11, class T12, class T13, class T14, class T15, class T16, class... R>
struct blocks<B, T0, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15, T16, R...>
    : block_tag<B, block_of<B, std::make_index_sequence<16>, T0, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15>>,
      blocks<B + 1, T16, R...> {};
template <std::size_t B, class Block>
const Block* pick_block(const block_tag<B, Block>*);
template <std::size_t J, class T>
std::type_identity<T> pick(const indexed<J, T>*);
template <std::size_t I, class Index>
using index_at_t = typename decltype(detail::pick<I % 16>(detail::pick_block<I / 16>(static_cast<const Index*>(nullptr))))::type;
template <class... T>
struct pack {
  static constexpr std::size_t size = sizeof...(T);
  using index = blocks<0, T...>;
  template <std::size_t I>
  using at = index_at_t<I, index>;
};
#endif
template <std::size_t I, class... T>
using pack_at_t = typename pack<T...>::template at<I>;  // one lookup; many: name pack<T...> once
// The I-th type of P = pack<T...>, named by P alone (arguments I and P only).
#ifdef CTNN_HAS_TYPE_PACK_ELEMENT
template <std::size_t I, class P>
using at_t = typename P::template at<I>;
#else
template <std::size_t I, class P>
using at_t = index_at_t<I, typename P::index>;
#endif

template <class Tuple>
struct tuple_pack;
template <class... T>
struct tuple_pack<std::tuple<T...>> {
  using type = pack<T...>;
};
template <std::size_t I, class Tuple>
using type_at_t = at_t<I, typename tuple_pack<Tuple>::type>;

// Over a network's layers, a braced list instead of a fold: clang nests a fold
// of N terms N deep and stops at 256 (-fbracket-depth); a list stays flat.
template <bool... B>
inline constexpr bool any_of_v = [] {
  for (bool b : {false, B...})
    if (b) return true;
  return false;
}();
constexpr std::size_t sum_of(std::initializer_list<std::size_t> v) {
  std::size_t s = 0;
  for (std::size_t x : v) s += x;
  return s;
}

}  // namespace ctnn::detail

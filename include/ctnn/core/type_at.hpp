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
// else overload resolution against one class deriving from indexed<I, T> for
// every I (one instantiation per pack, O(N) work per lookup).
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

#ifdef CTNN_HAS_TYPE_PACK_ELEMENT
template <std::size_t I, class... T>
using pack_at_t = __type_pack_element<I, T...>;
#else
template <std::size_t I>
struct index_tag;
template <std::size_t I, class T>
struct indexed {
  static std::type_identity<T> at(index_tag<I>*);
};
template <class Seq, class... T>
struct indexer;
template <std::size_t... I, class... T>
struct indexer<std::index_sequence<I...>, T...> : indexed<I, T>... {
  using indexed<I, T>::at...;
};
template <std::size_t I, class... T>
using pack_at_t = typename decltype(indexer<std::index_sequence_for<T...>, T...>::at(static_cast<index_tag<I>*>(nullptr)))::type;
#endif

template <std::size_t I, class Tuple>
struct type_at;
template <std::size_t I, class... T>
struct type_at<I, std::tuple<T...>> {
  using type = pack_at_t<I, T...>;
};
template <std::size_t I, class Tuple>
using type_at_t = typename type_at<I, Tuple>::type;

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

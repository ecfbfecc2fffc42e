// core/type_at.hpp: the I-th type of a pack or a tuple (the compiler's __type_pack_element, or
// g++ 12's two-level deduction in blocks of 16: every index of 300 is checked, so each block
// boundary is) and the flat folds, over 300 types, as a 300-layer network uses them.
#include <doctest/doctest.h>

#include <ctnn/core/type_at.hpp>

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

namespace {
template <std::size_t I>
using tag = std::integral_constant<std::size_t, I>;
template <std::size_t... I>
auto tags(std::index_sequence<I...>) -> std::tuple<tag<I>...>;
using three_hundred = decltype(tags(std::make_index_sequence<300>{}));

static_assert(std::is_same_v<ctnn::detail::pack_at_t<0, int, char, double>, int>);
static_assert(std::is_same_v<ctnn::detail::pack_at_t<2, int, char, double>, double>);
static_assert(std::is_same_v<ctnn::detail::type_at_t<0, three_hundred>, tag<0>>);
static_assert(std::is_same_v<ctnn::detail::type_at_t<157, three_hundred>, tag<157>>);
static_assert(std::is_same_v<ctnn::detail::type_at_t<299, three_hundred>, tag<299>>);
template <class... T>
auto pack_of(std::tuple<T...>*) -> ctnn::detail::pack<T...>;
using pack300 = decltype(pack_of(static_cast<three_hundred*>(nullptr)));
template <std::size_t... I>
constexpr bool every_index(std::index_sequence<I...>) {
  for (bool same : {std::is_same_v<ctnn::detail::at_t<I, pack300>, tag<I>>...,
                    std::is_same_v<ctnn::detail::type_at_t<I, three_hundred>, tag<I>>...})
    if (!same) return false;
  return true;
}
static_assert(every_index(std::make_index_sequence<300>{}));
static_assert(std::is_same_v<ctnn::detail::pack_at_t<16, tag<0>, tag<1>, tag<2>, tag<3>, tag<4>, tag<5>, tag<6>, tag<7>, tag<8>,
                                                     tag<9>, tag<10>, tag<11>, tag<12>, tag<13>, tag<14>, tag<15>, tag<16>>,
                             tag<16>>);
static_assert(!ctnn::detail::any_of_v<>);
static_assert(!ctnn::detail::any_of_v<false, false>);
static_assert(ctnn::detail::any_of_v<false, true, false>);
static_assert(ctnn::detail::sum_of({}) == 0);
static_assert(ctnn::detail::sum_of({1, 2, 3, 400}) == 406);
}  // namespace

TEST_CASE("type_at: the I-th of 300 types, and the flat folds (static_asserts above)") {
  CHECK(ctnn::detail::type_at_t<42, three_hundred>::value == 42);
}

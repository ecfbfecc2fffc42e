// core/type_at.hpp: the I-th type of a pack or a tuple (the compiler's __type_pack_element or one
// overload set per pack) and the flat folds, over 300 types, as a 300-layer network uses them.
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
static_assert(!ctnn::detail::any_of_v<>);
static_assert(!ctnn::detail::any_of_v<false, false>);
static_assert(ctnn::detail::any_of_v<false, true, false>);
static_assert(ctnn::detail::sum_of({}) == 0);
static_assert(ctnn::detail::sum_of({1, 2, 3, 400}) == 406);
}  // namespace

TEST_CASE("type_at: the I-th of 300 types, and the flat folds (static_asserts above)") {
  CHECK(ctnn::detail::type_at_t<42, three_hundred>::value == 42);
}

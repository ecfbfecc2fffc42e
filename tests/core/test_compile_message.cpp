// core/compile_message.hpp: diag::message builds its text at compile time
// (strings, characters, signed and unsigned numbers, shape dims, capped at 479
// characters), diag::as_text turns it into the structural string a failed
// check names, and diag::require<true, ...> is true. The failing side of
// require (the message in the first error line) is tests/compile_fail/compile_message_require.cpp.
#include <ctnn/core/compile_message.hpp>

#include <doctest/doctest.h>

#include <array>
#include <climits>
#include <cstddef>
#include <string_view>

using ctnn::diag::message;

namespace {

constexpr std::string_view view(const message& m) { return {m.data(), m.size()}; }

template <class V>
constexpr message of(V v) {
  message m;
  m << v;
  return m;
}

constexpr message place() {
  message m;
  m << "layer " << 2 << " (dense<" << 128u << ">): input has rank " << 3ul << " (";
  m.dims(std::array<std::size_t, 3>{26, 26, 8});
  return m << ')';
}
constexpr message scalar_dims() {
  message m;
  return m.dims(std::array<std::size_t, 0>{});
}
constexpr message too_long() {
  message m;
  for (int i = 0; i < 100; ++i) m << "0123456789";
  return m << 'x';
}

}  // namespace

// Text, characters and numbers of every overload, in order.
static_assert(view(place()) == "layer 2 (dense<128>): input has rank 3 (26x26x8)");
static_assert(view(scalar_dims()) == "scalar");
static_assert(view(of(0)) == "0" && view(of(-7)) == "-7" && view(of(42l)) == "42");
static_assert(view(of(LLONG_MIN)) == "-9223372036854775808" && view(of(LLONG_MAX)) == "9223372036854775807");
static_assert(view(of(ULLONG_MAX)) == "18446744073709551615" && view(of(UINT_MAX)) == "4294967295");
static_assert(view(of('c')) == "c" && view(of("")).empty());
// The buffer holds at most 479 characters (one stays the terminating zero); the rest is dropped.
static_assert(too_long().size() == 479 && too_long().data()[478] == '8' && too_long().data()[479] == '\0');

// as_text: exactly the message's characters and a terminating zero, in a text<n + 1>.
constexpr auto placed = ctnn::diag::as_text<&place>();
static_assert(sizeof(placed.s) == view(place()).size() + 1);
static_assert(std::string_view(placed.s) == view(place()));
static_assert(sizeof(ctnn::diag::as_text<&scalar_dims>().s) == 7);

// A check that holds is true and names no error type.
static_assert(ctnn::diag::require<true, &place>());
static_assert(ctnn::diag::require<(1 + 1 == 2), &too_long>());

TEST_CASE("diag::message builds the same text at run time as at compile time") {
  message m = place();
  CHECK(view(m) == "layer 2 (dense<128>): input has rank 3 (26x26x8)");
  m << ", " << -12345ll;
  CHECK(view(m) == "layer 2 (dense<128>): input has rank 3 (26x26x8), -12345");
  CHECK(too_long().size() == 479);
}

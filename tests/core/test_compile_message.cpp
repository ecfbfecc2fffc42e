// core/compile_message.hpp: diag::message builds its text at compile time
// (strings, characters, signed and unsigned numbers, shape dims, capped at 479
// characters), diag::as_text turns it into the structural string a failed
// check names (diag::part_of: the parts of at most 36 characters clang is shown),
// and diag::require<true, ...> is true; decimal, type<T> and chars add a number, a
// type name and a string view. The failing side of
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

// decimal: at most 3 decimals, trailing zeros dropped; type<T>: the compiler's spelling of T;
// chars: a string view's characters.
namespace probe_ns {
template <int N>
struct probe {};
}  // namespace probe_ns
struct plain_type {};
constexpr message decimals() {
  message m;
  m.decimal(1.0) << ' ';
  m.decimal(1.2) << ' ';
  m.decimal(0.125) << ' ';
  m.decimal(-0.05) << ' ';
  return m.decimal(2.0f);
}
static_assert(view(decimals()) == "1 1.2 0.125 -0.05 2");
constexpr message types() {
  message m;
  m.type<plain_type>() << " / ";
  m.type<probe_ns::probe<3>>() << " / ";
  return m.chars(std::string_view("kernel"));
}
static_assert(view(types()) == "plain_type / probe_ns::probe<3> / kernel");

// The parts clang is shown (error_parts): each at most 36 characters, together the message,
// each but the last ending in a space where one is within its last 20 characters.
constexpr message long_text() {
  message m;
  m << "layer 2 (separable_conv2d<3, 3>): input has rank 1 (32); separable_conv2d takes rank 3 "
       "(height x width x channels) or 2 (height x width); averylongwordwithoutanyspaceinitatallwhatsoever.";
  return m;
}
constexpr bool parts_cover(const message& m) {
  const std::size_t n = ctnn::diag::part_count(m);
  std::size_t at = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto p = ctnn::diag::part_of(m, i);
    if (p.begin != at || p.end <= p.begin || p.end - p.begin > 36) return false;
    at = p.end;
  }
  return at == m.size() && ctnn::diag::part_of(m, n).begin == ctnn::diag::part_of(m, n).end;
}
static_assert(parts_cover(long_text()));
static_assert(parts_cover(place()));
static_assert(parts_cover(too_long()));  // no space: parts of 36
static_assert(ctnn::diag::part_count(too_long()) == 14);
static_assert(ctnn::diag::part_of(long_text(), 0).end == 34);  // "layer 2 (separable_conv2d<3, 3>): "
static_assert(ctnn::diag::part_of(message{}, 0).begin == ctnn::diag::part_of(message{}, 0).end);
// as_part's text ends in its terminator (clang prints a part as a string only then)
static_assert(sizeof(ctnn::diag::as_part<&place, 0>().s) == ctnn::diag::part_of(place(), 0).end + 1);

TEST_CASE("diag::message: decimals and type names at run time as at compile time") {
  CHECK(view(decimals()) == "1 1.2 0.125 -0.05 2");
  CHECK(view(types()) == "plain_type / probe_ns::probe<3> / kernel");
}

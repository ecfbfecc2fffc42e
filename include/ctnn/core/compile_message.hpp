// ctnn/core/compile_message.hpp — compile errors whose first line is the message.
//
// C++20 has no static_assert with a computed message, so a failed check names
// an incomplete class template whose argument is the message as a structural
// string: diag::error<diag::text<N>{"layer 2 (dense<128>): ..."}>. g++ and
// clang print that argument in the first `error:` line, for example (g++ 12):
//   error: invalid application of 'sizeof' to incomplete type
//     'ctnn::diag::error<ctnn::diag::text<78>{"layer 2 (dense<128>): input has
//      rank 3 (26x26x8); put ctnn::flatten before it"}>'
// and clang 19 the same text in parts of at most 36 characters (error_parts below).
// Usage: diag::require<Ok, &make>() is true when Ok, and otherwise fails with
// the text make() returns (a constexpr function building a diag::message).
// message is a fixed buffer (no std::string: clang cannot run libstdc++ 12's
// std::string at compile time), so a message is at most 480 characters.
#pragma once
#include <cstddef>

namespace ctnn::diag {

template <std::size_t N>
struct text {
  char s[N];
};

// Never defined: naming its size is the error, and its argument the message.
template <text M>
struct error;

struct message {
  char s[480]{};
  std::size_t n = 0;

  constexpr std::size_t size() const { return n; }
  constexpr const char* data() const { return s; }

  constexpr message& operator<<(const char* t) {
    while (*t && n + 1 < sizeof s) s[n++] = *t++;
    return *this;
  }
  constexpr message& operator<<(char c) {
    if (n + 1 < sizeof s) s[n++] = c;
    return *this;
  }
  constexpr message& operator<<(unsigned long long v) {
    char d[24]{};
    int k = 0;
    do {
      d[k++] = char('0' + v % 10);
      v /= 10;
    } while (v);
    while (k) *this << d[--k];
    return *this;
  }
  constexpr message& operator<<(unsigned long v) { return *this << static_cast<unsigned long long>(v); }
  constexpr message& operator<<(unsigned v) { return *this << static_cast<unsigned long long>(v); }
  constexpr message& operator<<(long long v) {
    if (v < 0) {
      *this << '-';
      return *this << static_cast<unsigned long long>(-(v + 1)) + 1;
    }
    return *this << static_cast<unsigned long long>(v);
  }
  constexpr message& operator<<(long v) { return *this << static_cast<long long>(v); }
  constexpr message& operator<<(int v) { return *this << static_cast<long long>(v); }
  // v with at most 3 decimals, trailing zeros dropped: "1", "1.2", "-0.125".
  constexpr message& decimal(double v) {
    if (v < 0) {
      *this << '-';
      v = -v;
    }
    const auto thousandths = static_cast<unsigned long long>(v * 1000 + 0.5);
    *this << thousandths / 1000;
    unsigned long long f = thousandths % 1000;
    if (f) {
      *this << '.';
      for (unsigned long long d = 100; f; d /= 10) {
        *this << char('0' + f / d);
        f %= d;
      }
    }
    return *this;
  }
  // T as the compiler spells it ("not_a_layer", "ctnn::dense<3>"), read from
  // __PRETTY_FUNCTION__ ("... [with T = X]" under g++, "... [T = X]" under clang).
  template <class T>
  constexpr message& type() {
    const char* p = pretty<T>();
    while (*p && !(p[0] == 'T' && p[1] == ' ' && p[2] == '=' && p[3] == ' ')) ++p;
    if (!*p) return *this << "a type";
    p += 4;
    for (int depth = 0; *p && !(depth == 0 && (*p == ']' || *p == ';')); ++p) {
      depth += *p == '[' ? 1 : *p == ']' ? -1 : 0;
      *this << *p;
    }
    return *this;
  }
  template <class T>
  static constexpr const char* pretty() {
    return __PRETTY_FUNCTION__;
  }
  // The characters of a string view or a like range of char (its size() and [i]).
  template <class Chars>
  constexpr message& chars(const Chars& c) {
    for (std::size_t i = 0; i < c.size(); ++i) *this << c[i];
    return *this;
  }
  // The dims of a shape, "26x26x8" ("scalar" for rank 0).
  template <class Dims>
  constexpr message& dims(const Dims& d) {
    if (d.size() == 0) return *this << "scalar";
    for (std::size_t i = 0; i < d.size(); ++i) {
      if (i) *this << 'x';
      *this << static_cast<unsigned long long>(d[i]);
    }
    return *this;
  }
};

template <auto Make>
constexpr auto as_text() {
  constexpr message m = Make();
  text<m.n + 1> t{};
  for (std::size_t i = 0; i < m.n; ++i) t.s[i] = m.s[i];
  t.s[m.n] = 0;  // as in as_part below
  return t;
}

// clang prints a string template argument whole only up to 36 characters (longer
// ones as their first 34 and "[...]"), so under clang the message is named as
// parts of at most 36 characters, each broken after a space where one is in its
// last 20, in the order of the text: clang 19's first line then reads
//   'ctnn::diag::error_parts<text<32>{"layer 1 (dense<10>): input has "},
//    text<35>{"rank 2 (28x28); put ctnn::flatten "}, text<10>{"before it"}>'
// (tests/compile_fail/check.cmake joins the parts before it compares).
template <text... Parts>
struct error_parts;

struct part_span {
  std::size_t begin = 0, end = 0;
};
// The I-th part of m (an empty span past the last one).
constexpr part_span part_of(const message& m, std::size_t i) {
  constexpr std::size_t most = 36, least = 16;
  std::size_t b = 0;
  for (std::size_t k = 0; b < m.n; ++k) {
    std::size_t e = m.n - b > most ? b + most : m.n;
    if (e < m.n) {
      std::size_t s = e;
      while (s > b + least && m.s[s - 1] != ' ') --s;
      if (s > b + least) e = s;
    }
    if (k == i) return {b, e};
    b = e;
  }
  return {b, b};
}
constexpr std::size_t part_count(const message& m) {
  std::size_t k = 0;
  while (part_of(m, k).end != part_of(m, k).begin) ++k;
  return k;
}
template <auto Make, std::size_t I>
constexpr auto as_part() {
  constexpr message m = Make();
  constexpr part_span p = part_of(m, I);
  text<p.end - p.begin + 1> t{};
  for (std::size_t i = p.begin; i < p.end; ++i) t.s[i - p.begin] = m.s[i];
  // written, so that clang's value holds the terminator as an element (it grows an
  // array's elements by doubling, and prints one that ends in no 0 as numbers)
  t.s[p.end - p.begin] = 0;
  return t;
}
template <class T, T... I>
struct part_indices {};
template <auto Make, std::size_t... I>
constexpr bool parts_fail(part_indices<std::size_t, I...>) {
  return sizeof(error_parts<as_part<Make, I>()...>) != 0;
}

template <auto Make>
struct fails_with {
#if defined(__clang__)
  static constexpr bool value = parts_fail<Make>(__make_integer_seq<part_indices, std::size_t, part_count(Make())>{});
#else
  static constexpr bool value = sizeof(error<as_text<Make>()>) != 0;
#endif
};

// true when Ok; otherwise a compile error whose first line holds Make()'s text.
// Where the compiler takes a computed static_assert message (C++26's P2741:
// clang 17+ and g++ 14+ with -std=c++26), the error is
// "static assertion failed: <text>" instead. clang in C++20 names the message
// in parts (error_parts above), each printed whole; the sentence of the second
// error (diagnostics.hpp) follows.
#if defined(__cpp_static_assert) && __cpp_static_assert >= 202306L
#define CTNN_COMPUTED_STATIC_ASSERT 1
#else
#define CTNN_COMPUTED_STATIC_ASSERT 0
#endif

template <bool Ok, auto Make>
constexpr bool require() {
  if constexpr (Ok) {
    return true;
  } else {
#if CTNN_COMPUTED_STATIC_ASSERT
    static_assert(Ok, Make());
    return false;
#else
    return fails_with<Make>::value;
#endif
  }
}

}  // namespace ctnn::diag

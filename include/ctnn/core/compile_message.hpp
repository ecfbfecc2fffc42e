// ctnn/core/compile_message.hpp — compile errors whose first line is the message.
//
// C++20 has no static_assert with a computed message, so a failed check names
// an incomplete class template whose argument is the message as a structural
// string: diag::error<diag::text<N>{"layer 2 (dense<128>): ..."}>. g++ and
// clang print that argument in the first `error:` line, for example (g++ 12):
//   error: invalid application of 'sizeof' to incomplete type
//     'ctnn::diag::error<ctnn::diag::text<78>{"layer 2 (dense<128>): input has
//      rank 3 (26x26x8); put ctnn::flatten before it"}>'
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
  return t;
}

template <auto Make>
struct fails_with {
  static constexpr bool value = sizeof(error<as_text<Make>()>) != 0;
};

// true when Ok; otherwise a compile error whose first line holds Make()'s text.
// Where the compiler takes a computed static_assert message (C++26's P2741:
// clang 17+ and g++ 14+ with -std=c++26), the error is
// "static assertion failed: <text>" instead. clang in C++20 prints about the
// first 34 characters of a string template argument followed by "[...]", which
// is the place ("layer 2 (dense<128>): input has ra[...]"); the sentence of
// the second error (diagnostics.hpp) says the rest.
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

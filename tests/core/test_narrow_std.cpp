// core/narrow_std.hpp included first and alone: std::function (holding a lambda,
// empty, assigned nullptr) and steady_clock, durations and duration_cast work as
// with <functional> and <chrono>. Under libstdc++ the header takes its internal
// headers, which are not self-contained (bits/std_function.h needs <new>: clang
// rejects the placement new without it); this file is the TU that checks it.
#include <ctnn/core/narrow_std.hpp>

#include <doctest/doctest.h>

TEST_CASE("narrow_std: std::function holds, calls and drops a callable") {
  int calls = 0;
  std::function<int(int)> f = [&calls](int x) {
    ++calls;
    return 2 * x;
  };
  REQUIRE(static_cast<bool>(f));
  CHECK(f(21) == 42);
  CHECK(calls == 1);
  f = nullptr;
  CHECK_FALSE(static_cast<bool>(f));
}

TEST_CASE("narrow_std: steady_clock, durations and duration_cast") {
  using clock = std::chrono::steady_clock;
  const clock::time_point t0 = clock::now();
  const clock::time_point t1 = clock::now();
  CHECK(t1 >= t0);
  CHECK(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::microseconds(3)).count() == 3000);
  CHECK(std::chrono::duration<double>(std::chrono::milliseconds(1500)).count() == doctest::Approx(1.5));
}

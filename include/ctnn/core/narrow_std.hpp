// ctnn/core/narrow_std.hpp — std::function and std::chrono's clocks, durations
// and duration_cast, without the rest of <functional> (its searchers parse
// <unordered_map>) and of C++20's <chrono> (calendar, time zones): 8.6-12.8 MB
// less peak memory for the examples compiled with libstdc++ (docs/performance.md,
// "Compile time and memory"). libstdc++ declares both in these internal headers
// (its own <thread> and <future> include them); any other library gets the
// standard headers. Code that needs more of either includes the standard one.
#pragma once
#include <cstddef>  // defines __GLIBCXX__ under libstdc++
#include <new>      // placement new, which bits/std_function.h uses without including

#if defined(__GLIBCXX__) && __has_include(<bits/std_function.h>) && __has_include(<bits/chrono.h>)
#include <bits/chrono.h>
#include <bits/std_function.h>
#else
#include <chrono>
#include <functional>
#endif

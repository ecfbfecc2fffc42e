// ctnn/core/separate.hpp — where the library's network-independent functions are compiled.
//
// Header-only (the default), a function marked CTNN_DECL is `inline` and its
// body is in its header (CTNN_DEFINITIONS is 1). With CTNN_COMPILED_KERNELS
// (ctnn_compiled_kernels(target), backends/cpu/compiled_kernels.hpp) the
// headers only declare it (CTNN_DEFINITIONS is 0), and the compiled object,
// whose translation unit defines CTNN_COMPILED_KERNELS_DEFINE and includes
// <ctnn/ctnn.hpp>, holds its one definition: a program's own translation units
// no longer generate code for reading IDX and gzip files, writing files
// atomically, the summary, the epoch logs or the cold error paths.
// CTNN_INSTANCE(template ...;) does the same for an explicit instance of a
// template (the Fashion-MNIST dataset type, data/fashion_mnist.hpp): extern in
// the program, defined in the compiled object, nothing header-only. Used by
// headers that <ctnn/ctnn.hpp> includes, which the compiled object includes.
// An extern instance of a function defined in its class is inline, and g++ still
// instantiates an inline function's body in every program that calls it (to consider
// inlining it) and runs its early optimizations, even where it is cold and never inlined:
// such a body is written between `#if CTNN_DEFINITIONS` and `#else ; #endif` (only
// declared with CTNN_COMPILED_KERNELS), as epoch_logger's and csv_logger's cold lines
// (train/callbacks.hpp, train/csv_logger.hpp; docs/performance.md, "Compile time and memory").
// CTNN_OUTLINE marks a function of such an instance that runs once per batch or less and
// that callers would otherwise inline (a member defined in its class, a small template):
// with CTNN_COMPILED_KERNELS it is [[gnu::noinline]], so a program calls the compiled
// object's copy instead of generating its code again; header-only it is nothing (inlined
// as before).
// CTNN_LAZY, written before a CTNN_DECL function (and before its attributes), makes it,
// header-only, a function template of nothing (`template <int = 0>`, called as before):
// g++ instantiates, at the end of every translation unit, the templates that a plain inline
// function's body uses (the std containers, parsers and lambdas of reading files, the epoch
// loop), even where the program never calls it, and a precompiled header keeps none of
// those instances; as a template of nothing it costs only the programs that call it. With
// CTNN_COMPILED_KERNELS(_DEFINE) it is nothing (the compiled object holds the plain
// function). A CTNN_LAZY function is called, not named without a call (header-only, its
// address is `&f<>`); a plain inline function that calls one makes it eager again, so its
// callers are templates or CTNN_LAZY too (docs/performance.md, "Compile time and memory").
// A member function of a plain class is made lazy the same way: CTNN_LAZY on its declaration
// in the class, CTNN_LAZY_DEFINITION (header-only `template <int>`, else nothing) before its
// CTNN_DECL definition (logs' and history's members, train/history.hpp). A destructor cannot be
// a template: history's stays an inline function header-only.
#pragma once

#if defined(CTNN_COMPILED_KERNELS_DEFINE)
#define CTNN_DECL
#define CTNN_LAZY
#define CTNN_LAZY_DEFINITION
#define CTNN_DEFINITIONS 1
#define CTNN_INSTANCE(...) __VA_ARGS__
#define CTNN_OUTLINE [[gnu::noinline]]
#elif defined(CTNN_COMPILED_KERNELS)
#define CTNN_DECL
#define CTNN_LAZY
#define CTNN_LAZY_DEFINITION
#define CTNN_DEFINITIONS 0
#define CTNN_INSTANCE(...) extern __VA_ARGS__
#define CTNN_OUTLINE [[gnu::noinline]]
#else
#define CTNN_DECL inline
#define CTNN_LAZY template <int = 0>
#define CTNN_LAZY_DEFINITION template <int>
#define CTNN_DEFINITIONS 1
#define CTNN_INSTANCE(...)
#define CTNN_OUTLINE
#endif

#include <cstddef>
#include <type_traits>

namespace ctnn::detail {
// f(std::integral_constant<std::size_t, n>{}) for the channel counts layers commonly have (16 to 256,
// powers of two), else f(n): a compiled-part body over a run-time size (batch normalization, the
// Winograd transforms) keeps the compile-time loops of those counts, and the program's code is one call.
template <class F>
decltype(auto) with_common_count(std::size_t n, F&& f) {
  switch (n) {
    case 16: return f(std::integral_constant<std::size_t, 16>{});
    case 32: return f(std::integral_constant<std::size_t, 32>{});
    case 64: return f(std::integral_constant<std::size_t, 64>{});
    case 128: return f(std::integral_constant<std::size_t, 128>{});
    case 256: return f(std::integral_constant<std::size_t, 256>{});
    default: return f(n);
  }
}

// Whether this translation unit uses the compiled part (CTNN_COMPILED_KERNELS) or defines it
// (CTNN_COMPILED_KERNELS_DEFINE): a kernel entry then calls the compiled part's one body for a
// shape class instead of instantiating its per-shape body (backends/cpu/gemm.hpp).
inline constexpr bool compiled_part =
#if defined(CTNN_COMPILED_KERNELS) || defined(CTNN_COMPILED_KERNELS_DEFINE)
    true;
#else
    false;
#endif
}  // namespace ctnn::detail

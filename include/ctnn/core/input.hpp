// ctnn/core/input.hpp — input<D...>: the shape of one sample.
//
// Always the first element of sequential<...>; it has no parameters and is
// not counted as a layer (positions in error messages start after it).
#pragma once
#include <cstddef>

#include "shape.hpp"

namespace ctnn {

template <std::size_t... D>
struct input {
  static_assert(sizeof...(D) > 0 && ((D > 0) && ...), "input: every dimension of the sample shape must be > 0");
  using shape_type = shape<D...>;
};

template <class T>
inline constexpr bool is_input_v = false;
template <std::size_t... D>
inline constexpr bool is_input_v<input<D...>> = true;

}  // namespace ctnn

// ctnn/core/shape.hpp — compile-time tensor shapes.
//
// shape<D...> is the shape of ONE sample (the batch dimension is never part of
// it). rank, size (product of the dims) and dims are constants; two shapes
// compare equal when their dims are equal, so `static_assert(net::output_shape
// == ctnn::shape<10>{})` reads as it should. A rank-0 shape has size 1.
#pragma once
#include <array>
#include <cstddef>
#include <string>

namespace ctnn {

template <std::size_t... D>
struct shape {
  static constexpr std::size_t rank = sizeof...(D);
  static constexpr std::size_t size = (std::size_t{1} * ... * D);
  static constexpr std::array<std::size_t, sizeof...(D)> dims{D...};

  template <std::size_t... E>
  constexpr bool operator==(shape<E...>) const {
    if constexpr (sizeof...(D) != sizeof...(E)) {
      return false;
    } else {
      return ((D == E) && ...);
    }
  }

  // "28x28", "10", "" for rank 0 (cold: for messages and summaries)
  [[gnu::cold]] static std::string str() {
    std::string s;
    for (std::size_t i = 0; i < rank; ++i) {
      if (i) s += 'x';
      s += std::to_string(dims[i]);
    }
    return s;
  }
};

template <class T>
inline constexpr bool is_shape_v = false;
template <std::size_t... D>
inline constexpr bool is_shape_v<shape<D...>> = true;

template <class T>
concept Shape = is_shape_v<T>;

// Last dimension of a shape (1 for rank 0).
template <Shape S>
inline constexpr std::size_t last_dim_v = S::rank == 0 ? 1 : S::dims[S::rank == 0 ? 0 : S::rank - 1];

}  // namespace ctnn

// ctnn/layers/reshape.hpp — flatten and reshape<D...>.
//
// flatten: output shape<In::size>. reshape<D...>: output shape<D...>, whose
// element count must equal the input's (checked at compile time, the message
// names the layer's position and both counts). Neither has parameters; both
// copy the batch unchanged (layout is row-major, so only the shape changes).
#pragma once
#include <algorithm>
#include <cstddef>
#include <string>

#include "../core/backend.hpp"
#include "../core/concepts.hpp"
#include "../core/diagnostics.hpp"
#include "../core/shape.hpp"

namespace ctnn {

namespace detail {
template <Shape In, class Out, class T, class Backend>
struct reshape_layer {
  static_assert(std::is_same_v<Backend, cpu>, "reshape: this backend has no specialization of this layer");
  using value_type = T;
  using in_shape = In;
  using out_shape = Out;
  static constexpr std::size_t parameter_count = 0;
  static constexpr std::size_t state_count = 0;
  static constexpr std::size_t cache_per_sample = 0;

  static void init(layer_slot<T>, rng&) {}
  static void forward(layer_slot<T>, const T* x, T* y, run_info r) { std::copy(x, x + r.batch * In::size, y); }
  static void backward(layer_slot<T>, const T*, const T*, T* dy, T* dx, run_info r) {
    if (dx) std::copy(dy, dy + r.batch * In::size, dx);
  }
};
}  // namespace detail

struct flatten {
  using is_layer_spec = void;
  static std::string spec() { return "flatten"; }
  template <Shape In, class T, class Backend>
  struct bind : detail::reshape_layer<In, shape<In::size>, T, Backend> {
    static std::string name() { return "flatten"; }
  };
};

template <std::size_t... D>
struct reshape {
  using is_layer_spec = void;
  using target = shape<D...>;
  static std::string spec() { return "reshape<" + target::str() + ">"; }
  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    return diag::reshape_element_count_mismatch<diag::layer<Pos>, diag::input_elements<In::size>,
                                                diag::target_elements<target::size>,
                                                In::size == target::size>::value;
  }
  template <Shape In, class T, class Backend>
  struct bind : detail::reshape_layer<In, target, T, Backend> {
    static std::string name() { return spec(); }
  };
};

}  // namespace ctnn

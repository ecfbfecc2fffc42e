// ctnn/layers/reshape.hpp — flatten and reshape<D...>.
//
// flatten: output shape<In::size>. reshape<D...>: output shape<D...>, whose
// element count must equal the input's (checked at compile time, the message
// names the layer's position and both counts). Neither has parameters; the layout
// is row-major, so only the shape changes: in a model the output is the input's
// memory (`aliases_input`, nothing copied); inside a composite layer (residual,
// time_distributed, ...) forward and backward copy the batch unchanged.
#pragma once
#include <algorithm>
#include <cstddef>
#include <string>

#include "../core/backend.hpp"
#include "../core/concepts.hpp"
#include "../core/diagnostics.hpp"
#include "../core/plan.hpp"
#include "../core/precision.hpp"
#include "../core/shape.hpp"
#include "../core/backend.hpp"

namespace ctnn {

namespace layer_kind {
struct reshape {};  // the kind tag of reshape_layer (its member `kind`)
}  // namespace layer_kind

template <class Spec, Shape In, class P, class Backend>
struct reshape_layer {
  using kind = layer_kind::reshape;  // what it is, for tools that map layers (onnx/export.hpp, onnx/import.hpp)
  using spec = Spec;
  using T = typename P::compute_type;
  using variable_type = typename P::variable_type;
  using compute_type = T;
  using in_shape = In;
  using out_shape = typename Spec::template output<In>;
  static constexpr bool keeps_channels = Spec::keeps_channels;  // strip_pruning reads it
  static constexpr auto buffers = no_buffers;
  // a model passes the input's memory on as the output (core/plan.hpp)
  static constexpr bool aliases_input = true;
  static constexpr std::size_t parameter_count = 0;
  static constexpr std::size_t state_count = 0;
  static constexpr std::size_t cache_per_sample = 0;
  static constexpr std::string name() { return Spec::name(); }

  static void init(layer_slot<T>, rng&) {}
  static void forward(layer_slot<T>, const T* x, T* y, run_info r) { ops<Backend>::copy(x, y, r.batch * In::size); }
  static void backward(layer_slot<T>, const T*, const T*, T* dy, T* dx, run_info r) {
    if (dx) ops<Backend>::copy(dy, dx, r.batch * In::size);
  }
};

struct flatten {
  using is_layer_spec = void;
  // channels-last order kept: channel c of position p is element p * C + c
  static constexpr bool keeps_channels = true;
  static constexpr std::string name() { return "flatten"; }
  template <Shape In>
  using output = shape<In::size>;
  template <Shape In, class P, class Backend>
  using bind = reshape_layer<flatten, In, precision::policy_of_t<P>, Backend>;
};

template <std::size_t... D>
struct reshape {
  using is_layer_spec = void;
  static constexpr bool keeps_channels = false;
  using target = shape<D...>;
  template <Shape In>
  using output = target;
  static constexpr std::string name() { return "reshape<" + target::str() + ">"; }
  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    constexpr bool located = diag::require<In::size == target::size, &diag::reshape_count_text<Pos, target, In>>();
    return located && diag::reshape_element_count_mismatch<diag::layer<Pos>, diag::input_elements<In::size>,
                                                diag::target_elements<target::size>,
                                                In::size == target::size>::value;
  }
  template <Shape In, class P, class Backend>
  using bind = reshape_layer<reshape, In, precision::policy_of_t<P>, Backend>;
};

}  // namespace ctnn

// ctnn/layers/residual.hpp — residual<Block...>: y = f(x) + x, with a projection when f changes the shape.
//
// f is the sequence Block... (as branch<Block...>). When f keeps the shape, y = f(x) + x
// (dlib's add_prev over a tag; keras.layers.Add()([f(x), x])). When it does not, x goes
// through a projection chosen from the shapes: dense<N> (bias, no activation) when both are
// flat; conv2d<C', 1, 1, S> (a 1x1 convolution with stride S = ceil(H / H') when both are images
// (rank 2 or 3) and that stride gives f's height and width; otherwise a compile error naming
// the position and both shapes. residual_with<Projection, Block...> names the projection
// (any spec, e.g. branch<conv2d<64, 1, 1, 2>, batch_normalization<>>); its output must be f's.
// Bound as add<branch<Block...>, Projection-or-branch<>> (layers/add.hpp): variables "0.J.name"
// for the block's layer J, "1.name" for the projection's. Output: f's shape. docs/graphs.md.
#pragma once
#include <cstddef>
#include <string>
#include <tuple>
#include <type_traits>

#include "add.hpp"
#include "branch.hpp"
#include "conv2d.hpp"
#include "dense.hpp"
#include "graph_nodes.hpp"

namespace ctnn {

namespace detail {
struct no_projection {};
// The projection residual<...> uses from In to Out: branch<> (same shape), dense, a 1x1 conv2d, or none.
template <Shape In, Shape Out>
constexpr auto pick_projection() {
  if constexpr (In{} == Out{}) {
    return std::type_identity<branch<>>{};
  } else if constexpr (In::rank == 1 && Out::rank == 1) {
    return std::type_identity<dense<static_cast<long long>(Out::dims[0])>>{};
  } else if constexpr ((In::rank == 2 || In::rank == 3) && Out::rank == 3) {
    constexpr std::size_t H = In::dims[0], W = In::dims[1], OH = Out::dims[0], OW = Out::dims[1];
    constexpr std::size_t S = OH > 0 && H >= OH ? (H + OH - 1) / OH : 0;  // ceil(H / OH)
    if constexpr (S > 0 && (H - 1) / S + 1 == OH && (W - 1) / S + 1 == OW)
      return std::type_identity<conv2d<Out::dims[2], 1, 1, S>>{};
    else
      return std::type_identity<no_projection>{};
  } else {
    return std::type_identity<no_projection>{};
  }
}
template <Shape In, Shape Out>
using projection_t = typename decltype(pick_projection<In, Out>())::type;
}  // namespace detail

template <class... Block>
struct residual {
  static_assert(sizeof...(Block) >= 1, "residual: give the block's layers");
  using is_layer_spec = void;
  template <Shape In>
  using branches =
      std::tuple<branch<Block...>, detail::projection_t<In, detail::out_shape_of<branch<Block...>, In>>>;
  static std::string name() { return detail::join_names<Block...>("residual<"); }
  static constexpr std::string summary_name() { return "residual"; }
  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    if constexpr (!branch<Block...>::template check<In, Pos>()) {
      return false;
    } else {
      using Out = detail::out_shape_of<branch<Block...>, In>;
      constexpr bool ok = !std::is_same_v<detail::projection_t<In, Out>, detail::no_projection>;
      constexpr bool located = diag::require<ok, &diag::residual_projection_text<Pos, In, Out>>();
      return located && diag::residual_needs_projection<diag::layer<Pos>, ok>::value;
    }
  }
  template <Shape In, class P, class Backend>
  using bind = sum_layer<residual, In, precision::policy_of_t<P>, Backend>;
};

template <class Projection, class... Block>
struct residual_with {
  static_assert(sizeof...(Block) >= 1, "residual_with: give the block's layers after the projection");
  using is_layer_spec = void;
  template <Shape In>
  using branches = std::tuple<branch<Block...>, Projection>;
  static std::string name() { return detail::join_names<Block...>("residual_with<" + Projection::name() + ", "); }
  static constexpr std::string summary_name() { return "residual_with"; }
  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    if constexpr (!branch<Block...>::template check<In, Pos>() || !detail::check_spec_v<Projection> ||
                  !detail::check_layer<Projection, In, Pos>()) {
      return false;
    } else {
      using Out = detail::out_shape_of<branch<Block...>, In>;
      using Proj = detail::out_shape_of<Projection, In>;
      constexpr bool ok = Out{} == Proj{};
      constexpr bool located = diag::require<ok, &diag::residual_with_text<Pos, Out, Proj>>();
      return located && diag::residual_projection_mismatch<diag::layer<Pos>, ok>::value;
    }
  }
  template <Shape In, class P, class Backend>
  using bind = sum_layer<residual_with, In, precision::policy_of_t<P>, Backend>;
};

}  // namespace ctnn

// ctnn/onnx/common.hpp — what ONNX export and import share (namespace
// ctnn::onnx_detail, not a public API): a bound layer's kind (its member `kind`,
// a tag declared beside each layer), an activation's ONNX operator (its member
// onnx_op) and alpha, and the pads of a window. Includes ONNX's generated
// classes (<onnx/onnx_pb.h>: link ctnn::onnx) and the layers that map to ONNX.
// Docs: docs/interop.md ("ONNX").
#pragma once
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "../core/errors.hpp"
#include "../core/plan.hpp"
#include "../core/shape.hpp"
#include "../io/atomic_file.hpp"
#include "../io/read_file.hpp"
#include "../layers/activation.hpp"
#include "../layers/average_pool2d.hpp"
#include "../layers/batch_norm.hpp"
#include "../layers/conv2d.hpp"
#include "../layers/dense.hpp"
#include "../layers/dropout.hpp"
#include "../layers/global_average_pool.hpp"
#include "../layers/graph_nodes.hpp"
#include "../layers/max_pool2d.hpp"
#include "../layers/padding.hpp"
#include "../layers/quantized_conv2d.hpp"
#include "../layers/quantized_dense.hpp"
#include "../layers/reshape.hpp"
#include "../quantization/arithmetic.hpp"
#include "../train/model.hpp"

namespace ctnn::onnx_detail {

// What a bound layer is: its member `kind`, a tag declared beside the layer
// (layers/dense.hpp: layer_kind::dense); void for a layer that declares none.
template <class L>
struct kind_of {
  using type = void;
};
template <class L>
  requires requires { typename L::kind; }
struct kind_of<L> {
  using type = typename L::kind;
};
template <class L, class Kind>
inline constexpr bool is_a = std::is_same_v<typename kind_of<L>::type, Kind>;

// A graph layer whose children are branches over one input (add, concatenate, residual).
template <class L>
inline constexpr bool is_parallel = false;
template <class L>
  requires(is_a<L, layer_kind::graph>)
inline constexpr bool is_parallel<L> = L::parallel;

// Layers whose ONNX operators see channels-first data (Transposes around them), graph layers holding one.
template <class L>
consteval bool spatial_layer();
template <class... C>
consteval bool any_spatial(std::tuple<C...>*) {
  return (false || ... || spatial_layer<C>());
}
template <class L>
consteval bool spatial_layer() {
  if constexpr (is_a<L, layer_kind::graph>) return any_spatial(static_cast<typename L::children*>(nullptr));
  else
    return is_a<L, layer_kind::conv2d> || is_a<L, layer_kind::quantized_conv2d> || is_a<L, layer_kind::pool2d> ||
           is_a<L, layer_kind::global_average_pool>;
}
template <class L>
inline constexpr bool is_spatial = spatial_layer<L>();

// The ONNX operator of an activation, its member onnx_op ("" for identity, nullptr
// for an activation that declares none), and its alpha (leaky_relu).
template <class A>
consteval const char* act_op() {
  if constexpr (requires { A::onnx_op; }) return A::onnx_op;
  else return nullptr;
}
template <class A>
inline constexpr double act_alpha = 0.0;
template <class A>
  requires requires { A::alpha; }
inline constexpr double act_alpha<A> = double(A::alpha);

inline std::vector<std::int64_t> spatial_pads(const kernels::conv_geometry& g) {
  auto after = [](std::size_t in, std::size_t out, std::size_t k, std::size_t s, std::size_t before) {
    const std::int64_t need = std::int64_t((out - 1) * s + k) - std::int64_t(in) - std::int64_t(before);
    return std::max<std::int64_t>(need, 0);
  };
  return {std::int64_t(g.pt), std::int64_t(g.pl), after(g.h, g.oh, g.kh, g.stride, g.pt),
          after(g.w, g.ow, g.kw, g.stride, g.pl)};
}

}  // namespace ctnn::onnx_detail

// ctnn/pruning/layout.hpp — SparseLayout: what strip_pruning needs of a sparse storage layout.
//
// A layout is a tag type L with
//   template <long long K, long long N, long long NNZ, class Act>
//   using layer = <a layer spec>;
// a dense layer of K inputs and N units (activation Act) whose kernel keeps
// at most NNZ weights. Its bound layer (bound to shape<K>, float32, cpu<>)
// has the buffers "values" and "bias" (parameters) and exactly one metadata
// buffer (its index: typed fields declared with kernels::packed_index), and
//   template <class V>
//   static std::size_t pack(const V* kernel /* K x N row-major */,
//                           const std::uint8_t* keep /* K x N */, V* values,
//                           std::byte* meta);
// which stores the weights `keep` marks, zeroes the unused values, never
// writes past NNZ and returns how many weights `keep` marks. It should also
// declare check_metadata(name, bytes) (load_weights calls it on a file's
// index). Its products go through ops<B>::sparse_dense_forward / _backward
// with its index view (kernels/sparse_index.hpp). The shipped layouts:
// layout::bitmap, csc, rows, nm<Nk, M> and block<R, C> (layers/sparse_dense*.hpp, all
// included by ctnn/pruning.hpp). Details: docs/pruning.md, "The layout contract".
#pragma once
#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "../backends/cpu/backend.hpp"
#include "../core/concepts.hpp"
#include "../core/plan.hpp"
#include "../core/precision.hpp"
#include "../core/shape.hpp"
#include "../layers/activation.hpp"

namespace ctnn {

namespace pruning::detail {
template <class B>
constexpr bool has_layout_buffers() {
  std::size_t values = 0, bias = 0, meta = 0;
  for (const auto& b : B::buffers) {
    if (b.kind == role::parameter && std::string_view(b.name) == "values") ++values;
    if (b.kind == role::parameter && std::string_view(b.name) == "bias") ++bias;
    if (b.kind == role::metadata) ++meta;
  }
  return values == 1 && bias == 1 && meta == 1;
}
template <class L>
using layout_probe = typename L::template layer<16, 16, 16, identity>;
template <class L>
using layout_probe_bound = typename layout_probe<L>::template bind<shape<16>, precision::float32, cpu<>>;
}  // namespace pruning::detail

template <class L>
concept has_layout_layer = requires { typename pruning::detail::layout_probe<L>; } &&
                           LayerSpec<pruning::detail::layout_probe<L>>;
template <class L>
concept has_layout_pack = requires(const float* k, const std::uint8_t* keep, float* v, std::byte* meta) {
  { pruning::detail::layout_probe_bound<L>::template pack<float>(k, keep, v, meta) } -> std::same_as<std::size_t>;
};
template <class L>
concept has_layout_buffers = pruning::detail::has_layout_buffers<pruning::detail::layout_probe_bound<L>>();

// Satisfied by layout::bitmap, csc, rows, nm<Nk, M>, block<R, C> (R, C dividing 16) and any tag written to the
// contract above.
template <class L>
concept SparseLayout = has_layout_layer<L> && has_layout_pack<L> && has_layout_buffers<L>;

}  // namespace ctnn

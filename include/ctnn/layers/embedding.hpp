// ctnn/layers/embedding.hpp — embedding<Vocab, Dim, MaskZero = false>: keras.layers.Embedding (Keras 3).
//
// Input shape<Steps>: one integer id per step, carried as the network's input values (the
// compute type: float holds every integer up to 2^24 exactly); output shape<Steps, Dim>,
// y[t] = embeddings[id_t]. One variable, `embeddings` [Vocab, Dim], drawn from uniform(-0.05,
// 0.05) (Keras' "uniform" RandomUniform). An id that is not an integer in [0, Vocab) throws
// std::invalid_argument naming the layer, the id and its position (ops<B>::gather_rows; on CUDA
// a NaN row, since a queued pass cannot throw). Backward: d embeddings = 0, then
// d embeddings[id_t] += dy[t] (ops<B>::scatter_add_rows, repeated ids add up); the ids get no
// gradient. Under a 16-bit compute type the ids arrive rounded to it: the vocabulary must be at
// most 2049 (float16) or 257 (bfloat16) ids, else a compile error (keep_float32<embedding<...>>
// computes in float). MaskZero (Keras' mask_zero): id 0 is padding; the step mask ([batch, Steps], 0 where
// the id is 0) is published through run_info::mask as masking<> does (layers/masking.hpp), for
// the recurrent layers and the per-step loss. docs/sequences.md ("Embedding").
#pragma once
#include <array>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "../core/backend.hpp"
#include "../core/compile_message.hpp"
#include "../core/concepts.hpp"
#include "../core/half.hpp"
#include "../core/plan.hpp"
#include "../core/shape.hpp"
#include "../core/backend.hpp"
#include "../kernels/rows.hpp"
#include "initializers.hpp"
#include "masking.hpp"

namespace ctnn {

namespace layer_kind {
struct embedding {};
}  // namespace layer_kind

namespace detail {
template <std::size_t Pos, std::size_t V, std::size_t D, class In>
constexpr diag::message embedding_rank_text() {
  diag::message m;
  m << "layer " << Pos << " (embedding<" << V << ", " << D << ">): input has rank " << In::rank << " (";
  m.dims(In::dims) << "); embedding takes shape<steps> of integer ids";
  return m;
}
}  // namespace detail

template <class Spec, Shape In, class P, class Backend>
struct embedding_layer;

template <std::size_t Vocab, std::size_t Dim, bool MaskZero = false>
struct embedding {
  static_assert(Vocab > 0 && Dim > 0, "embedding: the vocabulary and the dimension must be > 0");
  using is_layer_spec = void;
  using kind = layer_kind::embedding;
  static constexpr std::size_t vocabulary = Vocab, dim = Dim;
  static constexpr bool mask_zero = MaskZero;
  static std::string name() {
    return "embedding<" + std::to_string(Vocab) + ", " + std::to_string(Dim) + (MaskZero ? ", mask_zero>" : ">");
  }
  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    return diag::require<In::rank == 1, &detail::embedding_rank_text<Pos, Vocab, Dim, In>>();
  }
  template <Shape In, class P, class Backend>
  using bind = embedding_layer<embedding, In, precision::policy_of_t<P>, Backend>;
};

template <class Spec, Shape In, class P, class Backend>
struct embedding_layer {
  using kind = layer_kind::embedding;
  using spec = Spec;
  using T = typename P::compute_type;
  using O = ops<Backend>;
  using variable_type = typename P::variable_type;
  using compute_type = T;
  static constexpr std::size_t V = Spec::vocabulary, D = Spec::dim, S = In::size;
  static_assert(!std::is_same_v<T, float> || V <= (std::size_t{1} << 24),
                "embedding: a float input holds ids exactly only up to 2^24");
  // Under a 16-bit compute type (mixed_float16, mixed_bfloat16, float16) the ids reach the layer
  // rounded to it: float16 holds every integer up to 2048 exactly, bfloat16 up to 256
  // (docs/mixed-precision.md); keep_float32<embedding<...>> takes larger vocabularies.
  static constexpr std::size_t largest_exact_id = std::is_same_v<T, float16_t>    ? 2048
                                                  : std::is_same_v<T, bfloat16_t> ? 256
                                                                                  : std::size_t(-1);
  static_assert(V - 1 <= largest_exact_id,
                "embedding: a 16-bit compute type holds ids exactly only up to 2048 (float16) or 256 (bfloat16): "
                "wrap the layer in keep_float32<embedding<...>> or use a smaller vocabulary");
  using in_shape = In;
  using out_shape = shape<S, D>;
  static constexpr std::array<buffer, 2> buffers{buffer::parameter("embeddings", {V, D}),
                                                 buffer::cache("mask", Spec::mask_zero ? S : 0)};
  static constexpr std::size_t parameter_count = count_of(buffers, role::parameter);
  static constexpr std::size_t state_count = 0;
  static constexpr std::size_t cache_per_sample = count_of(buffers, role::cache);
  static std::string name() { return Spec::name(); }
  static void init(layer_slot<T> s, rng& g) { detail::fill_uniform(s.params, V * D, 0.05, g); }

  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    const std::size_t n = r.batch * S;
    if (n == 0) return;
    try {
      O::template gather_rows<D>(x, s.params, y, n, V);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(name() + ": " + e.what() + " (position = sample * " + std::to_string(S) +
                                  " + step)");
    }
    if constexpr (Spec::mask_zero) {  // 1 where the id is not 0, as masking<0.0> with one feature
      O::fill_zero(s.cache, n);
      O::map_rows(detail::not_value_fn<0.0>{}, n, 1, kernels::rows<T>{s.cache, 1}, kernels::rows<const T>{x, 1});
      detail::publish_mask(r, static_cast<const T*>(s.cache), S, "embedding");
    }
  }
  static void backward(layer_slot<T> s, const T* x, const T*, T* dy, T* dx, run_info r) {
    const std::size_t n = r.batch * S;
    O::fill_zero(s.grads, V * D);
    O::template scatter_add_rows<D>(x, static_cast<const T*>(dy), s.grads, n, V);
    if (dx) O::fill_zero(dx, n);  // ids are not differentiable
  }
};

}  // namespace ctnn

// ctnn/layers/sparse_dense.hpp — sparse_dense<K, N, NNZ, Activation>: a dense layer with NNZ weights (layout::bitmap).
//
// Computes y = activation(x W + b) for a flat input of K features, where the
// kernel W[K, N] has at most NNZ non-zero weights, stored as the packed
// values [NNZ] (parameters) and one metadata buffer "index" of typed fields
// (kernels/sparse_index.hpp): chunk offsets [chunks + 1] (uint32), then
// 16-column bitmaps [chunks, K] (uint16), chunks = ceil(N / 16). What
// strip_pruning (pruning/strip.hpp) makes of a pruned dense layer by default;
// parameter_count (NNZ + N) and the memory plan are compile-time constants.
// Stored bytes: 4 NNZ + 4 N + 2 K chunks + 4 (chunks + 1). A fresh layer
// spreads its NNZ weights evenly over W, Glorot-uniform. Requires an input of
// K features (rank 1), 0 < NNZ <= K N. Output: shape<N>. Products through
// ops<B>::sparse_dense_forward / _backward with the layout's index view,
// except at the batches kernels::cpu::decode_batches names for the layout and
// the CPU architecture (bitmap: every batch): there the dense layer's products
// over the weights decoded to dense, the buffer "decoded" (role::derived, K x N,
// never saved) that the model rewrites through derive() after every change of
// the weights (docs/pruning.md, "Decoded weights"); with them, backward at every
// batch is the dense layer's (dX over the decoded weights, dW into the derived
// scratch "decoded_gradient", the values' gradient its kept entries; where the
// backend computes the values' gradient from X and dY, nm on AVX-512 and AVX2,
// neither dW nor that scratch, which the plan then does not hold);
// undecoded<Spec> (tag layout::undecoded<L>) never decodes: no decoded buffers,
// the layout's kernels.
// Also here: detail::sparse_dense_spec and detail::sparse_dense_common, the
// part every sparse layout's layer shares. Layout contract and figures:
// docs/pruning.md.
#pragma once
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "../core/backend.hpp"
#include "../core/concepts.hpp"
#include "../core/plan.hpp"
#include "../core/shape.hpp"
#include "../backends/cpu/ops.hpp"
#include "../backends/cpu/sparse.hpp"
#include "../core/diagnostics.hpp"
#include "../kernels/sparse_index.hpp"
#include "activation.hpp"

namespace ctnn {

namespace detail {
// The spec part every sparse dense layout shares: Self names itself
// (Self::spec_name), K inputs, N units, NNZ stored weights.
template <class Self, std::size_t K, std::size_t N, std::size_t NNZ, class Act>
struct sparse_dense_spec {
  static_assert(K > 0 && N > 0 && NNZ > 0, "sparse_dense: K, N and NNZ must be > 0");
  using is_layer_spec = void;
  using activation = Act;
  static constexpr std::size_t inputs = K, units = N, nnz = NNZ;

  static std::string name() {
    std::string s = std::string(Self::spec_name) + "<" + std::to_string(K) + ", " + std::to_string(N) + ", " +
                    std::to_string(NNZ);
    if (!std::is_same_v<Act, identity>) s += ", " + Act::name();
    return s + ">";
  }

  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    constexpr bool in_ok = diag::sparse_dense_input_mismatch<diag::layer<Pos>, diag::input_elements<In::size>,
                                                             diag::kernel_rows<K>, (In::rank == 1 && In::size == K)>::value;
    constexpr bool nnz_ok = diag::sparse_dense_nnz_too_large<diag::layer<Pos>, (NNZ <= K * N)>::value;
    return in_ok && nnz_ok;
  }
};

// A spec whose layer never computes from decoded weights (undecoded<Spec>: decodes = false); a
// spec that says nothing decodes where its layout does (namespace scope: nvcc 13).
template <class Spec>
concept opts_out_of_decoding = requires { Spec::decodes; } && !Spec::decodes;
// Whether Backend's ops compute a decoding layer's values' gradient (and the bias') straight from x
// and dz for layout Index, K x N and T (ops<cpu<Arch>>::sparse_dense_weights_gradient, offered where
// kernels::cpu::fused_weights_gradient_v holds: nm<Nk, M> on AVX-512 and AVX2), so the layer never
// writes the dense dW: both what backward_as runs and whether the plan holds "decoded_gradient".
template <class Backend, std::size_t K, std::size_t N, class Index, class T>
concept computes_values_gradient = requires(const Index& ix, const T* x, T* d, std::size_t n) {
  ops<Backend>::template sparse_dense_weights_gradient<K, N>(ix, x, x, d, d, n, n);
};

// The bound part every sparse dense layout shares: sizes, types, shapes, and
// the initialisation (NNZ positions spread evenly over W in row-major order,
// Glorot-uniform values, stored through the layout's own pack).
template <class Spec, Shape In, class P>
struct sparse_dense_common {
  static constexpr std::size_t K = Spec::inputs, N = Spec::units, NNZ = Spec::nnz;
  using Act = typename Spec::activation;
  using T = typename P::compute_type;
  using variable_type = typename P::variable_type;
  using compute_type = T;
  using in_shape = In;
  using out_shape = shape<N>;
  static constexpr std::size_t state_count = 0;
  static std::string name() { return Spec::name(); }

  template <class Layer>
  static void init_packed(layer_slot<T> s, rng& g) {
    const std::size_t total = K * N;
    const double limit = std::sqrt(6.0 / double(K + N));
    std::vector<T> w(total, T(0));
    std::vector<std::uint8_t> keep(total, 0);
    for (std::size_t q = 0; q < total; ++q)
      if ((q + 1) * NNZ / total > q * NNZ / total) {
        keep[q] = 1;
        w[q] = T(g.uniform(-limit, limit));
      }
    Layer::template pack<T>(w.data(), keep.data(), s.params, s.metadata);
    for (std::size_t j = 0; j < N; ++j) s.params[NNZ + j] = T(0);
  }

  // The batches at which layout Index computes from its weights decoded to dense on Backend
  // (kernels::cpu::decode_batches of ops<Backend>'s architecture; none on a backend that names
  // no CPU architecture, none for undecoded<Spec>), and the decoded buffer's extent there (K N, or
  // 0 where it never does).
  template <class Index, class Backend>
  static constexpr kernels::cpu::batch_range decoding() {
    if constexpr (opts_out_of_decoding<Spec>)
      return {};
    else if constexpr (requires { typename ops<Backend>::arch; })
      return kernels::cpu::decode_batches<Index, typename ops<Backend>::arch>;
    else
      return {};
  }
  template <class Index, class Backend>
  static constexpr std::size_t decoded_extent = decoding<Index, Backend>().empty() ? 0 : K * N;
  // Whether the layer computes from its decoded weights at every batch (nm<Nk, M> on every CPU
  // architecture), so that the model never runs the layout's own forward: a cache only that forward
  // reads (nm's "transposed") is not needed there (extent 0; forward_as hands the layout's kernel no
  // scratch where the layer declares no cache: a slot without the derived block).
  template <class Index, class Backend>
  static constexpr bool decodes_every_batch =
      decoding<Index, Backend>().from <= 1 && decoding<Index, Backend>().below == kernels::cpu::every_batch.below;
  // The derived buffer every sparse layout declares (role::derived, never saved): W decoded.
  template <class Index, class Backend>
  static constexpr buffer decoded_buffer =
      buffer::make(role::derived, elem::compute, "decoded", {decoded_extent<Index, Backend>});
  // Beside it (role::derived too, never saved; derive leaves it alone): "decoded_gradient", K x N
  // scratch where a trained layer's backward writes the dense dW = X^T dZ, whose kept entries are the
  // values' gradient (backward_as); 0 where the layer never decodes or where Backend computes the
  // values' gradient without dW (computes_values_gradient: nm<Nk, M> on AVX-512 and AVX2).
  template <class Index, class Backend>
  static constexpr std::size_t decoded_gradient_extent() {
    if constexpr (decoding<Index, Backend>().empty())
      return 0;
    else if constexpr (computes_values_gradient<Backend, K, N, Index, T>)
      return 0;
    else
      return K * N;
  }
  template <class Index, class Backend>
  static constexpr buffer decoded_gradient_buffer =
      buffer::make(role::derived, elem::compute, "decoded_gradient", {decoded_gradient_extent<Index, Backend>()});

  // The model's refresh (train/model.hpp: after init, a load, a writable view, each update):
  // the decoded weights from the values and the index.
  template <class Layer, class Backend>
  static void derive_as(layer_slot<T> s) {
    ops<Backend>::template sparse_dense_decode<K, N>(Layer::view(s.metadata), s.params, s.derived);
  }

  // Every layout's products: at the batches decoding<Index, Backend>() names (and with a decoded
  // buffer: a graph layer's child has none), the dense layer's products over the decoded weights;
  // else its index view (Layer::view) through ops<Backend>, relu fused.
  template <class Layer, class Backend>
  static void forward_as(layer_slot<T> s, const T* x, T* y, run_info r) {
    using Index = decltype(Layer::view(s.metadata));
    constexpr kernels::cpu::batch_range dec = decoding<Index, Backend>();
    if constexpr (!dec.empty())
      if (s.derived && dec.contains(r.batch)) {
        if constexpr (requires { Act::template rule<T>(); }) {
          ops<Backend>::template dense_forward<K, N>(x, s.derived, s.params + NNZ, y, r.batch, Act::template rule<T>());
        } else {
          ops<Backend>::template dense_forward<K, N>(x, s.derived, s.params + NNZ, y, r.batch);
          Act::template forward<Backend>(y, r.batch, N);
        }
        return;
      }
    constexpr bool fuse = std::is_same_v<Act, relu>;
    // (a layer that declares no cache, as nm where it decodes at every batch, hands no scratch: the
    // slot's cache pointer is then another buffer's; nm::forward runs its paths without one)
    T* const scratch = Layer::cache_per_sample > 0 ? s.cache : nullptr;
    ops<Backend>::template sparse_dense_forward<K, N>(Layer::view(s.metadata), x, s.params, s.params + NNZ, y, r.batch,
                                                      fuse, scratch);
    if constexpr (!fuse) Act::template forward<Backend>(y, r.batch, N);
  }
  template <class Layer, class Backend>
  static void backward_as(layer_slot<T> s, const T* x, const T* y, T* dy, T* dx, run_info r) {
    Act::template backward<Backend>(y, dy, r.batch, N);
    using Index = decltype(Layer::view(s.metadata));
    constexpr kernels::cpu::batch_range dec = decoding<Index, Backend>();
    if constexpr (!dec.empty())
      if (s.derived) {
        // With decoded weights (kept current by derive at every batch), the dense layer's products at
        // every batch: dX = dZ W^T; dW = X^T dZ (and the bias' gradient) into the scratch beside W,
        // the values' gradient its kept entries (the layouts' own backward kernels: 6-12x the dense
        // step, docs/pruning.md "Training a stripped layer").
        // (nm on AVX-512 and AVX2: the values' gradient straight from x and dZ, no dense dW, and no
        // "decoded_gradient" in the plan: computes_values_gradient)
        if (dx) ops<Backend>::template dense_backward_input<K, N>(dy, s.derived, dx, r.batch);
        const Index ix = Layer::view(s.metadata);
        if constexpr (computes_values_gradient<Backend, K, N, Index, T>) {
          ops<Backend>::template sparse_dense_weights_gradient<K, N>(ix, x, dy, s.grads, s.grads + NNZ, NNZ, r.batch);
        } else {
          T* dw = s.derived + K * N;  // "decoded_gradient", after "decoded"
          ops<Backend>::template dense_backward_weights<K, N>(x, dy, dw, s.grads + NNZ, r.batch);
          ops<Backend>::template sparse_dense_gather<K, N>(ix, dw, s.grads, NNZ);
        }
        return;
      }
    ops<Backend>::template sparse_dense_backward<K, N>(Layer::view(s.metadata), x, dy, s.params, s.grads, s.grads + NNZ,
                                                       dx, r.batch);
  }
};
}  // namespace detail

template <class Spec, Shape In, class P, class Backend>
struct sparse_dense_layer;

template <std::size_t K, std::size_t N, std::size_t NNZ, Activation Act = identity>
struct sparse_dense : detail::sparse_dense_spec<sparse_dense<K, N, NNZ, Act>, K, N, NNZ, Act> {
  static constexpr const char* spec_name = "sparse_dense";
  template <Shape In, class P, class Backend>
  using bind = sparse_dense_layer<sparse_dense, In, precision::float_compute_t<precision::policy_of_t<P>>, Backend>;
};

template <class Spec, Shape In, class P, class Backend>
struct sparse_dense_layer : detail::sparse_dense_common<Spec, In, P> {
  using base = detail::sparse_dense_common<Spec, In, P>;
  using base::K, base::N, base::NNZ;
  using typename base::T;
  static constexpr std::size_t chunks = kernels::cpu::sparse::chunks(N);
  // The index: chunk offsets, then the bitmaps.
  using index =
      kernels::packed_index<kernels::field<std::uint32_t, chunks + 1>, kernels::field<std::uint16_t, chunks * K>>;
  static constexpr std::array<buffer, 5> buffers{buffer::parameter("values", {NNZ}), buffer::parameter("bias", {N}),
                                                 buffer::make(role::metadata, elem::u8, "index", {index::bytes}),
                                                 base::template decoded_buffer<kernels::bitmap_index, Backend>,
                                                 base::template decoded_gradient_buffer<kernels::bitmap_index, Backend>};
  static constexpr std::size_t parameter_count = count_of(buffers, role::parameter);
  static constexpr std::size_t cache_per_sample = 0;

  static kernels::bitmap_index view(const std::byte* meta) {
    return {index::template at<0>(meta), index::template at<1>(meta)};
  }

  // The layout contract (docs/pruning.md): packs the weights `keep` marks of a K x N row-major
  // kernel; returns how many there are (at most NNZ are written).
  template <class V>
  static std::size_t pack(const V* kernel, const std::uint8_t* keep, V* values, std::byte* meta) {
    return kernels::cpu::sparse::pack(kernel, keep, K, N, values, NNZ, index::template at<0>(meta),
                                      index::template at<1>(meta));
  }

  static void init(layer_slot<T> s, rng& g) { base::template init_packed<sparse_dense_layer>(s, g); }

  // The index as a file holds it (io/weights.hpp checks it before loading): "" when the kernels can run on it.
  static std::string check_metadata(std::string_view, const std::byte* meta) {
    return kernels::cpu::sparse::validate(index::template read<0>(meta).data(), index::template read<1>(meta).data(), K,
                                          N, NNZ);
  }

  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    base::template forward_as<sparse_dense_layer, Backend>(s, x, y, r);
  }
  static void derive(layer_slot<T> s) { base::template derive_as<sparse_dense_layer, Backend>(s); }
  static void backward(layer_slot<T> s, const T* x, const T* y, T* dy, T* dx, run_info r) {
    base::template backward_as<sparse_dense_layer, Backend>(s, x, y, dy, dx, r);
  }
};

namespace layout {
// Stripping to sparse_dense: 1 bit per kernel entry plus the kept values; the
// smallest files at moderate sparsity (the default layout of strip_pruning).
struct bitmap {
  template <long long K, long long N, long long NNZ, class Act>
  using layer = sparse_dense<std::size_t(K), std::size_t(N), std::size_t(NNZ), Act>;
  static std::string name() { return "bitmap"; }
};
}  // namespace layout

namespace detail {
// Bound layer B = L<Spec, In, P, Backend[, Index, Pack]> with its spec replaced by S.
template <class B, class S>
struct respec;
template <template <class, Shape, class, class> class L, class Old, Shape In, class P, class Backend, class S>
struct respec<L<Old, In, P, Backend>, S> {
  using type = L<S, In, P, Backend>;
};
template <template <class, Shape, class, class, class, class> class L, class Old, Shape In, class P, class Backend,
          class X, class Y, class S>
struct respec<L<Old, In, P, Backend, X, Y>, S> {
  using type = L<S, In, P, Backend, X, Y>;
};
}  // namespace detail

// undecoded<Spec>: the stripped layer Spec (sparse_dense, _csc, _rows, _nm, _block) that never
// computes from decoded weights: no "decoded" buffer in its plan (K N values fewer), its layout's
// own kernels at every batch, training included (docs/pruning.md, "Decoded weights"). The same
// name, variables and files as Spec: a weights or model file of one loads into the other.
// layout::undecoded<L> is its strip_pruning tag.
template <class Spec>
struct undecoded : Spec {
  static constexpr bool decodes = false;
  template <Shape In, class P, class Backend>
  using bind = typename detail::respec<typename Spec::template bind<In, P, Backend>, undecoded>::type;
};

namespace layout {
namespace detail {
// What a layout tag L declares beside its layer (csc, rows: kept_one_in and spelled), passed on.
template <class L>
struct declared {};
template <class L>
  requires requires { L::kept_one_in; }
struct declared<L> {
  static constexpr std::size_t kept_one_in = L::kept_one_in;
  static constexpr const char* spelled = L::spelled;
};
}  // namespace detail
// Stripping to layout L's layer, never decoded (undecoded<...>): for users bound by memory, who
// trade the decoded layouts' speed at small batches (bitmap, nm: their kernels 0.3-0.9x dense
// there) for K N values fewer per layer.
template <class L>
struct undecoded : detail::declared<L> {
  template <long long K, long long N, long long NNZ, class Act>
  using layer = ctnn::undecoded<typename L::template layer<K, N, NNZ, Act>>;
  static std::string name() { return "undecoded<" + L::name() + ">"; }
};
}  // namespace layout

}  // namespace ctnn

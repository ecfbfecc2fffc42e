// ctnn/backends/cpu/fused_mlp.hpp — a small MLP's inference over tiles of the batch
// (the CPU counterpart of backends/cuda/fused_mlp.cuh, tiny-cuda-nn's fully fused MLP).
//
// Fits (fused_mlp_fits<Layers, Arch>(), at compile time): bound layers of
// cpu<Arch> that are dense layers whose activation has a rule of
// kernels/functors.hpp (identity, relu, leaky_relu, sigmoid, tanh; softmax
// and dense<up_to<N>> do not fit) with at most fused_mlp_width = 256 outputs
// each, or flatten/reshape layers, all computing in one SIMD type (float or
// double), at least one dense layer. The first dense layer's inputs are read
// in place from x (any width).
// fused_mlp_forward<Arch, Layers>(x, y, batch, params): y = the network on x.
// Every kernel is packed once per call (gemm.hpp's pack_panels); then each
// tile of fused_tile_rows<Layers> rows goes through all the layers with its
// activations in this thread's two tile buffers (2 x rows x the widest layer:
// 32 KiB of float), each product the micro-kernel of gemm.hpp's
// packed_product (bias first, then k in order; the activation on the
// accumulators). Tiles are the pool's tasks: each output is computed by one
// task, so the bits do not depend on the thread count. Below one tile of rows
// the layers run unfused (dense_forward, the unfused path's kernels).
// Results equal the unfused path's up to rounding. docs/performance.md
// ("Fused small MLP on the CPU") has the measurement behind fused_mlp_default.
#pragma once
#include <algorithm>
#include <cstddef>
#include <new>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../../core/shape.hpp"
#include "../../kernels/functors.hpp"
#include "arch.hpp"
#include "backend.hpp"
#include "gemm.hpp"
#include "thread_pool.hpp"

namespace ctnn {

template <class Spec, Shape In, class P, class Backend>
struct dense_layer;  // layers/dense.hpp
template <class Spec, Shape In, class P, class Backend>
struct reshape_layer;  // layers/reshape.hpp

namespace kernels::cpu {

inline constexpr std::size_t fused_mlp_width = 256;

namespace fused {

// How one bound layer takes part: kind -1 it cannot; 0 a reshape (no work);
// 1 a dense layer of cpu<Arch>, whose rule() is its activation's functor.
template <class L, class Arch>
struct role {
  static constexpr int kind = -1;
};
template <class Spec, Shape In, class P, class Arch>
struct role<dense_layer<Spec, In, P, ctnn::cpu<Arch>>, Arch> {
  using T = typename P::compute_type;
  using Act = typename Spec::activation;
  static constexpr std::size_t k = In::size, n = Spec::units;
  static constexpr bool fits = requires { Act::template rule<T>(); } && !Spec::is_up_to && n <= fused_mlp_width &&
                               simd_v<T, Arch>;
  static constexpr int kind = fits ? 1 : -1;
  static constexpr auto rule() { return Act::template rule<T>(); }
};
template <class Spec, Shape In, class P, class Arch>
struct role<reshape_layer<Spec, In, P, ctnn::cpu<Arch>>, Arch> {
  static constexpr int kind = 0;
};

template <class Layers, class Arch>
struct plan {
  static constexpr std::size_t count = std::tuple_size_v<Layers>;
  template <std::size_t I>
  using layer = std::tuple_element_t<I, Layers>;
  template <std::size_t I>
  using role_of = role<layer<I>, Arch>;
  static constexpr bool fits = [] {
    return []<std::size_t... I>(std::index_sequence<I...>) {
      if constexpr (((role_of<I>::kind >= 0) && ...)) {
        using T0 = typename layer<0>::compute_type;
        return (std::is_same_v<typename layer<I>::compute_type, T0> && ...) && ((role_of<I>::kind == 1) || ...);
      } else {
        return false;
      }
    }(std::make_index_sequence<count>{});
  }();
  // the widest dense output
  static constexpr std::size_t width = [] {
    std::size_t m = 1;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((void)[&] {
        if constexpr (role_of<I>::kind == 1) m = std::max(m, role_of<I>::n);
      }(), ...);
    }(std::make_index_sequence<count>{});
    return m;
  }();
  // the index of the last dense layer (its output goes straight to y)
  static constexpr std::size_t last = [] {
    std::size_t l = 0;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((void)[&] {
        if constexpr (role_of<I>::kind == 1) l = I;
      }(), ...);
    }(std::make_index_sequence<count>{});
    return l;
  }();
};

// This thread's buffer of at least n values, 64-byte aligned (Tag keeps the
// packed kernels and the tile buffers apart from each other and from simd::scratch).
template <class T, int Tag>
T* buffer(std::size_t n) {
  struct buf {
    T* p = nullptr;
    std::size_t n = 0;
    ~buf() {
      if (p) ::operator delete[](p, std::align_val_t{64});
    }
  };
  thread_local buf b;
  if (n > b.n) {
    if (b.p) ::operator delete[](b.p, std::align_val_t{64});
    b.p = static_cast<T*>(::operator new[](n * sizeof(T), std::align_val_t{64}));
    b.n = n;
  }
  return b.p;
}

// y[m, N] = e(a[m, K] w + b) over w packed by pack_panels (packed_product's kernel).
template <class Arch, std::size_t K, std::size_t N, class T, class E>
void tile_product(const T* a, const T* packed, const T* b, T* y, std::size_t m, const E& e, thread_pool& pool) {
  constexpr std::size_t NV = packed_panel_vectors<T, Arch>(N);
  if constexpr (std::is_same_v<E, fn::identity_fn>)
    simd::packed_product<Arch, NV>(m, N, K, a, K, packed, y, N, b, fn::relu_fn{}, false, pool);
  else
    simd::packed_product<Arch, NV>(m, N, K, a, K, packed, y, N, b, e, true, pool);
}

}  // namespace fused

// Whether the bound layers Layers (a std::tuple) run as the fused MLP of cpu<Arch>.
template <class Layers, class Arch>
constexpr bool fused_mlp_fits() {
  if constexpr (std::tuple_size_v<Layers> == 0) return false;
  else return fused::plan<Layers, Arch>::fits;
}

// Whether a model of cpu<Arch> starts with Layers' inference fused (model.fused_mlp().forward):
// where it measured faster than the unfused path (docs/performance.md).
template <class Layers, class Arch>
inline constexpr bool fused_mlp_default = false;

// Rows of one tile: the two tile buffers hold 8192 values (32 KiB of float,
// an L1 data cache), at least 16 rows (gemm.hpp's packed_rows) and at most 64.
template <class Layers, class Arch>
inline constexpr std::size_t fused_tile_rows =
    std::clamp<std::size_t>(4096 / fused::plan<Layers, Arch>::width, packed_rows, 64);

// y[batch, out] = the network Layers on x[batch, in]; params[I]: layer I's
// parameters (kernel [K, N], then bias [N]). Call only where fused_mlp_fits.
template <class Arch, class Layers, class T>
void fused_mlp_forward(const T* x, T* y, std::size_t batch, const T* const* params,
                       thread_pool& pool = thread_pool::global()) {
  using P = fused::plan<Layers, Arch>;
  static_assert(P::fits, "fused_mlp_forward: the network does not fit the CPU's fused MLP");
  constexpr std::size_t R = fused_tile_rows<Layers, Arch>, W = P::width;
  if (batch == 0) return;
  auto dense_layers = [&](auto&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((void)[&] {
        if constexpr (P::template role_of<I>::kind == 1) f.template operator()<I, typename P::template role_of<I>>();
      }(), ...);
    }(std::make_index_sequence<P::count>{});
  };
  if (batch < R) {  // one short tile: the unfused kernels, layer by layer
    T* buf = fused::buffer<T, 0>(2 * batch * W);
    const T* a = x;
    std::size_t d = 0;
    dense_layers([&]<std::size_t I, class F>() {
      T* o = I == P::last ? y : buf + (d++ % 2) * batch * W;
      dense_forward<F::k, F::n, decltype(F::rule()), Arch>(a, params[I], params[I] + F::k * F::n, o, batch, F::rule());
      a = o;
    });
    return;
  }
  // every kernel packed once, in this thread's buffer (the tasks read it)
  constexpr std::size_t packed_total = [] {
    std::size_t s = 0;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((void)[&] {
        using F = typename P::template role_of<I>;
        if constexpr (F::kind == 1) s += packed_panels_size<T, Arch>(F::k, F::n);
      }(), ...);
    }(std::make_index_sequence<P::count>{});
    return s;
  }();
  T* const packed = fused::buffer<T, 1>(packed_total);
  const T* pk[P::count] = {};
  {
    std::size_t off = 0;
    dense_layers([&]<std::size_t I, class F>() {
      simd::pack_panels<Arch>(F::k, F::n, strided<T>{params[I], F::n, 1}, packed + off);
      pk[I] = packed + off;
      off += packed_panels_size<T, Arch>(F::k, F::n);
    });
  }
  const std::size_t tiles = (batch + R - 1) / R;
  std::size_t flops = 0;
  dense_layers([&]<std::size_t I, class F>() { flops += F::k * F::n; });
  pool.run(
      tiles,
      [&](std::size_t t) {
        const std::size_t r0 = t * R, nr = std::min(R, batch - r0);
        T* buf = fused::buffer<T, 2>(2 * R * W);
        const T* a = x + r0 * std::tuple_element_t<0, Layers>::in_shape::size;
        std::size_t d = 0;
        dense_layers([&]<std::size_t I, class F>() {
          T* o = I == P::last ? y + r0 * F::n : buf + (d++ % 2) * R * W;
          fused::tile_product<Arch, F::k, F::n>(a, pk[I], params[I] + F::k * F::n, o, nr, F::rule(), pool);
          a = o;
        });
      },
      tiles > 1 && pool.size() > 1 && batch * flops >= simd::parallel_threshold);
}

}  // namespace kernels::cpu
}  // namespace ctnn

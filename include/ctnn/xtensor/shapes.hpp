// ctnn/xtensor/shapes.hpp — the xtensor side of a network's shapes, shared by
// ctnn/xtensor.hpp and ctnn/npy.hpp (namespace ctnn::xtd, not a public API).
//
//   check_static<E, S, Lead>()   compile-time rank (and, for fixed shapes, extent)
//                                check of expression type E against sample shape S
//                                with Lead leading (batch) axes
//   check_shape<S, Lead>(who, s) the same at run time; std::invalid_argument naming
//                                `who`, the shape given and the shape wanted;
//                                returns the leading extent (the sample count)
//   batch_tensor<T, S>(n)        an xt::xtensor<T, 1 + rank S> of shape (n, S...)
//   row_major_values<T, E>       e's values in row-major order as T (in place when
//                                e already is such a container)
//   value_t, in_shape_t, out_shape_t of a model type
// Includes xtensor, the core's shapes and nothing of the trainer.
#pragma once
#include <array>
#include <cstddef>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <xtensor/xfixed.hpp>
#include <xtensor/xtensor.hpp>

#include "../core/shape.hpp"

namespace ctnn {

namespace diag {
template <std::size_t> struct expression_rank {};
template <std::size_t> struct wanted_rank {};
template <std::size_t> struct axis {};
template <std::size_t> struct expression_extent {};
template <std::size_t> struct wanted_extent {};

template <class Have, class Want, bool Ok>
struct xtensor_batch_rank_mismatch {
  static_assert(Ok, "ctnn xtensor: the input's rank is not the network's input rank + 1 (put the batch axis "
                    "first; one sample: predict_sample)");
  static constexpr bool value = true;
};
template <class Have, class Want, bool Ok>
struct xtensor_sample_rank_mismatch {
  static_assert(Ok, "ctnn xtensor: predict_sample: the sample's rank is not the network's input rank");
  static constexpr bool value = true;
};
template <class Axis, class Have, class Want, bool Ok>
struct xtensor_extent_mismatch {
  static_assert(Ok, "ctnn xtensor: an axis of the input has another extent than the network's input shape");
  static constexpr bool value = true;
};
}  // namespace diag

namespace xtd {

template <class T, class S>
struct fixed_of;
template <class T, std::size_t... D>
struct fixed_of<T, shape<D...>> {
  using type = xt::xtensor_fixed<T, xt::xshape<D...>>;
};

// The static extents of an expression, when its shape type carries them.
template <class ST>
struct static_dims {
  static constexpr bool known = false;
};
template <std::size_t... X>
struct static_dims<xt::fixed_shape<X...>> {
  static constexpr bool known = true;
  static constexpr std::array<std::size_t, sizeof...(X)> dims{X...};
};

template <class E>
inline constexpr std::size_t rank_of = xt::get_rank<std::decay_t<E>>::value;  // SIZE_MAX: dynamic
inline constexpr std::size_t dynamic_rank = std::numeric_limits<std::size_t>::max();

template <class Shp>
std::string shape_str(const Shp& s) {
  std::string r = "(";
  for (std::size_t i = 0; i < std::size(s); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + (std::size(s) == 1 ? ",)" : ")");
}

// Compile-time checks of an expression against a sample shape S, with `lead`
// leading axes (1: a batch axis) before the sample's axes.
// xtensor_fixed carries its shape as a template argument; an expression of
// fixed-shape operands (a + b) as its inner_shape_type.
template <class E>
struct fixed_dims_of : static_dims<void> {};
template <class E>
  requires requires { typename E::inner_shape_type; }
struct fixed_dims_of<E> : static_dims<typename E::inner_shape_type> {};
template <class T, class S, xt::layout_type L, bool Sh, class Tag>
struct fixed_dims_of<xt::xfixed_container<T, S, L, Sh, Tag>> : static_dims<S> {};

template <class E>
constexpr std::size_t static_rank() {
  if constexpr (fixed_dims_of<E>::known) return fixed_dims_of<E>::dims.size();
  else return rank_of<E>;
}

// First-line messages: "ctnn xtensor: the input has rank 2; a batch of input<2x2> has rank 3 ..."
template <Shape S, std::size_t Lead, std::size_t R>
constexpr diag::message rank_text() {
  diag::message m;
  m << "ctnn xtensor: the input has rank " << R << "; " << (Lead ? "a batch of input<" : "a sample of input<");
  m.dims(S::dims) << "> has rank " << S::rank + Lead;
  if (Lead) m << " (put the batch axis first; one sample: predict_sample)";
  return m;
}
template <Shape S, std::size_t Lead, class Dims>
constexpr diag::message extent_text() {
  diag::message m;
  for (std::size_t a = 0; a < S::rank; ++a)
    if (Dims::dims[a + Lead] != S::dims[a]) {
      m << "ctnn xtensor: axis " << a + Lead << " of the input has extent " << Dims::dims[a + Lead] << "; input<";
      m.dims(S::dims) << "> wants " << S::dims[a];
      break;
    }
  return m;
}

template <class E, Shape S, std::size_t Lead>
constexpr bool check_static() {
  constexpr std::size_t r = static_rank<E>();
  if constexpr (r != dynamic_rank && r != S::rank + Lead) {
    constexpr bool located = diag::require<false, &rank_text<S, Lead, r>>();
    (void)located;
  } else if constexpr (r != dynamic_rank && fixed_dims_of<E>::known) {
    constexpr bool same = [] {
      for (std::size_t a = 0; a < S::rank; ++a)
        if (fixed_dims_of<E>::dims[a + Lead] != S::dims[a]) return false;
      return true;
    }();
    constexpr bool located = diag::require<same, &extent_text<S, Lead, fixed_dims_of<E>>>();
    (void)located;
  }
  if constexpr (r != dynamic_rank) {
    if constexpr (Lead == 1)
      static_assert(diag::xtensor_batch_rank_mismatch<diag::expression_rank<r>, diag::wanted_rank<S::rank + 1>,
                                                      r == S::rank + 1>::value);
    else
      static_assert(diag::xtensor_sample_rank_mismatch<diag::expression_rank<r>, diag::wanted_rank<S::rank>,
                                                       r == S::rank>::value);
    using st = fixed_dims_of<E>;
    if constexpr (r == S::rank + Lead && st::known) {
      [&]<std::size_t... A>(std::index_sequence<A...>) {
        static_assert((diag::xtensor_extent_mismatch<diag::axis<A + Lead>,
                                                     diag::expression_extent<st::dims[A + Lead]>,
                                                     diag::wanted_extent<S::dims[A]>,
                                                     st::dims[A + Lead] == S::dims[A]>::value &&
                       ...));
      }(std::make_index_sequence<S::rank>{});
    }
  }
  return true;
}

// Run-time check of the same; returns the leading extent (the sample count).
template <Shape S, std::size_t Lead, class Shp>
std::size_t check_shape(const char* who, const Shp& s) {
  const std::size_t r = std::size(s);
  bool ok = r == S::rank + Lead;
  for (std::size_t a = 0; ok && a < S::rank; ++a) ok = std::size_t(s[a + Lead]) == S::dims[a];
  if (!ok) {
    std::string want = Lead ? "(n" : "(";
    for (std::size_t a = 0; a < S::rank; ++a) want += (a || Lead ? ", " : "") + std::to_string(S::dims[a]);
    want += (Lead + S::rank == 1) ? ",)" : ")";
    throw std::invalid_argument(std::string(who) + ": the input has shape " + shape_str(s) + "; this network takes " +
                                want);
  }
  return Lead ? std::size_t(s[0]) : 1;
}

// A row-major copy of e in T, or e's own memory when it already is one.
template <class T, class E>
struct row_major_values {
  static constexpr bool in_place = std::is_same_v<typename E::value_type, T> &&
                                   requires { requires E::static_layout == xt::layout_type::row_major; } &&
                                   requires(const E& e) {
                                     { e.data() } -> std::convertible_to<const T*>;
                                     e.data_offset();
                                   };
  std::conditional_t<in_place, const E*, std::vector<T>> held;
  explicit row_major_values(const E& e) {
    if constexpr (in_place) held = std::addressof(e);
    else held.assign(e.begin(), e.end());  // xtensor iterates in row-major order
  }
  const T* data() const {
    if constexpr (in_place) return held->data() + held->data_offset();
    else return held.data();
  }
};

template <class M>
using value_t = typename std::remove_cvref_t<M>::value_type;
template <class M>
using out_shape_t = typename std::remove_cvref_t<M>::network::output_type;
template <class M>
using in_shape_t = typename std::remove_cvref_t<M>::network::input_type;

template <class T, Shape S>
xt::xtensor<T, S::rank + 1> batch_tensor(std::size_t n) {
  std::array<std::size_t, S::rank + 1> sh{};
  sh[0] = n;
  for (std::size_t a = 0; a < S::rank; ++a) sh[a + 1] = S::dims[a];
  return xt::xtensor<T, S::rank + 1>::from_shape(sh);
}

}  // namespace xtd

}  // namespace ctnn

// ctnn/xtensor.hpp — xtensor at the edges of a model: inputs, outputs, datasets, variables.
//
// Link ctnn::xtensor; the core headers never include xtensor. With M a ctnn::model of
// network Net (input shape I, output shape O):
//   input_tensor_t<M>, output_tensor_t<M>   xt::xtensor_fixed of one sample of I, of O
//   predict_sample(m, x)        one sample (x of shape I) -> output_tensor_t<M>
//   predict(m, x, batch = 256)  x of shape (n, I...) -> xt::xtensor (n, O...); the
//                               batch axis first, as Keras
//   evaluate(m, loss, x, y, metrics...)  Keras' evaluate(x, y) in batches of 32; y holds
//                               class indices (n) or (n, 1) for a sparse loss, else (n, width)
//   fit(m, loss, opt, x, y, options...)  Keras' fit(x, y, batch_size, epochs, validation_split,
//                               shuffle, class_weight, sample_weight): train/fit_arrays.hpp
//   as_output_tensor<M>(rows)   predict(m, dataset)'s rows as (n, O...)
//   data::from_xtensor<S, K>(x, y)  a dataset of samples of shape S from x (n, S...), y
//   variable<L, "kernel">(m)    layer L's buffer as a writable adaptor with its shape; the
//                               name is checked at compile time
//   variable(m, layer, "kernel")  the same at run time (rank dynamic)
// A static rank or fixed extent that does not fit is a compile error; a dynamic one an
// std::invalid_argument naming the function and both shapes. Any layout is read by its
// indices (a contiguous row-major container of the model's type in place).
// Docs: docs/interop.md ("xtensor at the edges").
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <xtensor/xadapt.hpp>
#include <xtensor/xfixed.hpp>
#include <xtensor/xtensor.hpp>

#include "xtensor/shapes.hpp"
#include "core/plan.hpp"
#include "core/shape.hpp"
#include "core/targets.hpp"
#include "data/pipeline.hpp"
#include "losses/loss.hpp"
#include "train/fit.hpp"
#include "train/fit_arrays.hpp"
#include "train/model.hpp"
#include "train/predict.hpp"

namespace ctnn {

namespace diag {
template <class Layer, auto Name, bool Ok>
struct no_such_variable {
  static_assert(Ok, "ctnn::variable: this layer declares no variable of this name");
  static constexpr bool value = true;
};
template <class Layer, class Count, bool Ok>
struct variable_layer_out_of_range {
  static_assert(Ok, "ctnn::variable: the network has no layer at this index (layers count from 0)");
  static constexpr bool value = true;
};
}  // namespace diag

namespace xtd {

template <std::size_t N>
struct name_literal {
  char s[N]{};
  constexpr name_literal(const char (&a)[N]) {
    for (std::size_t i = 0; i < N; ++i) s[i] = a[i];
  }
  constexpr std::string_view view() const { return {s, N - 1}; }
};

template <class Buffers>
constexpr std::size_t find_buffer(const Buffers& bs, std::string_view name) {
  for (std::size_t i = 0; i < bs.size(); ++i)
    if (bs[i].kind != role::cache && bs[i].kind != role::derived && bs[i].name == name) return i;
  return bs.size();
}

template <class M, elem E>
using elem_type_t = std::conditional_t<
    E == elem::variable, typename M::variable_type,
    std::conditional_t<E == elem::compute, typename M::compute_type,
                       std::conditional_t<E == elem::f32, float,
                                          std::conditional_t<E == elem::u8, std::uint8_t, std::uint32_t>>>>;

template <class M>
std::byte* find_variable(const M& m, std::size_t layer, std::string_view name, variable_ref* out = nullptr) {
  std::byte* p = nullptr;
  m.for_each_variable([&](const variable_ref& v) {
    if (!p && v.layer == layer && v.name == name) {
      p = v.data;
      if (out) *out = v;
    }
  });
  return p;
}

}  // namespace xtd

template <class M>
using input_tensor_t = typename xtd::fixed_of<xtd::value_t<M>, xtd::in_shape_t<M>>::type;
template <class M>
using output_tensor_t = typename xtd::fixed_of<xtd::value_t<M>, xtd::out_shape_t<M>>::type;

// One sample in, one sample out, both typed by the network's shapes.
template <Model M, class E>
output_tensor_t<M> predict_sample(M& m, const xt::xexpression<E>& x) {
  using I = xtd::in_shape_t<M>;
  using T = xtd::value_t<M>;
  static_assert(xtd::check_static<E, I, 0>());
  const E& e = x.derived_cast();
  xtd::check_shape<I, 0>("predict_sample", e.shape());
  const xtd::row_major_values<T, E> v(e);
  m.forward(v.data(), 1, false);
  const auto y = m.host_outputs(1);  // on the host (a copy on a device backend)
  output_tensor_t<M> out;
  std::copy(y.begin(), y.end(), out.data());
  return out;
}

// Outputs for a batch of samples: x is (n, input shape...), the result (n, output shape...).
template <Model M, class E>
xt::xtensor<xtd::value_t<M>, xtd::out_shape_t<M>::rank + 1> predict(M& m, const xt::xexpression<E>& x,
                                                                      std::size_t batch = 256) {
  using I = xtd::in_shape_t<M>;
  using O = xtd::out_shape_t<M>;
  using T = xtd::value_t<M>;
  static_assert(xtd::check_static<E, I, 1>());
  if (batch == 0) throw std::invalid_argument("predict: the batch size must be > 0");
  const E& e = x.derived_cast();
  const std::size_t n = xtd::check_shape<I, 1>("predict", e.shape());
  auto out = xtd::batch_tensor<T, O>(n);
  if (n == 0) return out;
  const xtd::row_major_values<T, E> v(e);
  const auto rows = m.predict(v.data(), n, batch);
  std::copy(rows.begin(), rows.end(), out.data());
  return out;
}

// predict(m, dataset)'s row-major outputs (or any n x output_size rows) as (n, output shape...).
template <Model M>
xt::xtensor<xtd::value_t<M>, xtd::out_shape_t<M>::rank + 1> as_output_tensor(
    const std::vector<xtd::value_t<M>>& rows) {
  using O = xtd::out_shape_t<M>;
  if (rows.size() % O::size != 0)
    throw std::invalid_argument("as_output_tensor: " + std::to_string(rows.size()) +
                                " values are not rows of the output shape " + O::str());
  auto out = xtd::batch_tensor<xtd::value_t<M>, O>(rows.size() / O::size);
  std::copy(rows.begin(), rows.end(), out.data());
  return out;
}

namespace data {

// Samples of shape S from x (n, S...) and their targets y: class indices
// (integers, shape (n) or (n, 1)) for sparse_labels, (n, width...) values for
// dense_targets. The values are copied; x's element type is the dataset's.
template <Shape S, class K = sparse_labels, class EX, class EY>
dataset<sample<S, K, typename EX::value_type>> from_xtensor(const xt::xexpression<EX>& x,
                                                            const xt::xexpression<EY>& y) {
  using T = typename EX::value_type;
  static_assert(std::is_floating_point_v<T>, "from_xtensor: the inputs must be floating-point values");
  static_assert(xtd::check_static<EX, S, 1>());
  const EX& xe = x.derived_cast();
  const EY& ye = y.derived_cast();
  const std::size_t n = xtd::check_shape<S, 1>("from_xtensor", xe.shape());
  if (ye.dimension() == 0 || std::size_t(ye.shape()[0]) != n || std::size_t(ye.size()) != n * K::width)
    throw std::invalid_argument("from_xtensor: " + std::to_string(n) + " samples but targets of shape " +
                                xtd::shape_str(ye.shape()) + " (expected " + std::to_string(n) +
                                (K::width == 1 ? "" : " x " + std::to_string(K::width)) + " values)");
  std::vector<T> xs(n * S::size);
  std::copy(xe.begin(), xe.end(), xs.begin());  // row-major traversal of any expression
  std::vector<target_element_t<K, T>> ys(n * K::width);
  if constexpr (is_sparse_v<K>) {
    static_assert(std::is_integral_v<typename EY::value_type>,
                  "from_xtensor: sparse labels must be integers (class indices)");
    std::size_t i = 0;
    for (auto v : ye) {
      if (v < 0 || static_cast<std::uint64_t>(v) > std::uint64_t(std::numeric_limits<std::int32_t>::max()))
        throw std::invalid_argument("from_xtensor: label " + std::to_string(v) + " of sample " + std::to_string(i) +
                                    " is not a class index");
      ys[i++] = std::int32_t(v);
    }
  } else {
    std::copy(ye.begin(), ye.end(), ys.begin());
  }
  return from_tensors<S, K, T>(std::move(xs), std::move(ys));
}

}  // namespace data

namespace xtd {
// evaluate(x, y) given the wrong loss for y, said in words with the loss to
// use (from_xtensor's size message would not name one): class labels (y of
// rank 1) for a loss of dense target vectors, or rows as wide as the output
// (one-hot or soft targets) for a loss of class labels.
template <class K, std::size_t Out, class EY>
void check_target_kind(const std::string& loss, const EY& y, const std::string& who = "evaluate") {
  const std::size_t n = y.dimension() == 0 ? 0 : std::size_t(y.shape()[0]);
  if constexpr (is_sparse_v<K>) {
    if (Out > 1 && y.dimension() == 2 && std::size_t(y.shape()[1]) == Out)
      throw std::invalid_argument(who + ": y holds " + std::to_string(n) + " rows of " + std::to_string(Out) +
                                  " values (one-hot or soft targets) but " + loss +
                                  " takes one class label per sample: use categorical_crossentropy instead");
  } else {
    if (K::width > 1 && y.dimension() == 1)
      throw std::invalid_argument(who + ": y holds one value per sample (class labels) but " + loss + " takes " +
                                  std::to_string(K::width) +
                                  " target values per sample: use sparse_categorical_crossentropy instead");
  }
}
}  // namespace xtd

namespace xtd {
// x (n, input shape...) as the model's values and y's values, sample after sample, with the
// number of samples checked against y's first axis.
template <class M, class EX, class EY>
auto arrays_of(const char* who, const EX& e, const EY& ye) {
  using I = in_shape_t<M>;
  using T = value_t<M>;
  const std::size_t n = check_shape<I, 1>(who, e.shape());
  if (ye.dimension() == 0 || std::size_t(ye.shape()[0]) != n)
    throw std::invalid_argument(std::string(who) + ": y: " + std::to_string(n) + " samples but targets of shape " +
                                shape_str(ye.shape()));
  std::vector<T> xs(e.begin(), e.end());  // row-major traversal of any expression, converted
  std::vector<typename EY::value_type> ys(ye.begin(), ye.end());
  return std::pair{std::move(xs), std::move(ys)};
}
}  // namespace xtd

// Keras' evaluate(x, y): the loss and metrics over x (n, input shape...) and
// y, in batches of 32 (batch_size{n}), weighted by sample_weight or class_weight
// as fit (train/fit_arrays.hpp). The target kind is the loss's (sparse: class indices);
// y of the other kind throws std::invalid_argument naming the loss to use.
template <Model M, class L, class EX, class EY, class... Ms>
  requires Loss<L, typename std::remove_cvref_t<M>::compute_type> &&
           ((Metric<Ms, typename std::remove_cvref_t<M>::compute_type> || detail::is_array_option_v<Ms>) && ...)
logs evaluate(M& m, const L& loss, const xt::xexpression<EX>& x, const xt::xexpression<EY>& y, const Ms&... extras) {
  using MM = std::remove_cvref_t<M>;
  using I = xtd::in_shape_t<M>;
  using K = loss_target_kind_t<L, MM::output_size>;
  static_assert(xtd::check_static<EX, I, 1>());
  xtd::check_target_kind<K, MM::output_size>(loss.name(), y.derived_cast());
  const auto [xs, ys] = xtd::arrays_of<M>("evaluate", x.derived_cast(), y.derived_cast());
  return evaluate(m, loss, xs, ys, extras...);
}

// Keras' fit(x, y, ...) on xtensor arrays: x (n, input shape...) of any number type
// (converted to the model's), y as evaluate's; the options and extras of
// train/fit_arrays.hpp (epochs{n}, batch_size{n}, validation_split{f}, shuffle_seed{s},
// no_shuffle{}, sample_weight(w), class_weight(...), metrics, callbacks, ...).
template <Model M, class L, class O, class EX, class EY, class... Extras>
  requires Loss<L, typename std::remove_cvref_t<M>::value_type> &&
           Optimizer<O, typename std::remove_cvref_t<M>::variable_type>
history fit(M& m, const L& loss, O& opt, const xt::xexpression<EX>& x, const xt::xexpression<EY>& y,
            Extras&&... extras) {
  using MM = std::remove_cvref_t<M>;
  using I = xtd::in_shape_t<M>;
  using K = loss_target_kind_t<L, MM::output_size>;
  static_assert(xtd::check_static<EX, I, 1>());
  xtd::check_target_kind<K, MM::output_size>(loss.name(), y.derived_cast(), "fit");
  const auto [xs, ys] = xtd::arrays_of<M>("fit", x.derived_cast(), y.derived_cast());
  return fit(m, loss, opt, xs, ys, std::forward<Extras>(extras)...);
}

// Layer L's variable `Name` (a parameter, state, mask or metadata buffer) as a
// writable view with its declared shape; it stays valid until the model's
// memory grows (a larger batch than any before, or another optimizer).
namespace xtd {
// "ctnn::variable<1, kernal>: layer 1 (index from 0) declares no variable kernal; it has kernel, bias"
template <std::size_t L, name_literal Name, class Layer>
constexpr diag::message no_such_variable_text() {
  diag::message m;
  m << "ctnn::variable<" << L << ", ";
  m.chars(Name.view()) << ">: layer " << L << " (index from 0) declares no variable ";
  m.chars(Name.view()) << "; it has ";
  bool first = true;
  for (const auto& b : Layer::buffers)
    if (b.kind != role::cache && b.kind != role::derived) {
      if (!first) m << ", ";
      m.chars(b.name);
      first = false;
    }
  if (first) m << "none";
  return m;
}
template <std::size_t L, std::size_t Count>
constexpr diag::message layer_out_of_range_text() {
  diag::message m;
  m << "ctnn::variable<" << L << ", ...>: the network has " << Count << " layers (indices 0 to " << Count - 1 << ")";
  return m;
}
}  // namespace xtd

template <std::size_t L, xtd::name_literal Name, Model M>
auto variable(M& m) {
  using MM = std::remove_cvref_t<M>;
  if constexpr (!(L < MM::layer_count)) {
    constexpr bool located = diag::require<false, &xtd::layer_out_of_range_text<L, MM::layer_count>>();
    (void)located;
  } else if constexpr (xtd::find_buffer(ctnn::detail::type_at_t<L, typename MM::layers>::buffers, Name.view()) ==
                       ctnn::detail::type_at_t<L, typename MM::layers>::buffers.size()) {
    constexpr bool located =
        diag::require<false, &xtd::no_such_variable_text<L, Name, ctnn::detail::type_at_t<L, typename MM::layers>>>();
    (void)located;
  }
  static_assert(diag::variable_layer_out_of_range<diag::layer<L>, diag::network_elements<MM::layer_count>,
                                                  (L < MM::layer_count)>::value);
  if constexpr (L < MM::layer_count) {
    using Layer = ctnn::detail::type_at_t<L, typename MM::layers>;
    constexpr std::size_t b = xtd::find_buffer(Layer::buffers, Name.view());
    static_assert(diag::no_such_variable<diag::layer<L>, Name,
                                         (b < Layer::buffers.size())>::value);
    if constexpr (b < Layer::buffers.size()) {
      constexpr buffer d = Layer::buffers[b];
      using V = xtd::elem_type_t<MM, d.type>;
      using P = std::conditional_t<std::is_const_v<M>, const V*, V*>;
      std::array<std::size_t, d.rank> sh{};
      for (std::size_t a = 0; a < d.rank; ++a) sh[a] = d.dims[a];
      auto* p = reinterpret_cast<P>(xtd::find_variable(m, L, Name.view()));
      return xt::adapt(p, d.extent, xt::no_ownership(), sh);
    }
  }
}

// The same with a run-time layer index and name: a view of the model's
// variable type, rank dynamic; std::invalid_argument names what is missing.
template <Model M>
auto variable(M& m, std::size_t layer, std::string_view name) {
  using MM = std::remove_cvref_t<M>;
  using V = typename MM::variable_type;
  using P = std::conditional_t<std::is_const_v<M>, const V*, V*>;
  if (layer >= MM::layer_count)
    throw std::invalid_argument("variable: the network has " + std::to_string(MM::layer_count) +
                                " layers (counted from 0); there is no layer " + std::to_string(layer));
  variable_ref v;
  std::byte* p = xtd::find_variable(m, layer, name, &v);
  if (!p) {
    std::string have;
    m.for_each_variable([&](const variable_ref& r) {
      if (r.layer == layer) have += (have.empty() ? "" : ", ") + std::string(r.name);
    });
 throw std::invalid_argument("variable: layer " + std::to_string(layer) + " has no variable '" + std::string(name) + "'" +
                                (have.empty() ? "; it has none" : "; it has " + have));
  }
  if (v.type != elem::variable)
    throw std::invalid_argument("variable: layer " + std::to_string(layer) + " '" + std::string(name) +
                                "' is not of the model's variable type; use variable<" + std::to_string(layer) +
                                ", \"" + std::string(name) + "\">(m)");
  std::vector<std::size_t> sh(v.dims.begin(), v.dims.begin() + v.rank);
  return xt::adapt(reinterpret_cast<P>(p), v.extent, xt::no_ownership(), sh);
}

}  // namespace ctnn

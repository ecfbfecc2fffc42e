// tests/parity/parity.hpp — cpu<> against a backend B, over every layer type and every policy.
//
// parity::check_policies<B, Case>() (one test case per layer type: the
// PARITY_*_CASES macros) builds one small network per layer type of
// include/ctnn/layers/ (and pruning's prune_low_magnitude) and, for every
// precision policy B takes, makes the cpu<> model and the B model from one
// seed and compares, through the public API only (host views): predict, one
// training step (fit over one batch: loss and every variable; Adam, or SGD for
// a case with gradients that are exactly 0: optimizer_for) and predict again.
// Tolerances (relative to the largest magnitude compared, per check):
// exact<B, P> (a backend that runs cpu<>'s kernels: the simulated device) asks for the same bits; otherwise tolerance<P>: 1e-4 float32, 1e-10 float64,
// 2e-2 mixed_float16 / float16, 6e-2 mixed_bfloat16 / bfloat16 (one or two
// ulps of the 16-bit type carried through a few layers). Dropout: where
// same_dropout_draw<B> (the simulated device) the network is compared as
// the others; elsewhere only its inference and, in training, its rate and
// scaling (statistics over 4096 values); dynamic_dropout (its rate set on
// both models) likewise. Uniform 16-bit policies are
// inference-only (no training step). A backend opts out of a policy with
// takes_policy<B, P> (CUDA: float64), out of the pruned network's
// update_pruning_step with pruning_step<B>, out of a layer type with
// takes_case<B, Case> (reported by a MESSAGE; no backend opts out today: CUDA
// runs every sparse layout). Used by tests/device/test_parity_*.cpp
// (sim::device) and tests/cuda/test_parity_*.cu (cuda<90>, parity_cuda.hpp).
#pragma once
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/mixed_precision.hpp>
#include <ctnn/pruning.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace parity {
using namespace ctnn;

// ---- what a backend says about itself (specialize in the including test) ----
template <class B, class P>
inline constexpr bool exact = false;  // the same bits as cpu<> under P
template <class B>
inline constexpr bool same_dropout_draw = false;  // dropout draws cpu<>'s masks from the same seed
template <class B, class P>
inline constexpr bool takes_policy = true;
template <class B, class Case>
inline constexpr bool takes_case = true;  // the backend runs Case's layer type at all
template <class B>
inline constexpr bool pruning_step = true;  // the pruned network trains with update_pruning_step on B

template <class P>
constexpr double tolerance() {
  using C = typename P::compute_type;
  using V = typename P::variable_type;
  if constexpr (std::is_same_v<C, bfloat16_t> || std::is_same_v<V, bfloat16_t>) return 6e-2;
  else if constexpr (P::half) return 2e-2;
  else if constexpr (std::is_same_v<C, double>) return 1e-10;
  else return 1e-4;
}

using bfloat16 = precision::policy<bfloat16_t, bfloat16_t>;  // inference: everything in bfloat16

// ---- one network per layer type (inputs of 12 features or 6x6x2 images; 3 classes) ----
struct dense_net {
  static constexpr const char* name = "dense";
  using net = sequential<input<12>, dense<8, relu>, dense<3>>;
};
struct activations_net {
  static constexpr const char* name = "activation layers (relu, leaky_relu, sigmoid, tanh, softmax)";
  using net = sequential<input<12>, dense<8>, relu, dense<8>, leaky_relu<0.1>, dense<8>, ctnn::sigmoid, dense<8>, ctnn::tanh,
                         dense<6>, softmax, dense<3>>;
};
struct fused_activations_net {
  static constexpr const char* name = "dense with every fused activation";
  using net = sequential<input<12>, dense<8, leaky_relu<0.1>>, dense<8, ctnn::sigmoid>, dense<8, ctnn::tanh>,
                         dense<6, softmax>, dense<3>>;
};
struct reshape_net {
  static constexpr const char* name = "flatten, reshape";
  using net = sequential<input<3, 4>, flatten, reshape<2, 6>, flatten, dense<3>>;
};
struct sparse_net {
  static constexpr const char* name = "sparse_dense (bitmap)";
  using net = sequential<input<12>, sparse_dense<12, 8, 40, relu>, dense<3>>;
};
struct sparse_csc_net {
  static constexpr const char* name = "sparse_dense_csc";
  using net = sequential<input<12>, sparse_dense_csc<12, 8, 40, relu>, dense<3>>;
};
struct sparse_rows_net {
  static constexpr const char* name = "sparse_dense_rows";
  using net = sequential<input<12>, sparse_dense_rows<12, 8, 40, relu>, dense<3>>;
};
struct sparse_nm_net {
  static constexpr const char* name = "sparse_dense_nm (2:4)";
  using net = sequential<input<12>, sparse_dense_nm<12, 8, 2, 4, relu>, dense<3>>;
};
struct pruned_net {
  static constexpr const char* name = "prune_low_magnitude (dense, conv2d)";
  using net = sequential<input<6, 6, 2>, prune_low_magnitude<conv2d<3, 3, 3, 1, padding::valid, relu>, constant_sparsity<0.5>>,
                         flatten, prune_low_magnitude<dense<8, relu>, constant_sparsity<0.9>>, dense<3>>;
};
struct conv_net {
  static constexpr const char* name = "conv2d (same, valid, stride 2)";
  using net = sequential<input<6, 6, 2>, conv2d<4, 3, 3, 1, padding::same, relu>, conv2d<3, 2, 2, 2, padding::valid>,
                         flatten, dense<3>>;
};
struct max_pool_net {
  static constexpr const char* name = "max_pool2d";
  using net = sequential<input<6, 6, 2>, conv2d<3, 3, 3, 1, padding::same>, max_pool2d<2>, flatten, dense<3>>;
};
struct average_pool_net {
  static constexpr const char* name = "average_pool2d, global_average_pool";
  using net = sequential<input<6, 6, 2>, conv2d<3, 3, 3, 1, padding::same>, average_pool2d<2, 2, padding::same>,
                         global_average_pool, dense<3>>;
};
struct batch_norm_net {
  static constexpr const char* name = "batch_norm";
  // The biases of the conv2d and dense layers before each batch_norm have a gradient of exactly 0
  // (batch_norm removes the mean), computed as rounding noise; Adam's first step, lr g / (|g| + eps),
  // turns noise of 1e-9 into moves of about lr / 100 that differ between summation orders (seen on
  // an H200: 5e-4). So this case trains with SGD, whose step is proportional to the gradient.
  static constexpr bool zero_true_gradients = true;
  using net = sequential<input<6, 6, 2>, conv2d<3, 3, 3, 1, padding::valid>, batch_norm, relu, flatten, dense<8>,
                         batch_norm, dense<3>>;
};
struct dropout_net {
  static constexpr const char* name = "dropout";
  using net = sequential<input<12>, dense<16, relu>, dropout<0.25f>, dense<3>>;
};
struct dynamic_dropout_net {  // the rate set on both models (set_dropout_rate), read by the op where it lives
  static constexpr const char* name = "dynamic_dropout (rate 0.25)";
  using net = sequential<input<12>, dense<16, relu>, dynamic_dropout, dense<3>>;
  static constexpr double rate = 0.25;
};

// ---- data, variables and the comparison ----
constexpr std::size_t samples = 24;

template <class Net, class V>
auto dataset(std::uint64_t seed) {
  using In = typename Net::input_type;
  std::vector<V> x(samples * In::size);
  std::vector<std::int32_t> y(samples);
  rng g(seed);
  for (std::size_t i = 0; i < samples; ++i) {
    y[i] = std::int32_t(g.below(3));
    for (std::size_t j = 0; j < In::size; ++j) x[i * In::size + j] = V(g.uniform(-1, 1) + (j % 3 == std::size_t(y[i]) ? 0.5 : 0.0));
  }
  return data::in_memory<In, sparse_labels, V>{x, y};
}

// Every variable as double, and the metadata and mask bytes (which must be equal everywhere).
struct variables {
  std::vector<double> values;
  std::string bytes;
};
template <class M>
variables variables_of(const M& m) {
  using W = typename M::variable_type;
  variables v;
  m.for_each_variable([&](const variable_ref& r) {
    if (r.kind == role::metadata || r.kind == role::mask) {
      v.bytes.append(reinterpret_cast<const char*>(r.data), r.extent * r.element_bytes);
    } else {
      const W* p = reinterpret_cast<const W*>(r.data);
      for (std::size_t i = 0; i < r.extent; ++i) v.values.push_back(double(float(p[i])));
    }
  });
  return v;
}

// max |a - b| / max(1, max |b|).
inline double difference(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return 1e300;
  double d = 0, s = 1;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) != std::isnan(b[i])) return 1e300;
    d = std::max(d, std::abs(a[i] - b[i]));
    s = std::max(s, std::abs(b[i]));
  }
  return d / s;
}
template <class T>
std::vector<double> as_double(const std::vector<T>& v) {
  std::vector<double> r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) r[i] = double(v[i]);
  return r;
}

// a == b (bits) when exact, else within tol.
template <class T>
void compare(const char* what, const std::vector<T>& got, const std::vector<T>& want, bool bits, double tol) {
  INFO(std::string(what));
  if (bits) {
    CHECK(got.size() == want.size());
    CHECK((got.size() == want.size() && std::memcmp(got.data(), want.data(), got.size() * sizeof(T)) == 0));
  } else {
    CHECK(difference(as_double(got), as_double(want)) <= tol);
  }
}

// Dropout's training draw where the backend's generator differs: the rate and the scaling.
template <class B, bool Dynamic>
void dropout_statistics() {
  using net = sequential<input<4096>, std::conditional_t<Dynamic, dynamic_dropout, dropout<0.25f>>>;
  auto m = make_model<net, float, B>(3);
  if constexpr (Dynamic) CHECK(set_dropout_rate(m, 0.25) == 1);
  const std::vector<float> x(4096, 1.0f);
  m.forward(x.data(), 1, true);
  const auto y = m.host_outputs(1);
  std::size_t zeros = 0, scaled = 0;
  for (float v : y) {
    zeros += v == 0.0f;
    scaled += std::abs(v - 1.0f / 0.75f) <= 1e-6f;
  }
  CHECK(zeros + scaled == y.size());                    // each value dropped or scaled by 1 / (1 - rate)
  CHECK(std::abs(double(zeros) / 4096 - 0.25) < 0.03);  // about 14 standard deviations: never by chance
}

// fit over the one batch of ds: one training step (the pruned network with its pruning hook).
template <class Case, class B, class M, class L, class O, class D>
auto one_step(M& m, const L& loss, O& opt, const D& ds) {
  if constexpr (std::is_same_v<Case, pruned_net> && pruning_step<B>) return fit(m, loss, opt, ds, epochs{1}, update_pruning_step{});
  else return fit(m, loss, opt, ds, epochs{1});
}

// The optimizer of Case's training step: Adam (lr 1e-2), or SGD (lr 0.1) where some true gradients are 0.
template <class Case>
auto optimizer_for() {
  if constexpr (requires { Case::zero_true_gradients; }) return sgd{0.1};
  else return adam{1e-2};
}

// The cpu<> and B models of Case::net under P: predict, one training step, predict.
template <class B, class Case, class P>
void check_case() {
  using Net = typename Case::net;
  constexpr bool bits = exact<B, P>;
  constexpr double tol = tolerance<P>();
  constexpr bool dropout_case = std::is_same_v<Case, dropout_net> || std::is_same_v<Case, dynamic_dropout_net>;
  INFO("layer type: " << std::string(Case::name) << ", policy: " << std::string(precision::policy_of_t<P>::name())
                      << ", backend: " << B::name());
  auto c = make_model<Net, P>(11);
  auto d = make_model<Net, P, B>(11);
  if constexpr (requires { Case::rate; }) {
    CHECK(set_dropout_rate(c, Case::rate) == 1);
    CHECK(set_dropout_rate(d, Case::rate) == 1);
  }
  {
    const auto vc = variables_of(c), vd = variables_of(d);
    compare("initial variables", vd.values, vc.values, bits, tol);
    CHECK(vd.bytes == vc.bytes);
  }
  using V = typename precision::policy_of_t<P>::io_type;
  const auto train = dataset<Net, V>(1);
  const auto test = dataset<Net, V>(2);
  compare("predict", predict(d, test.batch(samples)), predict(c, test.batch(samples)), bits, tol);
  if constexpr (!is_half_v<typename precision::policy_of_t<P>::variable_type>) {
    if constexpr (!dropout_case || same_dropout_draw<B>) {
      const sparse_categorical_crossentropy loss{.from_logits = true};
      auto oc = optimizer_for<Case>(), od = optimizer_for<Case>();
      const auto hc = one_step<Case, B>(c, loss, oc, train.batch(samples));
      const auto hd = one_step<Case, B>(d, loss, od, train.batch(samples));
      compare("the training step's loss", hd["loss"], hc["loss"], bits, tol);
      const auto vc = variables_of(c), vd = variables_of(d);
      compare("variables after one training step", vd.values, vc.values, bits, tol);
      CHECK(vd.bytes == vc.bytes);
      compare("predict after the step", predict(d, test.batch(7)), predict(c, test.batch(7)), bits, tol);
    } else {
      dropout_statistics<B, std::is_same_v<Case, dynamic_dropout_net>>();
    }
  }
}

template <class B, class Case>
void check_policies() {
  if constexpr (!takes_case<B, Case>) {
    MESSAGE("parity: " << B::name() << " does not run " << Case::name << " (takes_case)");
    return;
  } else {
  if constexpr (takes_policy<B, precision::float32>) check_case<B, Case, precision::float32>();
  if constexpr (takes_policy<B, precision::float64>) check_case<B, Case, precision::float64>();
  if constexpr (takes_policy<B, precision::mixed_float16>) check_case<B, Case, precision::mixed_float16>();
  if constexpr (takes_policy<B, precision::mixed_bfloat16>) check_case<B, Case, precision::mixed_bfloat16>();
  if constexpr (takes_policy<B, precision::float16>) check_case<B, Case, precision::float16>();
  if constexpr (takes_policy<B, bfloat16>) check_case<B, Case, bfloat16>();
  }
}

// A pruned model trained one step on cpu<> and on B (update_pruning_step), stripped to the bitmap, csc
// and rows layouts (its dense layer at 90 %: csc and rows take at most 1 weight in 9) (strip_pruning reads and writes both models through host views): the same
// variables and predictions.
template <class B>
void check_stripped() {
  using Net = pruned_net::net;
  constexpr bool bits = exact<B, precision::float32>;
  auto c = make_model<Net>(11);
  auto d = make_model<Net, precision::float32, B>(11);
  const auto train = dataset<Net, float>(1);
  const auto test = dataset<Net, float>(2);
  const sparse_categorical_crossentropy loss{.from_logits = true};
  adam oc{1e-2}, od{1e-2};
  fit(c, loss, oc, train.batch(samples), epochs{1}, update_pruning_step{});
  fit(d, loss, od, train.batch(samples), epochs{1}, update_pruning_step{});
  auto strip_as = [&]<class Layout>(const char* name) {
    INFO("layout: " << name << ", backend: " << B::name());
    auto sc = strip_pruning<Layout>(c);
    auto sd = strip_pruning<Layout>(d);
    const auto vc = variables_of(sc), vd = variables_of(sd);
    compare("stripped variables", vd.values, vc.values, bits, 1e-4);
    CHECK(vd.bytes == vc.bytes);
    compare("stripped predict", predict(sd, test.batch(samples)), predict(sc, test.batch(samples)), bits, 1e-4);
  };
  strip_as.template operator()<layout::bitmap>("bitmap");
  strip_as.template operator()<layout::csc>("csc");
  strip_as.template operator()<layout::rows>("rows");
}

}  // namespace parity

// One test case per layer type, each over every policy (PARITY_DENSE_CASES,
// PARITY_SPARSE_CASES and PARITY_CONV_CASES below cover every network above).
// PARITY_PROLOGUE runs first in each (tests/cuda: skip without a device).
#ifndef PARITY_PROLOGUE
#define PARITY_PROLOGUE()
#endif
#define PARITY_TEST_CASE(B, prefix, Case)                                 \
  TEST_CASE(prefix ": " #Case " under every policy matches cpu<>") {      \
    PARITY_PROLOGUE();                                                    \
    parity::check_policies<B, parity::Case>();                            \
  }
// Three groups, one translation unit each (the instantiations are many):
#define PARITY_DENSE_CASES(B, prefix)                 \
  PARITY_TEST_CASE(B, prefix, dense_net)              \
  PARITY_TEST_CASE(B, prefix, activations_net)        \
  PARITY_TEST_CASE(B, prefix, fused_activations_net)  \
  PARITY_TEST_CASE(B, prefix, reshape_net)
#define PARITY_SPARSE_CASES(B, prefix)                \
  PARITY_TEST_CASE(B, prefix, sparse_net)             \
  PARITY_TEST_CASE(B, prefix, sparse_csc_net)         \
  PARITY_TEST_CASE(B, prefix, sparse_rows_net)        \
  PARITY_TEST_CASE(B, prefix, sparse_nm_net)          \
  PARITY_TEST_CASE(B, prefix, pruned_net)
#define PARITY_CONV_CASES(B, prefix)                  \
  PARITY_TEST_CASE(B, prefix, conv_net)               \
  PARITY_TEST_CASE(B, prefix, max_pool_net)           \
  PARITY_TEST_CASE(B, prefix, average_pool_net)       \
  PARITY_TEST_CASE(B, prefix, batch_norm_net)         \
  PARITY_TEST_CASE(B, prefix, dropout_net)           \
  PARITY_TEST_CASE(B, prefix, dynamic_dropout_net)

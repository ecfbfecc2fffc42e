// layers/depthwise_conv2d.hpp: depthwise_conv2d and separable_conv2d (issue 29). Output
// shapes and parameter counts as Keras' DepthwiseConv2D / SeparableConv2D, the variables'
// names and shapes in Keras' layout, separable_conv2d equal to a depthwise_conv2d (zero
// bias) followed by a 1x1 conv2d with the same weights (outputs and gradients), the
// activation, training, a weights file round trip and the summary. (The kernels against a
// reference: tests/kernels/test_depthwise.cpp; gradients by finite differences:
// tests/gradcheck/test_gradcheck_conv_layers.cpp.)
#include <doctest/doctest.h>

#include <ctnn/layers/depthwise_conv2d.hpp>

#include <ctnn/ctnn.hpp>  // sequential, make_model, fit

#include <cmath>
#include <array>
#include <cstdint>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

using namespace ctnn;

template <class Spec, class In>
using bound = typename Spec::template bind<In, float, cpu<>>;

// Output shapes: conv2d's sizes (valid: (H - K) / S + 1; same: ceil(H / S)), channels C M or F.
static_assert(std::is_same_v<bound<depthwise_conv2d<3, 3>, shape<10, 9, 4>>::out_shape, shape<8, 7, 4>>);
static_assert(std::is_same_v<bound<depthwise_conv2d<3, 3, 2, padding::same>, shape<10, 9, 4>>::out_shape,
                             shape<5, 5, 4>>);
static_assert(std::is_same_v<bound<depthwise_conv2d<3, 2, 1, padding::valid, 3>, shape<6, 6, 2>>::out_shape,
                             shape<4, 5, 6>>);
static_assert(std::is_same_v<bound<depthwise_conv2d<3, 3>, shape<6, 6>>::out_shape, shape<4, 4, 1>>);  // rank 2
static_assert(std::is_same_v<bound<separable_conv2d<16, 3, 3, 2, padding::same, 2>, shape<9, 9, 8>>::out_shape,
                             shape<5, 5, 16>>);
// Parameters as Keras counts them: KH KW C M + C M; KH KW C M + C M F + F.
static_assert(bound<depthwise_conv2d<3, 3>, shape<10, 9, 4>>::parameter_count == 3 * 3 * 4 + 4);
static_assert(bound<depthwise_conv2d<3, 2, 1, padding::valid, 3>, shape<6, 6, 2>>::parameter_count == 3 * 2 * 2 * 3 + 6);
static_assert(bound<separable_conv2d<16, 3, 3, 2, padding::same, 2>, shape<9, 9, 8>>::parameter_count ==
              3 * 3 * 8 * 2 + 16 * 16 + 16);
static_assert(bound<depthwise_conv2d<3, 3>, shape<10, 9, 4>>::cache_per_sample == 0);
static_assert(bound<separable_conv2d<16, 3, 3, 2, padding::same, 2>, shape<9, 9, 8>>::cache_per_sample == 5 * 5 * 16);

TEST_CASE("depthwise_conv2d and separable_conv2d: names, and variables named and shaped as Keras'") {
  CHECK(depthwise_conv2d<3, 3>::name() == "depthwise_conv2d<3, 3, 1, valid>");
  CHECK(depthwise_conv2d<3, 3, 2, padding::same, 1, relu>::name() == "depthwise_conv2d<3, 3, 2, same, 1, relu>");
  CHECK(separable_conv2d<8, 3, 3, 1, padding::same, 2>::name() == "separable_conv2d<8, 3, 3, 1, same, 2>");
  using D = bound<depthwise_conv2d<3, 2, 1, padding::valid, 3>, shape<6, 6, 2>>;
  CHECK(D::buffers[0].name == std::string_view("kernel"));
  CHECK((D::buffers[0].dims == std::array<std::size_t, 4>{3, 2, 2, 3} && D::buffers[0].rank == 4));
  CHECK(D::buffers[1].name == std::string_view("bias"));
  CHECK((D::buffers[1].dims == std::array<std::size_t, 4>{6, 0, 0, 0} && D::buffers[1].rank == 1));
  using S = bound<separable_conv2d<16, 3, 3, 2, padding::same, 2>, shape<9, 9, 8>>;
  CHECK(S::buffers[0].name == std::string_view("depthwise_kernel"));
  CHECK((S::buffers[0].dims == std::array<std::size_t, 4>{3, 3, 8, 2} && S::buffers[0].rank == 4));
  CHECK(S::buffers[1].name == std::string_view("pointwise_kernel"));
  CHECK((S::buffers[1].dims == std::array<std::size_t, 4>{1, 1, 16, 16} && S::buffers[1].rank == 4));
  CHECK(S::buffers[2].name == std::string_view("bias"));
  CHECK((S::buffers[2].dims == std::array<std::size_t, 4>{16, 0, 0, 0} && S::buffers[2].rank == 1));
}

namespace {
std::vector<float> filled(std::size_t n, double k) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = float(std::sin(double(i) * k + 0.3));
  return v;
}
template <class P>
std::vector<float> as_vector(const P& p) {
  return std::vector<float>(p.begin(), p.end());
}
void close(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-5));
}
}  // namespace

TEST_CASE("separable_conv2d = depthwise_conv2d (zero bias) then a 1x1 conv2d: outputs and gradients") {
  using sep = sequential<input<7, 6, 3>, separable_conv2d<5, 3, 3, 2, padding::same, 2, ctnn::tanh>>;
  using two = sequential<input<7, 6, 3>, depthwise_conv2d<3, 3, 2, padding::same, 2>, conv2d<5, 1, 1, 1, padding::valid, ctnn::tanh>>;
  static_assert(sep::output_shape == two::output_shape);
  auto a = make_model<sep>(1);
  auto b = make_model<two>(2);
  constexpr std::size_t dk = 3 * 3 * 3 * 2, pk = 6 * 5;
  const auto pa = as_vector(a.layer_parameters<0>());
  std::vector<float> d(pa.begin(), pa.begin() + dk);
  d.resize(dk + 6, 0.0f);  // the depthwise step has no bias
  std::copy(d.begin(), d.end(), b.layer_parameters<0>().begin());
  std::copy(pa.begin() + dk, pa.end(), b.layer_parameters<1>().begin());  // [1, 1, 6, 5] then the bias
  constexpr std::size_t batch = 4, out = 4 * 3 * 5;
  const auto x = filled(batch * 7 * 6 * 3, 0.37), dy = filled(batch * out, 0.11);
  const float* ya = a.forward(x.data(), batch, true);
  const std::vector<float> out_a(ya, ya + batch * out);
  const float* yb = b.forward(x.data(), batch, true);
  close(out_a, std::vector<float>(yb, yb + batch * out));
  std::copy(dy.begin(), dy.end(), a.output_gradient());
  std::copy(dy.begin(), dy.end(), b.output_gradient());
  a.backward();
  b.backward();
  const auto ga = as_vector(a.layer_gradients<0>());
  const auto gd = as_vector(b.layer_gradients<0>()), gp = as_vector(b.layer_gradients<1>());
  close(std::vector<float>(ga.begin(), ga.begin() + dk), std::vector<float>(gd.begin(), gd.begin() + dk));
  close(std::vector<float>(ga.begin() + dk, ga.end()), gp);
  CHECK(pk + 5 == gp.size());
}

TEST_CASE("a MobileNet-style network learns: depthwise, batch norm, separable, global pooling, weights file, summary") {
  using net = sequential<input<8, 8, 2>, conv2d<8, 3, 3, 1, padding::same, relu>,
                         depthwise_conv2d<3, 3, 2, padding::same, 1, relu>, batch_norm,
                         separable_conv2d<12, 3, 3, 1, padding::same, 1, relu>, global_average_pool, dense<2>>;
  static_assert(net::parameter_count == (3 * 3 * 2 * 8 + 8) + (3 * 3 * 8 + 8) + 2 * 8 + (3 * 3 * 8 + 8 * 12 + 12) + (12 * 2 + 2));
  auto m = make_model<net>(3);
  std::vector<float> x(64 * 128);
  std::vector<std::int32_t> l(64);
  rng g(4);
  for (std::size_t i = 0; i < l.size(); ++i) {
    l[i] = std::int32_t(i % 2);
    for (std::size_t p = 0; p < 64; ++p) {
      const double stripes = l[i] ? std::sin(double(p % 8) * 1.6) : std::sin(double(p / 8) * 1.6);
      x[i * 128 + p * 2] = float(stripes + g.uniform(-0.3, 0.3));
      x[i * 128 + p * 2 + 1] = float(g.uniform(-0.3, 0.3));
    }
  }
  adam opt{0.01};
  const auto ds = data::in_memory<shape<8, 8, 2>, sparse_labels>(x, l).batch(16);
  const auto h = fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, ds, epochs{15});
  CHECK(h["loss"].back() < 0.5 * h["loss"].front());
  const auto path = std::filesystem::temp_directory_path() / "ctnn_test_depthwise.weights";
  io::save_weights(m, path);
  auto back = make_model<net>(99);
  io::load_weights(back, path);
  std::filesystem::remove(path);
  CHECK(back.predict(x.data(), 64) == m.predict(x.data(), 64));
  std::ostringstream out;
  summary<net>(out);
  CHECK(out.str().find("depthwise_conv2d<3, 3, 2, same, 1, relu>") != std::string::npos);
  CHECK(out.str().find("separable_conv2d<12, 3, 3, 1, same, 1, relu>") != std::string::npos);
  CHECK(out.str().find("(None, 4, 4, 12)") != std::string::npos);
}

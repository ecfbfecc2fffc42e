// onnx/export.hpp for the layers of issue 29 beyond the graphs: depthwise_conv2d (a Conv with
// group = C) and separable_conv2d (that Conv, then a 1x1 Conv), with depth multipliers 1 to 4,
// strides, same and valid padding, a rank-2 input, activations; conv1d (a 1-D Conv),
// layer_normalization (LayerNormalization), zero_padding2d (Pad) and up_sampling2d (Resize,
// nearest): onnxruntime computes ctnn's predictions of trained networks within 1e-5.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/onnx.hpp>

#include <cstdint>
#include <vector>

#include "onnx/onnx_util.hpp"

using namespace ctnn;
using namespace ctnn::test::onnx_util;

namespace {
using mobile = sequential<input<8, 8, 3>, depthwise_conv2d<3, 3, 1, padding::same, 2, relu>, batch_norm,
                          separable_conv2d<8, 3, 3, 2, padding::same, 1, relu>,
                          depthwise_conv2d<2, 2, 1, padding::valid, 1, ctnn::tanh>,
                          separable_conv2d<6, 3, 3, 1, padding::valid, 2>, global_average_pool, dense<3>>;
using gray = sequential<input<7, 7>, depthwise_conv2d<3, 3, 2, padding::same, 4, sigmoid>, separable_conv2d<5, 2, 2>,
                        flatten, dense<2>>;

using resized = sequential<input<5, 6, 2>, zero_padding2d<1, 2, 0, 3>, conv2d<3, 3, 3, 1, padding::valid, relu>,
                           up_sampling2d<2, 3>, layer_normalization<>, max_pool2d<2>, flatten, dense<2>>;
using sequence = sequential<input<12, 3>, conv1d<4, 3, 2, padding::same, relu>, layer_normalization<1e-2>,
                            conv1d<5, 2, 1, padding::valid, ctnn::tanh>, flatten, dense<2>>;

template <class Net, Shape In>
model<Net> trained(std::uint64_t seed) {
  auto m = make_model<Net>(seed);
  const auto x = random_inputs<In>(48, seed + 1);
  std::vector<std::int32_t> y(48);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = std::int32_t(i % 2);
  data::in_memory<In, sparse_labels> d(std::vector<float>(x.begin(), x.end()), y);
  adam opt{0.01};
  fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, d.batch(16), epochs{3});
  return m;
}
}  // namespace

TEST_CASE("export_onnx: depthwise_conv2d and separable_conv2d run in onnxruntime as in ctnn (within 1e-5)") {
  temp_dir d("onnx_layers");
  auto a = trained<mobile, shape<8, 8, 3>>(3);
  export_onnx(a, d.path / "mobile.onnx");
  const auto x = random_inputs<shape<8, 8, 3>>(9, 11);
  xt::xtensor<float, 2> theirs;
  if (!onnxruntime_predict(d.path / "mobile.onnx", x, theirs, d.path)) return;
  REQUIRE(theirs.dimension() == 2);
  CHECK(theirs.shape()[0] == 9);
  CHECK(max_abs_diff(theirs, ctnn::predict(a, x)) < 1e-5);

  auto b = trained<gray, shape<7, 7>>(5);
  export_onnx(b, d.path / "gray.onnx");
  const auto xg = random_inputs<shape<7, 7>>(6, 12);
  if (!onnxruntime_predict(d.path / "gray.onnx", xg, theirs, d.path)) return;
  CHECK(max_abs_diff(theirs, ctnn::predict(b, xg)) < 1e-5);
}

TEST_CASE("export_onnx: conv1d, layer_normalization, zero_padding2d and up_sampling2d run in onnxruntime as in ctnn") {
  temp_dir d("onnx_layers");
  xt::xtensor<float, 2> theirs;
  auto a = trained<resized, shape<5, 6, 2>>(7);
  export_onnx(a, d.path / "resized.onnx");
  const auto x = random_inputs<shape<5, 6, 2>>(7, 13);
  if (!onnxruntime_predict(d.path / "resized.onnx", x, theirs, d.path)) return;
  CHECK(max_abs_diff(theirs, ctnn::predict(a, x)) < 1e-5);

  auto b = trained<sequence, shape<12, 3>>(9);
  export_onnx(b, d.path / "sequence.onnx");
  const auto xs = random_inputs<shape<12, 3>>(8, 14);
  if (!onnxruntime_predict(d.path / "sequence.onnx", xs, theirs, d.path)) return;
  CHECK(max_abs_diff(theirs, ctnn::predict(b, xs)) < 1e-5);
}

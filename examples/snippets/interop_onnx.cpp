// ONNX: export a model for onnxruntime (or any ONNX runtime), import weights into a matching network.
// Link ctnn::onnx (found when Debian's libonnx-dev and libprotobuf-dev are installed).
#include <ctnn/ctnn.hpp>
#include <ctnn/onnx.hpp>
#include <ctnn/quantization/convert.hpp>
#include <ctnn/xtensor.hpp>

#include <cstdio>
#include <filesystem>
#include <vector>

using cnn = ctnn::sequential<ctnn::input<8, 8, 1>, ctnn::conv2d<4, 3, 3, 1, ctnn::padding::same, ctnn::relu>,
                             ctnn::batch_norm, ctnn::max_pool2d<2>, ctnn::dropout<0.25>, ctnn::flatten,
                             ctnn::dense<10, ctnn::softmax>>;

int main() {
  auto m = ctnn::make_model<cnn>(1);
  const auto file = std::filesystem::temp_directory_path() / "ctnn_snippet.onnx";
  ctnn::export_onnx(m, file);  // input "input" (batch, 8, 8, 1), output "output" (batch, 10)

  auto other = ctnn::make_model<cnn>(2);
  ctnn::import_onnx(other, file);  // the same graph: every weight and moving statistic is copied

  // a network that computes something else is refused, naming the first difference
  using wider = ctnn::sequential<ctnn::input<8, 8, 1>, ctnn::conv2d<6, 3, 3, 1, ctnn::padding::same, ctnn::relu>,
                                 ctnn::batch_norm, ctnn::max_pool2d<2>, ctnn::dropout<0.25>, ctnn::flatten,
                                 ctnn::dense<10, ctnn::softmax>>;
  auto w = ctnn::make_model<wider>(0);
  try {
    ctnn::import_onnx(w, file);
  } catch (const ctnn::io_error& e) {
    std::printf("%s\n", e.what());  // ...: layer 1 (conv2d<6, ...>): Conv 'layer1_conv_1' (node 1) has a weight of 4 x 1 x 3 x 3; ...
  }
  const xt::xtensor<float, 4> x = xt::ones<float>({2, 8, 8, 1});
  const bool same = ctnn::predict(other, x) == ctnn::predict(m, x);
  std::filesystem::remove(file);
  std::printf("imported model predicts the same: %s\n", same ? "yes" : "no");

  // an int8 model (docs/quantization.md) is written in QDQ form: int8 kernels and int32 biases as
  // initializers, QuantizeLinear/DequantizeLinear pairs with the calibrated scales and zero points
  using mlp = ctnn::sequential<ctnn::input<8>, ctnn::dense<16, ctnn::relu>, ctnn::dense<4>>;
  auto f = ctnn::make_model<mlp>(3);
  std::vector<float> calibration(64 * 8);
  for (std::size_t i = 0; i < calibration.size(); ++i) calibration[i] = float(i % 17) / 8.0f - 1.0f;
  auto q = ctnn::quantize_full_integer(f, calibration.data(), 64);
  ctnn::export_onnx(q, file);  // onnxruntime fuses each layer into its int8 QGemm
  std::filesystem::remove(file);
  return same ? 0 : 1;
}

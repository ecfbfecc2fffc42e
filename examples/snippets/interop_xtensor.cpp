// xtensor at the edges: train on xtensor arrays, predict, evaluate with a report, read and write weights.
#include <ctnn/ctnn.hpp>
#include <ctnn/npy.hpp>
#include <ctnn/xtensor.hpp>
#include <xtensor/xview.hpp>

#include <cstdio>
#include <filesystem>

using net = ctnn::sequential<ctnn::input<2, 2>, ctnn::flatten, ctnn::dense<8, ctnn::relu>, ctnn::dense<3>>;

int main() {
  // 300 samples of 2x2 values; the class is the index of the largest of the first three values
  xt::xtensor<float, 3> x = xt::xtensor<float, 3>::from_shape({300, 2, 2});
  xt::xtensor<int, 1> y = xt::xtensor<int, 1>::from_shape({300});
  ctnn::rng g(1);
  for (auto& v : x) v = float(g.uniform(-1, 1));
  for (std::size_t i = 0; i < 300; ++i) {
    const float* s = &x(i, 0, 0);
    y(i) = s[0] >= s[1] && s[0] >= s[2] ? 0 : s[1] >= s[2] ? 1 : 2;
  }

  auto m = ctnn::make_model<net>(42);
  const auto train = ctnn::data::from_xtensor<ctnn::shape<2, 2>>(x, y).shuffle(1000, 7).batch(16);
  ctnn::adam<> opt{0.01};
  const ctnn::sparse_categorical_crossentropy loss{true};  // the model outputs logits
  ctnn::fit(m, loss, opt, train, ctnn::epochs{20});

  // predict on a batch: (n, 2, 2) in, (n, 3) out; one typed sample: predict_sample
  const xt::xtensor<float, 2> logits = ctnn::predict(m, x);
  const ctnn::input_tensor_t<decltype(m)> one = xt::view(x, 0, xt::all(), xt::all());
  const ctnn::output_tensor_t<decltype(m)> out = ctnn::predict_sample(m, one);
  std::printf("sample 0: logits %.3f %.3f %.3f, label %d\n", out(0), out(1), out(2), y(0));

  // probabilities from the logits model, on a whole dataset
  const auto proba = ctnn::predict_proba(m, ctnn::data::from_xtensor<ctnn::shape<2, 2>>(x, y).batch(64));
  std::printf("P(class %d | sample 0) = %.3f\n", y(0), proba[std::size_t(y(0))]);

  // Keras' evaluate(x, y) with a confusion matrix and per-class precision, recall and F1
  ctnn::classification_report report;
  const auto logs = ctnn::evaluate(m, loss, x, y, ctnn::sparse_categorical_accuracy{}, report);
  std::printf("accuracy %.3f, macro F1 %.3f\n%s", logs["sparse_categorical_accuracy"], logs["macro_f1"],
              report.str({"first", "second", "third"}).c_str());

  // variables as shaped, writable views; every variable to and from .npy files
  auto kernel = ctnn::variable<1, "kernel">(m);  // layer 1 (dense<8, relu>), 4 x 8
  std::printf("kernel: %zu x %zu, logits[0][0] %.3f\n", kernel.shape()[0], kernel.shape()[1], logits(0, 0));
  const auto dir = std::filesystem::temp_directory_path() / "ctnn_snippet_npy";
  ctnn::save_variables_npy(m, dir);  // dir/layer1_kernel.npy, layer1_bias.npy, layer2_kernel.npy, ...
  ctnn::save_npy(dir / "logits.npy", logits);
  auto copy = ctnn::make_model<net>(0);
  ctnn::load_variables_npy(copy, dir);
  const bool same = ctnn::predict(copy, x) == logits;
  std::filesystem::remove_all(dir);
  std::printf("reloaded model predicts the same: %s\n", same ? "yes" : "no");
  return same ? 0 : 1;
}

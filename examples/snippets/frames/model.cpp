// Frame for documentation blocks that use a trained model and its data:
// `model` (the getting-started MLP), `loss`, `opt`, `test` (batched
// Fashion-MNIST), and `x`, `n` (n samples of 28 x 28 values).
#include <ctnn/ctnn.hpp>

#include <vector>

using net = ctnn::sequential<ctnn::input<28, 28>, ctnn::flatten,
                             ctnn::dense<256, ctnn::relu>, ctnn::dense<10>>;

int main() {
  auto model = ctnn::make_model<net>(/*seed=*/42);
  ctnn::sparse_categorical_crossentropy loss{.from_logits = true};
  ctnn::adam opt{1e-3};
  auto test = ctnn::data::fashion_mnist::test().batch(1000);
  const std::size_t n = 4;
  std::vector<float> x(n * 28 * 28);
// @snippet@
}

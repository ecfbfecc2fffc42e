// Frame for documentation blocks that use a trained model and its data:
// `model` (the getting-started MLP), `loss`, and batched Fashion-MNIST
// `train` and `test` (no optimizer: the block makes one).
#include <ctnn/ctnn.hpp>

#include <vector>

using net = ctnn::sequential<ctnn::input<28, 28>, ctnn::flatten,
                             ctnn::dense<256, ctnn::relu>, ctnn::dense<10>>;

int main() {
  auto model = ctnn::make_model<net>(/*seed=*/42);
  ctnn::sparse_categorical_crossentropy loss{.from_logits = true};
  auto train = ctnn::data::fashion_mnist::train().shuffle(1).batch(64);
  auto test = ctnn::data::fashion_mnist::test().batch(1000);
// @snippet@
}

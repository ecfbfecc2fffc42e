// docs/pruning.md's first example: a pruned network type, retraining with the
// pruning hook, and stripping to the compact type.
#include <ctnn/ctnn.hpp>
#include <ctnn/pruning.hpp>

#include <cmath>
#include <cstdio>

// Prune the first hidden layer from 0 to 80 % between steps 0 and 800
// (a mask update every 100 steps; one epoch of 938 steps gets past it), the
// second to 2:4.
using net = ctnn::sequential<
    ctnn::input<28, 28>, ctnn::flatten,
    ctnn::prune_low_magnitude<ctnn::dense<256, ctnn::relu>, ctnn::polynomial_sparsity<0.0, 0.8, 0, 800>>,
    ctnn::prune_low_magnitude<ctnn::dense<128, ctnn::relu>, ctnn::constant_sparsity<0.0>, ctnn::n_of_m<2, 4>>,
    ctnn::dense<10>>;

// The stripped type is known before anything runs.
using compact = ctnn::stripped_t<net, ctnn::layout::bitmap>;  // strip_pruning(model): bitmap here (csc from 88.9 %)
static_assert(std::is_same_v<compact, ctnn::sequential<ctnn::input<28, 28>, ctnn::flatten,
                                                       ctnn::sparse_dense<784, 256, 40141, ctnn::relu>,
                                                       ctnn::sparse_dense<256, 128, 16384, ctnn::relu>,
                                                       ctnn::dense<10>>>);
static_assert(compact::parameter_count == 40141 + 256 + 16384 + 128 + 128 * 10 + 10);

int main() {
  const auto train = ctnn::data::fashion_mnist::train().shuffle(1).batch(64);
  auto model = ctnn::make_model<net>(42);
  ctnn::adam opt{1e-3};
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};
  // update_pruning_step is required, as TFMOT's UpdatePruningStep callback is
  auto hist = ctnn::fit(model, loss, opt, train, ctnn::epochs{1}, ctnn::update_pruning_step{});
  // hist["sparsity_layer_2"] and hist["sparsity_layer_3"]: the sparsity after each epoch
  auto small = ctnn::strip_pruning<ctnn::layout::bitmap>(model);  // a model<compact>
  ctnn::io::save_weights(small, "pruned.weights");
  // 40141 of 200,704 weights kept (a rounded count): 0.799999, not exactly 0.8
  const double sparsity = hist["sparsity_layer_2"].back();
  std::printf("layer 2: sparsity %.6f, layer 3: %.6f\n", sparsity, hist["sparsity_layer_3"].back());
  return std::abs(sparsity - 0.8) < 1e-4 ? 0 : 1;
}

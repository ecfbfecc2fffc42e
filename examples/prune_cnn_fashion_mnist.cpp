// Channel (filter) pruning of a Fashion-MNIST CNN, as docs/pruning.md
// describes: train the CNN, then prune half the filters of its second
// convolution while retraining, strip (the convolution becomes a plain
// narrower conv2d, and its batch_norm and the dense layer after flatten
// shrink with it), and print test accuracy and parameter counts against a
// control: the unpruned CNN trained the same number of epochs more.
//   prune_cnn_fashion_mnist [epochs=2] [retrain_epochs=2] [data_dir] [small=0]
// small=1 runs a narrower CNN (conv16, conv32, dense64) for slow machines.
// retrain_epochs must be 1 or more: the schedule reaches its final
// sparsity at step 800 (938 steps per epoch at batch 64).
#include <ctnn/ctnn.hpp>
#include <ctnn/pruning.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iostream>

#include "prune_common.hpp"

namespace {

// The CNN of examples/fashion_mnist_cnn.cpp (C1 = 32, C2 = 64, D = 128), with
// the second convolution's filters pruned by Pruned = prune_low_magnitude<..., units>.
template <std::size_t C1, std::size_t C2, long long D, template <class> class Wrap>
using cnn = ctnn::sequential<ctnn::input<28, 28>,
                             ctnn::conv2d<C1, 3, 3, 1, ctnn::padding::valid, ctnn::relu>,  // 26x26xC1
                             ctnn::max_pool2d<2>,                                          // 13x13xC1
                             ctnn::batch_norm,
                             Wrap<ctnn::conv2d<C2, 3, 3, 1, ctnn::padding::valid, ctnn::relu>>,  // 11x11xC2
                             ctnn::max_pool2d<2>,                                                // 5x5xC2
                             ctnn::batch_norm,
                             ctnn::flatten,
                             ctnn::dense<D, ctnn::relu>,
                             ctnn::dropout<0.5f>,
                             ctnn::dense<10>>;

template <class L>
using as_is = L;
// Half of the filters, from 0 to 50 % over the first 800 steps, a mask update every 100 steps.
template <class L>
using half_filters = ctnn::prune_low_magnitude<L, ctnn::polynomial_sparsity<0.0, 0.5, 0, 800, 3, 100>, ctnn::units>;

template <class Dense, class Pruned>
int run(std::size_t epochs_n, std::size_t retrain, const std::filesystem::path& dir) {
  using stripped = ctnn::stripped_t<Pruned>;
  static_assert(stripped::parameter_count < 0.6 * Dense::parameter_count);  // >= 40 % fewer parameters
  const auto train = ctnn::data::fashion_mnist::train(dir).shuffle(/*seed=*/1).batch(64);
  const auto test = ctnn::data::fashion_mnist::test(dir).batch(1000);
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};
  const ctnn::sparse_categorical_accuracy acc;
  auto accuracy = [&](auto& m) { return ctnn::evaluate(m, loss, test, acc)["sparse_categorical_accuracy"]; };
  const auto t0 = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };

  // 1. the CNN
  auto dense = ctnn::make_model<Dense>(42);
  ctnn::adam opt{1e-3};
  ctnn::fit(dense, loss, opt, train, ctnn::epochs{epochs_n}, acc, ctnn::epoch_logger{});
  const double dense_acc = accuracy(dense);
  std::printf("CNN, %zu epochs: test accuracy %.4f (%.0f s)\n", epochs_n, dense_acc, seconds());

  // 2. the control: the same CNN trained retrain epochs more
  auto control = prune_example::control(dense, train, loss, acc, retrain);
  const double control_acc = accuracy(control);
  std::printf("control, %zu + %zu epochs: test accuracy %.4f (%.0f s)\n", epochs_n, retrain, control_acc, seconds());

  // 3. from the trained CNN: half the second convolution's filters pruned while retraining, then stripped
  auto pruned = prune_example::retrain_pruned<Pruned>(dense, train, loss, acc, retrain);
  auto small = ctnn::strip_pruning(pruned);
  std::printf("filter-pruned, %zu + %zu epochs (%.0f s)\n", epochs_n, retrain, seconds());
  prune_example::print_against_control("test accuracy", accuracy(pruned), accuracy(small), control_acc);
  std::printf("parameters (compile-time): CNN %zu, stripped %zu (%.1f %% fewer)\n", Dense::parameter_count,
              stripped::parameter_count, 100.0 * (1 - double(stripped::parameter_count) / Dense::parameter_count));
  ctnn::summary<stripped>();
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  const std::size_t epochs_n = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 2;
  const std::size_t retrain = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 2;
  const auto dir = argc > 3 ? std::filesystem::path(argv[3]) : ctnn::data::fashion_mnist::default_dir();
  const bool small = argc > 4 && std::strtoul(argv[4], nullptr, 10) != 0;
  if (retrain < 1) throw std::invalid_argument("retrain_epochs must be >= 1 (the schedule ends at step 800)");
  if (small) return run<cnn<16, 32, 64, as_is>, cnn<16, 32, 64, half_filters>>(epochs_n, retrain, dir);
  return run<cnn<32, 64, 128, as_is>, cnn<32, 64, 128, half_filters>>(epochs_n, retrain, dir);
} catch (const std::exception& e) {
  std::cerr << "prune_cnn_fashion_mnist: " << e.what() << "\n";
  return 1;
}

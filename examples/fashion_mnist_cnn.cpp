// Trains a small CNN on Fashion-MNIST: conv32-pool-conv64-pool-dense128-dense10
// with batch normalization and dropout, and prints per-epoch loss and accuracy
// and the final test accuracy.
//   fashion_mnist_cnn [epochs=12] [data_dir]
#include <ctnn/ctnn.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>

using net = ctnn::sequential<ctnn::input<28, 28>,
                             ctnn::conv2d<32, 3, 3, 1, ctnn::padding::valid, ctnn::relu>,  // 28x28 as 28x28x1 -> 26x26x32
                             ctnn::max_pool2d<2>,                                          // 13x13x32
                             ctnn::batch_norm,
                             ctnn::conv2d<64, 3, 3, 1, ctnn::padding::valid, ctnn::relu>,  // 11x11x64
                             ctnn::max_pool2d<2>,                                          // 5x5x64
                             ctnn::batch_norm,
                             ctnn::flatten,
                             ctnn::dense<128, ctnn::relu>,
                             ctnn::dropout<0.5f>,
                             ctnn::dense<10>>;  // logits

static_assert(net::output_shape == ctnn::shape<10>{});
static_assert(net::parameter_count == (9 * 32 + 32) + 2 * 32 + (9 * 32 * 64 + 64) + 2 * 64 + (1600 * 128 + 128) +
                                          (128 * 10 + 10));
static_assert(net::state_count == 2 * 32 + 2 * 64);  // moving mean and variance

int main(int argc, char** argv) try {
  const std::size_t n_epochs = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 12;
  const auto dir = argc > 2 ? std::filesystem::path(argv[2]) : ctnn::data::fashion_mnist::default_dir();

  const auto train = ctnn::data::fashion_mnist::train(dir).shuffle(/*seed=*/1).batch(64);
  const auto test = ctnn::data::fashion_mnist::test(dir).batch(1000);
  std::cout << "Fashion-MNIST: " << train.size() << " training and " << test.size() << " test images\n";
  ctnn::summary<net>();

  auto model = ctnn::make_model<net>(/*seed=*/42);
  ctnn::adam opt{ctnn::exponential_decay{1e-3, 2000, 0.8, /*staircase=*/false}};
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};

  const auto t0 = std::chrono::steady_clock::now();
  auto hist = ctnn::fit(model, loss, opt, train, ctnn::epochs{n_epochs}, ctnn::sparse_categorical_accuracy{},
                        ctnn::validation_data(test), ctnn::epoch_logger{});
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const auto result = ctnn::evaluate(model, loss, test, ctnn::sparse_categorical_accuracy{});
  std::printf("trained %zu epochs in %.1f s\n", n_epochs, secs);
  std::printf("test loss: %.4f  test accuracy: %.4f\n", result["loss"], result["sparse_categorical_accuracy"]);
  (void)hist;
  return 0;
} catch (const std::exception& e) {
  std::cerr << "fashion_mnist_cnn: " << e.what() << "\n";
  return 1;
}

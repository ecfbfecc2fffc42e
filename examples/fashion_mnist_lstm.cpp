// Trains an LSTM on Fashion-MNIST, each image read as 28 time steps of 28 pixels
// (the layout of Keras' "MNIST with an RNN" examples): lstm<128> then dense<10>,
// RMSprop (Keras' usual choice for recurrent networks), and prints per-epoch
// loss and accuracy and the final test accuracy. docs/sequences.md.
//   fashion_mnist_lstm [epochs=10] [training images=60000] [data_dir]
#include <ctnn/ctnn.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>

using net = ctnn::sequential<ctnn::input<28, 28>,  // 28 steps of 28 features
                             ctnn::lstm<128>,        // the last state, <128>
                             ctnn::dense<10>>;       // logits

static_assert(net::output_shape == ctnn::shape<10>{});
static_assert(net::parameter_count == 4 * (128 * (28 + 128) + 128) + 128 * 10 + 10);  // Keras: 80,384 + 1,290

int main(int argc, char** argv) try {
  const std::size_t n_epochs = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 10;
  const std::size_t n_train = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 60000;
  const auto dir = argc > 3 ? std::filesystem::path(argv[3]) : ctnn::data::fashion_mnist::default_dir();

  const auto train = ctnn::data::fashion_mnist::train(dir).take(n_train).shuffle(/*seed=*/1).batch(64);
  const auto test = ctnn::data::fashion_mnist::test(dir).batch(1000);
  std::cout << "Fashion-MNIST: " << train.size() << " training and " << test.size() << " test images\n";
  ctnn::summary<net>();

  auto model = ctnn::make_model<net>(/*seed=*/42);
  ctnn::rmsprop opt{1e-3};
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};

  const auto t0 = std::chrono::steady_clock::now();
  ctnn::fit(model, loss, opt, train, ctnn::epochs{n_epochs}, ctnn::sparse_categorical_accuracy{},
            ctnn::validation_data(test), ctnn::epoch_logger{});
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const auto result = ctnn::evaluate(model, loss, test, ctnn::sparse_categorical_accuracy{});
  std::printf("trained %zu epochs in %.1f s\n", n_epochs, secs);
  std::printf("test loss: %.4f  test accuracy: %.4f\n", result["loss"], result["sparse_categorical_accuracy"]);
  return 0;
} catch (const std::exception& e) {
  std::cerr << "fashion_mnist_lstm: " << e.what() << "\n";
  return 1;
}

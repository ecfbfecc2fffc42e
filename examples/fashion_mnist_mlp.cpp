// Trains dense<256, relu> -> dense<128, relu> -> dense<10> on Fashion-MNIST
// and prints per-epoch loss and accuracy and the final test accuracy.
//   fashion_mnist_mlp [epochs=15] [data_dir] [history.csv]
// An empty data_dir is the default one. history.csv receives csv_logger's
// per-epoch logs (scripts/plot_history.sh draws them). The same network
// trained under mixed precision is examples/fashion_mnist_mixed_precision.cpp.
#include <ctnn/ctnn.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>

using net = ctnn::sequential<ctnn::input<28, 28>,
                             ctnn::flatten,
                             ctnn::dense<256, ctnn::relu>,
                             ctnn::dense<128, ctnn::relu>,
                             ctnn::dense<10>>;  // logits

static_assert(net::output_shape == ctnn::shape<10>{});
static_assert(net::parameter_count == 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);

// csv_logger when a file name was given, nothing otherwise.
struct optional_csv {
  ctnn::csv_logger log;
  template <class Ctx>
  void on_train_begin(Ctx& ctx) {
    if (!log.filename.empty()) log.on_train_begin(ctx);
  }
  template <class Ctx>
  void on_epoch_end(Ctx& ctx) {
    if (!log.filename.empty()) log.on_epoch_end(ctx);
  }
};

int main(int argc, char** argv) try {
  const std::size_t n_epochs = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 15;
  const auto dir = argc > 2 && *argv[2] ? std::filesystem::path(argv[2]) : ctnn::data::fashion_mnist::default_dir();
  optional_csv history_file{{.filename = argc > 3 ? argv[3] : ""}};

  const auto train = ctnn::data::fashion_mnist::train(dir).shuffle(/*seed=*/1).batch(64);
  const auto test = ctnn::data::fashion_mnist::test(dir).batch(1000);
  std::cout << "Fashion-MNIST: " << train.size() << " training and " << test.size() << " test images\n";
  ctnn::summary<net>();

  auto model = ctnn::make_model<net>(/*seed=*/42);
  ctnn::adam opt{ctnn::exponential_decay{1e-3, 5000, 0.7, /*staircase=*/false}};
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};

  auto hist = ctnn::fit(model, loss, opt, train, ctnn::epochs{n_epochs}, ctnn::sparse_categorical_accuracy{},
                        ctnn::validation_data(test), ctnn::epoch_logger{}, history_file);

  const auto result = ctnn::evaluate(model, loss, test, ctnn::sparse_categorical_accuracy{});
  std::printf("test loss: %.4f  test accuracy: %.4f\n", result["loss"], result["sparse_categorical_accuracy"]);
  (void)hist;
  return 0;
} catch (const std::exception& e) {
  std::cerr << "fashion_mnist_mlp: " << e.what() << "\n";
  return 1;
}

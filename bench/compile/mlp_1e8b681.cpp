// bench/compile/mlp_1e8b681.cpp — the MLP example as it was at 1e8b681 (before
// the redesign of issue 9), kept so that its compile time and memory can be
// measured against any tree: bench/compile_memory.sh compiles this same
// program against the 1e8b681 tree and against the current one. The code
// below is `git show 1e8b681:examples/fashion_mnist_mlp.cpp` unchanged (no
// name it uses has been renamed since); only this comment is new.
// Trains dense<256, relu> -> dense<128, relu> -> dense<10> on Fashion-MNIST
// and prints per-epoch loss and accuracy and the final test accuracy.
//   fashion_mnist_mlp [epochs=15] [data_dir]
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

int main(int argc, char** argv) try {
  const std::size_t n_epochs = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 15;
  const auto dir = argc > 2 ? std::filesystem::path(argv[2]) : ctnn::data::fashion_mnist::default_dir();

  const auto train = ctnn::data::fashion_mnist::train(dir).shuffle(/*seed=*/1).batch(64);
  const auto test = ctnn::data::fashion_mnist::test(dir).batch(1000);
  std::cout << "Fashion-MNIST: " << train.size() << " training and " << test.size() << " test images\n";
  ctnn::summary<net>();

  auto model = ctnn::make_model<net>(/*seed=*/42);
  ctnn::adam opt{ctnn::exponential_decay{1e-3, 5000, 0.7, /*staircase=*/false}};
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};

  auto hist = ctnn::fit(model, loss, opt, train, ctnn::epochs{n_epochs}, ctnn::sparse_categorical_accuracy{},
                        ctnn::validation_data(test), ctnn::epoch_logger{});

  const auto result = ctnn::evaluate(model, loss, test, ctnn::sparse_categorical_accuracy{});
  std::printf("test loss: %.4f  test accuracy: %.4f\n", result["loss"], result["sparse_categorical_accuracy"]);
  (void)hist;
  return 0;
} catch (const std::exception& e) {
  std::cerr << "fashion_mnist_mlp: " << e.what() << "\n";
  return 1;
}

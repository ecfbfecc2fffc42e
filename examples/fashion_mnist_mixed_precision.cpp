// The MLP of examples/fashion_mnist_mlp.cpp trained under a mixed-precision
// policy (docs/mixed-precision.md): float16 or bfloat16 compute, float32
// variables and optimizer slots, dynamic loss scaling. Prints per-epoch loss
// and accuracy, the final test accuracy, the loss scale and the skipped steps.
//   fashion_mnist_mixed_precision [epochs=10] [data_dir] [precision=mixed_float16]
// An empty data_dir is the default one. precision: mixed_float16,
// mixed_bfloat16 or float32 (the reference, no loss scaling).
#include <ctnn/mixed_precision.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <stdexcept>
#include <string>

using net = ctnn::sequential<ctnn::input<28, 28>,
                             ctnn::flatten,
                             ctnn::dense<256, ctnn::relu>,
                             ctnn::dense<128, ctnn::relu>,
                             ctnn::dense<10>>;  // logits

template <class Precision, class Train, class Test, class... Extras>
void run(std::size_t n_epochs, const Train& train, const Test& test, Extras&&... extras) {
  auto model = ctnn::make_model<net, Precision>(/*seed=*/42);
  ctnn::adam opt{ctnn::exponential_decay{1e-3, 5000, 0.7, /*staircase=*/false}};
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};

  auto hist = ctnn::fit(model, loss, opt, train, ctnn::epochs{n_epochs}, ctnn::sparse_categorical_accuracy{},
                        ctnn::validation_data(test), ctnn::epoch_logger{}, extras...);

  const auto result = ctnn::evaluate(model, loss, test, ctnn::sparse_categorical_accuracy{});
  std::printf("test loss: %.4f  test accuracy: %.4f\n", result["loss"], result["sparse_categorical_accuracy"]);
  (void)hist;
}

int main(int argc, char** argv) try {
  const std::size_t n_epochs = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 10;
  const auto dir = argc > 2 && *argv[2] ? std::filesystem::path(argv[2]) : ctnn::data::fashion_mnist::default_dir();
  const std::string precision = argc > 3 && *argv[3] ? argv[3] : "mixed_float16";

  const auto train = ctnn::data::fashion_mnist::train(dir).shuffle(/*seed=*/1).batch(64);
  const auto test = ctnn::data::fashion_mnist::test(dir).batch(1000);
  std::cout << "Fashion-MNIST: " << train.size() << " training and " << test.size() << " test images, precision "
            << precision << "\n";

  ctnn::loss_scale scale;  // dynamic: 2^15, as Keras' LossScaleOptimizer
  if (precision == "mixed_float16") run<ctnn::precision::mixed_float16>(n_epochs, train, test, scale);
  else if (precision == "mixed_bfloat16") run<ctnn::precision::mixed_bfloat16>(n_epochs, train, test, scale);
  else if (precision == "float32") run<ctnn::precision::float32>(n_epochs, train, test);
  else throw std::invalid_argument("unknown precision '" + precision + "' (mixed_float16, mixed_bfloat16, float32)");
  if (precision != "float32")
    std::printf("loss scale at the end: %g, skipped steps: %lld\n", scale.scale(), static_cast<long long>(scale.skipped_steps()));
  return 0;
} catch (const std::exception& e) {
  std::cerr << "fashion_mnist_mixed_precision: " << e.what() << "\n";
  return 1;
}

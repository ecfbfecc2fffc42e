// The MLP and CNN examples' training path on generated data, for instruction counts of
// fit itself (issue 30: moving fit's cold code out of the program must not move its run time):
// a Fashion-MNIST-shaped dataset (data::fashion_mnist::dataset) of N samples, one epoch of
// fit with a metric, validation data and the epoch log, then evaluate. Run under callgrind
// with CTNN_NUM_THREADS=1, built header-only and with CTNN_COMPILED_KERNELS (and the
// compiled part's object); docs/performance.md, "Compile time and memory".
//   fit_run mlp|cnn [samples=1024]
#include <ctnn/ctnn.hpp>

#include "../bench_nets.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using ctnn_bench::cnn;  // bench_nets.hpp: the benchmarks' networks
using ctnn_bench::mlp;

template <class Net>
double run(std::size_t n) {
  std::vector<float> x(n * 784);
  std::vector<std::int32_t> y(n);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float((i * 2654435761u) % 256) / 255.0f;
  for (std::size_t i = 0; i < n; ++i) y[i] = std::int32_t((i * 7) % 10);
  const ctnn::data::fashion_mnist::dataset all(std::move(x), std::move(y));
  const auto train = all.take(n - n / 4).shuffle(1).batch(64);
  const auto test = all.skip(n - n / 4).batch(256);
  auto model = ctnn::make_model<Net>(42);
  ctnn::adam opt{ctnn::exponential_decay{1e-3, 5000, 0.7, false}};
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};
  ctnn::fit(model, loss, opt, train, ctnn::epochs{1}, ctnn::sparse_categorical_accuracy{},
            ctnn::validation_data(test), ctnn::epoch_logger{});
  return ctnn::evaluate(model, loss, test, ctnn::sparse_categorical_accuracy{})["loss"];
}

int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "mlp";
  const std::size_t n = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 1024;
  std::printf("loss %.6f\n", which == "cnn" ? run<cnn>(n) : run<mlp>(n));
}

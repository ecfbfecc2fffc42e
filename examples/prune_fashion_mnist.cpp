// Prunes the Fashion-MNIST MLP (784 -> 256 relu -> 128 relu -> 10) as
// docs/pruning.md describes: train it (on the first 54,000 training images),
// print the sensitivity table (on the other 6,000, held out), prune the
// two hidden layers to 80 % with a polynomial schedule (and, separately, to
// 2:4, all three layers to 80 % with one global magnitude threshold, and
// the hidden layers to 80 % in 1x16 blocks, stripped to layout::block<1, 16>)
// while retraining, strip, and print accuracy before and after,
// parameter bytes, weights-file bytes (raw and gzip-compressed) and
// inference time dense vs stripped.
// Speed ratios are dense time / stripped time (above 1: the stripped model is faster).
//   prune_fashion_mnist [dense_epochs=3] [retrain_epochs=2] [data_dir]
// retrain_epochs must be 2 or more: the schedule reaches 80 % at step 1600
// (844 steps per epoch at batch 64).
#include <ctnn/ctnn.hpp>
#include <ctnn/pruning.hpp>
#include <zlib.h>

#include "prune_common.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iostream>
#include <vector>

namespace {

using mlp = ctnn::sequential<ctnn::input<28, 28>, ctnn::flatten, ctnn::dense<256, ctnn::relu>,
                             ctnn::dense<128, ctnn::relu>, ctnn::dense<10>>;
template <class Schedule, class Pattern = ctnn::unstructured>
using pruned = ctnn::sequential<ctnn::input<28, 28>, ctnn::flatten,
                                ctnn::prune_low_magnitude<ctnn::dense<256, ctnn::relu>, Schedule, Pattern>,
                                ctnn::prune_low_magnitude<ctnn::dense<128, ctnn::relu>, Schedule, Pattern>,
                                ctnn::dense<10>>;
// From 0 to 80 % over the first 1600 steps (TFMOT's tutorial: 1800), a mask update every 100 steps
using to80 = pruned<ctnn::polynomial_sparsity<0.0, 0.8, 0, 1600, 3, 100>>;
using two_of_four = pruned<ctnn::constant_sparsity<0.0>, ctnn::n_of_m<2, 4>>;
// Global magnitude: one threshold across all three dense layers (the output layer included), 80 % overall
using global80_schedule = ctnn::polynomial_sparsity<0.0, 0.8, 0, 1600, 3, 100>;
using global80 = ctnn::sequential<
    ctnn::input<28, 28>, ctnn::flatten,
    ctnn::prune_low_magnitude<ctnn::dense<256, ctnn::relu>, global80_schedule, ctnn::global_magnitude>,
    ctnn::prune_low_magnitude<ctnn::dense<128, ctnn::relu>, global80_schedule, ctnn::global_magnitude>,
    ctnn::prune_low_magnitude<ctnn::dense<10>, global80_schedule, ctnn::global_magnitude>>;
static_assert(ctnn::pruning::global_nnz<global80> == 46950);  // 20 % of 784 * 256 + 256 * 128 + 128 * 10
using at50 = pruned<ctnn::constant_sparsity<0.5>>;
// 80 % in blocks of 1 x 16 (16 units of one input: one AVX-512 vector, two AVX2 ones), same schedule
using block80 = pruned<ctnn::polynomial_sparsity<0.0, 0.8, 0, 1600, 3, 100>, ctnn::block<1, 16>>;

// Stored bytes of the variables (parameters, state, masks excluded, metadata): compile-time.
template <class Net>
constexpr std::size_t stored_bytes() {
  const auto p = Net::memory_plan(1);
  return p.parameters + p.state + p.metadata;
}
static_assert(stored_bytes<ctnn::stripped_t<at50, ctnn::layout::bitmap>>() < 0.6 * stored_bytes<mlp>());  // >= 40 % smaller at 50 %

// " | <what> <bytes> (<how much> % smaller)": against the dense MLP's stored bytes
void print_stripped_bytes(const char* what, std::size_t bytes) {
  std::printf(" | %s %zu (%.1f %% smaller)", what, bytes, 100.0 * (1 - double(bytes) / stored_bytes<mlp>()));
}

std::uintmax_t gzip_bytes(const std::filesystem::path& file) {
  const auto raw = ctnn::io::read_file(file, "gzip_bytes");
  const auto gz = file.string() + ".gz";
  gzFile f = gzopen(gz.c_str(), "wb9");
  if (!f) throw std::runtime_error("cannot write " + gz);
  gzwrite(f, raw.data(), unsigned(raw.size()));
  gzclose(f);
  const auto n = std::filesystem::file_size(gz);
  std::filesystem::remove(gz);
  return n;
}

template <class M>
void report_file(const char* what, const M& m) {
  const auto path = std::filesystem::temp_directory_path() / "ctnn_prune_example.weights";
  ctnn::io::save_weights(m, path);
  std::printf("  %-28s weights file %8ju bytes, gzip %8ju bytes\n", what, std::filesystem::file_size(path),
              gzip_bytes(path));
  std::filesystem::remove(path);
}

// Microseconds per sample of forward passes at `batch` over the first n test images.
template <class M>
double us_per_sample(M& m, const std::vector<float>& x, std::size_t n, std::size_t batch) {
  m.forward(x.data(), batch, false);  // warm up
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i + batch <= n; i += batch) m.forward(x.data() + i * 784, batch, false);
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / double(n);
}

}  // namespace

int main(int argc, char** argv) try {
  const std::size_t dense_epochs = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 3;
  const std::size_t retrain_epochs = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 2;
  const auto dir = argc > 3 ? std::filesystem::path(argv[3]) : ctnn::data::fashion_mnist::default_dir();
  if (retrain_epochs < 2) throw std::invalid_argument("retrain_epochs must be >= 2 (the schedule ends at step 1600)");

  // 54,000 images to train on, 6,000 held out for the sensitivity analysis (the test set stays unseen)
  const auto all_train = ctnn::data::fashion_mnist::train(dir);
  const auto train = all_train.take(54000).shuffle(/*seed=*/1).batch(64);
  const auto held_out = all_train.skip(54000).batch(1000);
  const auto test = ctnn::data::fashion_mnist::test(dir).batch(1000);
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};
  const ctnn::sparse_categorical_accuracy acc;
  auto accuracy = [&](auto& m) { return ctnn::evaluate(m, loss, test, acc)["sparse_categorical_accuracy"]; };

  // 1. the dense model
  auto dense = ctnn::make_model<mlp>(42);
  ctnn::adam opt{1e-3};
  ctnn::fit(dense, loss, opt, train, ctnn::epochs{dense_epochs}, acc, ctnn::epoch_logger{});
  const double dense_acc = accuracy(dense);
  std::printf("dense: test accuracy %.4f\n\n", dense_acc);

  // 2. sensitivity: one layer at a time, no retraining, on the held-out images
  const auto table = ctnn::sensitivity_analysis(dense, loss, held_out, acc, {0.5, 0.8, 0.9, 0.95});
  std::printf("sensitivity (held-out accuracy when only that layer is pruned):\n%s", table.str().c_str());
  const auto suggested = table.suggest(0.005);
  for (std::size_t i = 0; i < suggested.size(); ++i)
    std::printf("  layer %zu: at most %.0f %% for <= 0.5 points lost\n", table.layers[i], 100 * suggested[i]);

  // The control: the dense model trained for as many more epochs as the pruned ones retrain
  auto dense_more = prune_example::control(dense, train, loss, acc, retrain_epochs);
  const double dense_more_acc = accuracy(dense_more);

  // 3. prune to 80 % with retraining, then strip
  auto p80 = prune_example::retrain_pruned<to80>(dense, train, loss, acc, retrain_epochs);
  // the smallest files (and strip_pruning's default at 80 %); layout::csc and layout::rows take only
  // layers pruned to 88.9 % and more: strip_pruning<ctnn::layout::csc>(p80) does not compile
  auto s80 = ctnn::strip_pruning<ctnn::layout::bitmap>(p80);
  // 4. 2:4 with retraining, then strip
  auto p24 = prune_example::retrain_pruned<two_of_four>(dense, train, loss, acc, retrain_epochs);
  auto s24 = ctnn::strip_pruning(p24);
  // 5. global magnitude to 80 % over all three layers, with retraining
  auto g80 = prune_example::retrain_pruned<global80>(dense, train, loss, acc, retrain_epochs);
  auto sg80 = ctnn::strip_pruning(g80);
  // 6. 80 % in 1x16 blocks with retraining; strip_pruning's default for them is layout::block<1, 16>
  auto pb80 = prune_example::retrain_pruned<block80>(dense, train, loss, acc, retrain_epochs);
  auto sb80 = ctnn::strip_pruning(pb80);

  std::printf("\ntest accuracy: dense %.4f, dense trained %zu epochs more %.4f (the control)\n", dense_acc, retrain_epochs,
              dense_more_acc);
  prune_example::print_against_control("  80 %", accuracy(p80), accuracy(s80), dense_more_acc);
  prune_example::print_against_control("  2:4", accuracy(p24), accuracy(s24), dense_more_acc);
  prune_example::print_against_control("  global 80 % (all three layers)", accuracy(g80), accuracy(sg80), dense_more_acc);
  prune_example::print_against_control("  80 % in 1x16 blocks", accuracy(pb80), accuracy(sb80), dense_more_acc);
  std::printf("  global 80 %%: the threshold kept");
  for (auto [pos, kept] : ctnn::global_kept(g80)) std::printf(" %zu (layer %zu)", kept, pos);
  std::printf(" of %zu; sparsities", ctnn::pruning::global_nnz<global80>);
  for (auto [pos, sp] : ctnn::global_sparsities(g80)) std::printf(" %.3f", sp);
  std::printf("\n");
  std::printf("\nstored bytes (parameters + metadata, compile-time constants):\n");
  std::printf("  dense %zu", stored_bytes<mlp>());
  print_stripped_bytes("stripped 50 %", stored_bytes<ctnn::stripped_t<at50, ctnn::layout::bitmap>>());
  print_stripped_bytes("80 %", stored_bytes<ctnn::stripped_t<to80, ctnn::layout::bitmap>>());
  print_stripped_bytes("2:4", stored_bytes<ctnn::stripped_t<two_of_four, ctnn::layout::bitmap>>());
  print_stripped_bytes("80 % 1x16 blocks", stored_bytes<ctnn::stripped_t<block80>>());
  std::printf("\n");
  std::printf("weights files:\n");
  report_file("dense", dense);
  report_file("80 % masked (with masks)", p80);
  report_file("80 % stripped", s80);
  report_file("2:4 stripped", s24);
  report_file("80 % 1x16 blocks stripped", sb80);

  // 7. inference time over the first 2048 test images
  std::vector<float> x;
  {
    ctnn::data::batch_for<std::remove_cvref_t<decltype(ctnn::data::fashion_mnist::test(dir).batch(2048))>> b;
    auto cur = ctnn::data::fashion_mnist::test(dir).batch(2048).open(0);
    cur.next(b);
    x = b.x;
  }
  std::printf("inference, microseconds per sample (this machine; noisy, compare within a run):\n");
  for (std::size_t batch : {std::size_t(1), std::size_t(64)}) {
    const double d = us_per_sample(dense, x, 2048, batch), a = us_per_sample(s80, x, 2048, batch),
                 c = us_per_sample(s24, x, 2048, batch), bl = us_per_sample(sb80, x, 2048, batch);
    std::printf("  batch %2zu: dense %.2f | bitmap 80 %% %.2f (%.2fx) | stripped 2:4 %.2f (%.2fx)"
                " | 1x16 blocks 80 %% %.2f (%.2fx)\n",
                batch, d, a, d / a, c, d / c, bl, d / bl);
  }
  return 0;
} catch (const std::exception& e) {
  std::cerr << "prune_fashion_mnist: " << e.what() << "\n";
  return 1;
}

// A small CNN trained end to end through model/fit: conv2d, max_pool2d,
// batch_norm, dropout, global_average_pool, dense. The arena plan covers the
// layers' state and caches; training is deterministic for a seed (dropout
// masks come from the model's generator); batch_norm's moving statistics are
// updated by fit, used by evaluate and saved with the weights.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>

#include <filesystem>
#include <vector>

using namespace ctnn;

namespace {

using cnn = sequential<input<8, 8>, conv2d<4, 3, 3, 1, padding::same, relu>, max_pool2d<2>, batch_norm,
                       conv2d<8, 3, 3, 1, padding::valid, relu>, dropout<0.25f>, global_average_pool, dense<2>>;

static_assert(cnn::output_shape == shape<2>{});
static_assert(cnn::parameter_count == (9 * 4 + 4) + 2 * 4 + (9 * 4 * 8 + 8) + (8 * 2 + 2));
static_assert(cnn::state_count == 2 * 4);
// the plan holds every layer's cache per sample: conv im2col rows, max-pool indices, batch_norm
// statistics, dropout mask
constexpr std::size_t cache_elems = 64 * 9 * 1 + 4 * 4 * 4 + 2 * 4 + 4 * 9 * 4 + 4 * 8;
static_assert(cnn::plan<float>::bytes(role::cache, 32) >= cache_elems * 32 * sizeof(float));
static_assert(cnn::memory_plan<float>(32, 2).activations >= cache_elems * 32 * sizeof(float));

// Class 1: a bright 3x3 square in the top-left quadrant; class 0: in the bottom-right one.
data::in_memory<shape<8, 8>, sparse_labels> make_data(std::size_t n, std::uint64_t seed) {
  rng g(seed);
  std::vector<float> x(n * 64);
  std::vector<std::int32_t> y(n);
  for (std::size_t i = 0; i < n; ++i) {
    float* img = x.data() + i * 64;
    for (std::size_t p = 0; p < 64; ++p) img[p] = float(g.uniform(0, 0.3));
    const bool top = g.uniform() < 0.5;
    const std::size_t r0 = (top ? 0 : 4) + g.below(2), c0 = (top ? 0 : 4) + g.below(2);
    for (std::size_t r = r0; r < r0 + 3; ++r)
      for (std::size_t c = c0; c < c0 + 3; ++c) img[r * 8 + c] = 1.0f;
    y[i] = top ? 1 : 0;
  }
  return {std::move(x), std::move(y)};
}

}  // namespace

TEST_CASE("cnn: trains on a toy task, batch_norm statistics move, inference uses them") {
  const auto train = make_data(512, 1).shuffle(3).batch(32);
  const auto test = make_data(256, 2).batch(64);
  auto m = make_model<cnn>(7);
  const std::vector<float> state0(m.state().begin(), m.state().end());
  adam opt{0.01};
  const sparse_categorical_crossentropy loss{.from_logits = true};
  auto h = fit(m, loss, opt, train, epochs{4}, sparse_categorical_accuracy{});
  CHECK(h["loss"].back() < h["loss"].front());
  CHECK(std::vector<float>(m.state().begin(), m.state().end()) != state0);
  const auto r = evaluate(m, loss, test, sparse_categorical_accuracy{});
  CHECK(r["sparse_categorical_accuracy"] > 0.9);
}

TEST_CASE("cnn: the same seed gives the same training, dropout included") {
  const auto train = make_data(128, 1).shuffle(3).batch(32);
  auto a = make_model<cnn>(11), b = make_model<cnn>(11);
  adam oa{0.01}, ob{0.01};
  const sparse_categorical_crossentropy loss{.from_logits = true};
  fit(a, loss, oa, train, epochs{1});
  fit(b, loss, ob, train, epochs{1});
  CHECK(std::vector<float>(a.parameters().begin(), a.parameters().end()) ==
        std::vector<float>(b.parameters().begin(), b.parameters().end()));
  CHECK(std::vector<float>(a.state().begin(), a.state().end()) ==
        std::vector<float>(b.state().begin(), b.state().end()));
}

TEST_CASE("cnn: batch_norm's moving statistics are saved and loaded with the weights") {
  const auto train = make_data(64, 1).batch(32);
  auto a = make_model<cnn>(5);
  adam opt{0.01};
  fit(a, sparse_categorical_crossentropy{.from_logits = true}, opt, train, epochs{1});
  const auto path = std::filesystem::temp_directory_path() / "ctnn_test_cnn_weights.ctnn";
  io::save_weights(a, path);
  auto b = make_model<cnn>(6);
  io::load_weights(b, path);
  std::filesystem::remove(path);
  CHECK(std::vector<float>(a.state().begin(), a.state().end()) ==
        std::vector<float>(b.state().begin(), b.state().end()));
  const std::vector<float> x(3 * 64, 0.5f);
  CHECK(a.predict(x.data(), 3) == b.predict(x.data(), 3));
}

TEST_CASE("cnn: summary lists the new layers with their Keras shapes") {
  std::ostringstream out;
  summary<cnn>(out);
  const std::string s = out.str();
  CHECK(s.find("conv2d<4, 3, 3, 1, same, relu>") != std::string::npos);
  CHECK(s.find("(None, 8, 8, 4)") != std::string::npos);
  CHECK(s.find("max_pool2d<2>") != std::string::npos);
  CHECK(s.find("(None, 4, 4, 4)") != std::string::npos);
  CHECK(s.find("Non-trainable params: 8") != std::string::npos);
}

TEST_CASE("cnn: validation at a larger batch than training (the arena grows) leaves training unchanged") {
  // Regression: fit kept views of the arena across epochs, so after validation
  // at batch 256 reallocated it, the optimizer wrote into freed memory.
  const auto train = make_data(128, 1).shuffle(3).batch(32);
  const auto val = make_data(256, 2).batch(256);
  auto a = make_model<cnn>(11), b = make_model<cnn>(11);
  adam oa{0.01}, ob{0.01};
  const sparse_categorical_crossentropy loss{.from_logits = true};
  fit(a, loss, oa, train, epochs{3}, validation_data(val));
  fit(b, loss, ob, train, epochs{3});
  CHECK(a.batch_capacity() == 256);
  CHECK(std::vector<float>(a.parameters().begin(), a.parameters().end()) ==
        std::vector<float>(b.parameters().begin(), b.parameters().end()));
  CHECK(std::vector<float>(a.state().begin(), a.state().end()) ==
        std::vector<float>(b.state().begin(), b.state().end()));
}

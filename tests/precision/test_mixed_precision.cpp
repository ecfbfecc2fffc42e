// Mixed precision: every layer under mixed_float16 / mixed_bfloat16 against
// float32, the recurrent layers (lstm, gru after a masked embedding) against
// float32 and learning, the memory each policy saves (static), keep_float32,
// the float16 inference model, loss scaling (underflow, overflow, growth, NaN
// in the data) and, when the dataset is installed, fp16 inference on
// Fashion-MNIST.
#include <doctest/doctest.h>

#include <ctnn/mixed_precision.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <vector>

using namespace ctnn;

namespace {

using mlp = sequential<input<28, 28>, flatten, dense<256, relu>, dense<128, relu>, dense<10>>;

// The memory plans, at compile time (batch 256, Adam's 2 slots).
constexpr auto f32_plan = mlp::memory_plan<precision::float32>(256, 2);
constexpr auto m16_plan = mlp::memory_plan<precision::mixed_float16>(256, 2);
constexpr auto i16_plan = mlp::memory_plan<precision::float16>(256, 0);
// variables, gradients and slots stay float32 under mixed_float16
static_assert(m16_plan.parameters == f32_plan.parameters && m16_plan.gradients == f32_plan.gradients &&
              m16_plan.optimizer == f32_plan.optimizer);
// activations: dense 256, dense 128 and the logits in 2 bytes (flatten's output is its
// input's memory: the model's input, or under mixed_float16 the converted input); the
// converted input (784 values in 2 bytes) and the logits widened to float (4); two
// delta buffers of the widest tensor (784) in 2 bytes; all x 256 samples
static_assert(f32_plan.activations == 256 * ((256 + 128 + 10) * 4 + 2 * 784 * 4));
static_assert(m16_plan.activations == 256 * ((256 + 128 + 10) * 2 + 784 * 2 + 10 * 4 + 2 * 784 * 2));
static_assert(memory_saved<mlp, precision::mixed_float16>(256, 2).activations ==
              256 * ((256 + 128 + 10) * 2 + 2 * 784 * 2 - 784 * 2 - 10 * 4));
// the compute-type copy of the parameters and its gradients: 2 x the parameters in 2 bytes (blocks aligned)
static_assert(m16_plan.compute_copies == 2 * ((784 * 256 + 256) * 2 + (256 * 128 + 128) * 2 + 2624));
static_assert(memory_saved<mlp, precision::mixed_bfloat16>(256, 2).total == memory_saved<mlp, precision::mixed_float16>(256, 2).total);
// the totals docs/mixed-precision.md tabulates
static_assert(f32_plan.total == 5771520 && m16_plan.total == 6119296 && i16_plan.total == 2356864);
// float16 (inference): the parameters in half (each layer's block 64-byte aligned)
static_assert(i16_plan.parameters == (784 * 256 + 256) * 2 + (256 * 128 + 128) * 2 + 2624);
static_assert(mlp::memory_plan<precision::float32>(256, 0).parameters == (784 * 256 + 256) * 4 + (256 * 128 + 128) * 4 + 5184);
static_assert(memory_saved<mlp, precision::float16>(1, 0).parameters == 401920 + 65792 + 5184 - 2624);

// A network with every layer kind: conv (valid and same), batch norm, both
// poolings, dropout, global pooling, reshape, dense, a softmax layer.
using cnn = sequential<input<8, 8, 2>, conv2d<4, 3, 3, 1, padding::valid, relu>, batch_norm, max_pool2d<2>,
                       conv2d<6, 3, 3, 1, padding::same, ctnn::tanh>, average_pool2d<1>, dropout<0.25f>,
                       global_average_pool, reshape<6>, dense<5, sigmoid>, dense<3>, softmax>;

template <class Net>
std::vector<float> inputs(std::size_t n, std::uint64_t seed = 11) {
  std::vector<float> x(n * Net::input_type::size);
  rng g(seed);
  for (auto& v : x) v = float(g.uniform(-1, 1));
  return x;
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, double(std::fabs(x)));
  return m;
}
double rel_l2(std::span<const float> a, std::span<const float> b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// Forward (training mode) + the loss's dL/dy + backward on one batch.
template <class M>
void one_backward(M& m, const std::vector<float>& x, const std::vector<std::int32_t>& y) {
  const std::size_t n = y.size();
  const float* out = m.forward(x.data(), n, true);
  sparse_categorical_crossentropy{}.compute<M::output_size, cpu<>>(out, y.data(), m.output_gradient(), n);
  m.backward();
}

template <class P>
void compare_with_float32(double out_tol, double grad_tol) {
  const std::size_t n = 16;
  const auto x = inputs<cnn>(n);
  std::vector<std::int32_t> y(n);
  for (std::size_t i = 0; i < n; ++i) y[i] = std::int32_t(i % 3);
  auto ref = make_model<cnn>(3);
  auto low = make_model<cnn, P>(3);
  // inference
  const auto p_ref = ref.predict(x.data(), n), p_low = low.predict(x.data(), n);
  std::vector<float> diff(p_ref.size());
  for (std::size_t i = 0; i < diff.size(); ++i) diff[i] = p_low[i] - p_ref[i];
  CHECK(max_abs(diff) <= out_tol * std::max(1.0, max_abs(p_ref)));
  // training-mode forward and backward: the same dropout masks (same seed), batch statistics
  one_backward(ref, x, y);
  one_backward(low, x, y);
  const double e = rel_l2(low.gradients(), ref.gradients());
  MESSAGE(std::string(precision::name_of<P>()) << ": max output error " << max_abs(diff) << ", gradient relative L2 error " << e);
  CHECK(e <= grad_tol);
  CHECK(e > 0);  // 16-bit activations do change the bits
}

}  // namespace

TEST_CASE("mixed_float16 / mixed_bfloat16: every layer kind agrees with float32 within the type's precision") {
  static_assert(std::is_same_v<decltype(make_model<cnn, precision::mixed_float16>(0))::value_type, float>);
  static_assert(std::is_same_v<decltype(make_model<cnn, precision::mixed_float16>(0))::compute_type, float16_t>);
  compare_with_float32<precision::mixed_float16>(1e-3, 5e-3);
  compare_with_float32<precision::mixed_bfloat16>(1e-2, 1e-1);
}

namespace {
// The recurrent layers under a 16-bit policy: a 0-padded id sequence through embedding<16, 8,
// mask_zero> (ids under 16 are exact in float16 and bfloat16), lstm and gru, whose gates and
// states are computed and stored in the compute type (Keras' LSTMCell / GRUCell:
// get_initial_state in self.compute_dtype) with their variables in float32.
using rnn = sequential<input<8>, embedding<16, 8, true>, lstm<16, return_sequences>, gru<16>, dense<2>>;
static_assert(rnn::memory_plan<precision::mixed_float16>(32, 2).parameters == rnn::memory_plan<precision::float32>(32, 2).parameters);
static_assert(rnn::memory_plan<precision::mixed_float16>(32, 2).activations <
              rnn::memory_plan<precision::float32>(32, 2).activations * 6 / 10);  // caches and states in 2 bytes
static_assert(std::tuple_element_t<0, rnn::bound<precision::mixed_bfloat16>>::largest_exact_id == 256);

// ids 1..15 over 3..8 steps, 0-padded; class 1 when more of them are > 8 than not
struct votes {
  std::vector<float> x;
  std::vector<std::int32_t> y;
  auto dataset() const { return data::in_memory<shape<8>, sparse_labels>{x, y}; }
};
votes vote_task(std::size_t n, std::uint64_t seed) {
  votes d{std::vector<float>(n * 8, 0.0f), std::vector<std::int32_t>(n)};
  rng g(seed);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t len = 3 + std::size_t(g.uniform(0, 6));
    int v = 0;
    for (std::size_t t = 0; t < len; ++t) {
      const int id = 1 + int(g.uniform(0, 15));
      d.x[i * 8 + t] = float(id);
      v += id > 8 ? 1 : -1;
    }
    d.y[i] = v > 0;
  }
  return d;
}

// One training-mode forward and backward of a batch; the model's float32 gradients.
template <class M>
std::vector<float> rnn_gradients(M& m, const votes& d) {
  const std::size_t n = d.y.size();
  const float* out = m.forward(d.x.data(), n, true);
  sparse_categorical_crossentropy{.from_logits = true}.compute<M::output_size, cpu<>>(out, d.y.data(), m.output_gradient(), n);
  m.backward();
  return {m.gradients().begin(), m.gradients().end()};
}

// Trains m (loss scaling: dynamic under mixed_float16, 8 epochs of 16 batches); its test accuracy.
template <class M>
double rnn_learns(M& m) {
  adam opt{0.01};
  loss_scale scale;
  const sparse_categorical_crossentropy xent{.from_logits = true};
  auto h = fit(m, xent, opt, vote_task(512, 2).dataset().batch(32), epochs{8}, scale, sparse_categorical_accuracy{});
  const auto r = evaluate(m, xent, vote_task(256, 3).dataset().batch(64), sparse_categorical_accuracy{});
  MESSAGE(std::string(precision::name_of<typename M::policy>()) << " recurrent: final loss " << h["loss"].back() << ", test accuracy "
                                                 << r["sparse_categorical_accuracy"]);
  return r["sparse_categorical_accuracy"];
}

// The same float32 variables under P: outputs and gradients within the tolerances; then it learns.
template <class P>
double rnn_against_float32(double out_tol, double grad_tol) {
  const auto probe = vote_task(64, 5);
  auto ref = make_model<rnn>(1);
  auto low = make_model<rnn, P>(1);
  const auto p_ref = ref.predict(probe.x.data(), 64), p_low = low.predict(probe.x.data(), 64);
  const double eo = rel_l2(p_low, p_ref);
  const auto g_ref = rnn_gradients(ref, probe), g_low = rnn_gradients(low, probe);
  const double e = rel_l2(g_low, g_ref);
  MESSAGE(std::string(precision::name_of<P>()) << " recurrent: output relative L2 error " << eo
                                               << ", gradient relative L2 error " << e);
  CHECK(eo <= out_tol);
  CHECK(e <= grad_tol);
  CHECK(e > 0);
  return rnn_learns(low);
}
}  // namespace

TEST_CASE("mixed_float16 / mixed_bfloat16: lstm and gru after a masked embedding agree with float32 and learn") {
  // Tolerances from the compute type's unit roundoff u (float16 2^-11, bfloat16 2^-8): each of
  // the 8 steps of 2 layers rounds the gates and the states once, so about 16 roundings reach
  // the output: 16 u is 8e-3 (float16) and 6e-2 (bfloat16); the gradients, summed over steps
  // and samples, are held to the same bound.
  auto f32 = make_model<rnn>(1);
  const double a32 = rnn_learns(f32);
  const double a16 = rnn_against_float32<precision::mixed_float16>(8e-3, 8e-3);
  const double abf = rnn_against_float32<precision::mixed_bfloat16>(6e-2, 6e-2);
  CHECK(a32 >= 0.95);
  CHECK(a16 >= 0.95);
  CHECK(abf >= 0.95);
  CHECK(std::abs(a16 - a32) <= 0.02);
  CHECK(std::abs(abf - a32) <= 0.02);
}

TEST_CASE("keep_float32<embedding<3000, 4, mask_zero>> before a 16-bit lstm: ids past 2048 exact, its float mask applies") {
  using kf = sequential<input<4>, keep_float32<embedding<3000, 4, true>>, lstm<4>>;
  auto ref = make_model<kf>(2);
  auto low = make_model<kf, precision::mixed_float16>(2);
  for (auto* p : {ref.parameters().data(), low.parameters().data()})
    for (std::size_t j = 0; j < 4; ++j) p[j] = 3.0f;  // row 0 (padding): large, so an unmasked pad would show
  low.refresh_compute_parameters();
  const std::vector<float> x{2049, 17, 0, 0, 2048, 17, 0, 0};  // 2049 is not a float16 value
  const auto p_ref = ref.predict(x.data(), 2), p_low = low.predict(x.data(), 2);
  CHECK(rel_l2(p_low, p_ref) <= 8e-3);  // 16 u of float16, as the test above
  CHECK(p_low[0] != p_low[4]);          // rows 2049 and 2048
  const std::vector<float> unpadded{2049, 17, 17, 17};  // the same ids, no padding: another output
  CHECK(rel_l2(ref.predict(unpadded.data(), 1), std::span<const float>(p_ref.data(), 4)) > 0.1);
}

TEST_CASE("a per-step loss reads the step mask of a 16-bit layer (embedding or masking under a mixed policy)") {
  // [2 samples, 3 steps, 1 unit]; steps 0, 1 of sample 0 and step 0 of sample 1 are real
  const std::vector<float> mf{1, 1, 0, 1, 0, 0}, y{0.5f, -1, 2, 0.25f, 3, 4}, t{0, 0, 0, 1, 0, 0};
  std::vector<float> dy(6);
  const auto loss_with = [&](const void* m, std::size_t bytes) {
    const sequence_mask mask{m, 3, bytes};
    step_scalars sc;
    ctnn::detail::step_loss_into<shape<3, 1>, cpu<>>(mean_squared_error{}, y.data(), t.data(), dy.data(), 2, &mask, &sc);
    return sc.loss_sum;
  };
  const double want = loss_with(mf.data(), sizeof(float));
  CHECK(want == doctest::Approx((0.25 + 1 + 0.5625) / 3 * 2));  // the mean over the 3 real steps, times the batch
  std::vector<float16_t> mh(6);
  std::vector<bfloat16_t> mb(6);
  for (std::size_t i = 0; i < 6; ++i) mh[i] = float16_t(mf[i]), mb[i] = bfloat16_t(mf[i]);
  mh[2] = float16_t(-0.0f);  // a negative zero is 0
  CHECK(loss_with(mh.data(), 2) == want);
  CHECK(loss_with(mb.data(), 2) == want);
}

TEST_CASE("mixed_float16: activations and deltas are stored in float16, the output in float") {
  auto m = make_model<mlp, precision::mixed_float16>(1);
  const auto x = inputs<mlp>(2);
  m.forward(x.data(), 2, false);
  // the model's memory holds exactly the plan at batch 2 (and 0 slots)
  CHECK(m.memory_bytes() == m.layout().total);
  // (flatten's output is the converted input itself: no block of its own)
  CHECK(m.layout().bytes(role::activation) == 256 * 2 * 2 + 128 * 2 * 2 + 64 /* 10 halves x 2, aligned */);
  // the float input converted to float16, the logits widened to float after it
  CHECK(m.layout().bytes(role::converted) == 784 * 2 * 2 + 128 /* 10 floats x 2, aligned */);
}

TEST_CASE("keep_float32<dense>: computes with the float32 kernel, the mixed layer with it rounded to float16") {
  using plain = sequential<input<1>, dense<1>>;
  using kept = sequential<input<1>, keep_float32<dense<1>>>;
  static_assert(kept::parameter_count == 1 + 1);
  CHECK(kept::spec_string() == "input<1> | keep_float32<dense<1>>");
  auto a = make_model<plain, precision::mixed_float16>(0);
  auto b = make_model<kept, precision::mixed_float16>(0);
  auto c = make_model<kept>(0);  // under float32 it is dense<1>
  const float w = 1.0f + std::ldexp(1.0f, -12);  // not a float16 value: rounds to 1
  for (auto* p : {a.parameters().data(), b.parameters().data(), c.parameters().data()}) {
    p[0] = w;
    p[1] = 0;
  }
  const float x = 1.0f;
  CHECK(a.predict(&x, 1)[0] == 1.0f);
  CHECK(b.predict(&x, 1)[0] == w);
  CHECK(c.predict(&x, 1)[0] == w);
}

TEST_CASE("float16 inference: weights stored in half, loaded from a float32 file, same predictions as mixed_float16") {
  const auto dir = std::filesystem::temp_directory_path() / "ctnn_precision_test";
  std::filesystem::create_directories(dir);
  auto trained = make_model<cnn>(5);
  io::save_weights(trained, dir / "f32.ctnn");
  auto inf = make_model<cnn, precision::float16>(0);
  auto mixed = make_model<cnn, precision::mixed_float16>(0);
  io::load_weights(inf, dir / "f32.ctnn");
  io::load_weights(mixed, dir / "f32.ctnn");
  static_assert(sizeof(decltype(inf)::variable_type) == 2);
  // every stored variable is the float32 one rounded to nearest even (the
  // layouts differ: each layer's block is 64-byte aligned in its own type)
  auto values = [](const auto& m) {
    std::vector<float> v;
    m.for_each_variable([&](const variable_ref& r) {
      for (std::size_t i = 0; i < r.extent; ++i) {
        if (r.element_bytes == 4) v.push_back(reinterpret_cast<const float*>(r.data)[i]);
        else v.push_back(float(reinterpret_cast<const float16_t*>(r.data)[i]));
      }
    });
    return v;
  };
  const auto wi = values(inf), wf = values(trained);
  REQUIRE(wi.size() == wf.size());
  for (std::size_t i = 0; i < wf.size(); ++i) REQUIRE(wi[i] == float(float16_t(wf[i])));
  const auto x = inputs<cnn>(32);
  const auto a = inf.predict(x.data(), 32), b = mixed.predict(x.data(), 32);
  CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);  // mixed rounds its kernels the same way
  // and back: a float16 file loads into a float32 model (exactly)
  io::save_weights(inf, dir / "f16.ctnn");
  auto back = make_model<cnn>(0);
  io::load_weights(back, dir / "f16.ctnn");
  CHECK(values(back) == wi);
  // a float64 model still refuses a float32 file (only 16-bit <-> float32 converts)
  auto d = make_model<cnn, double>(0);
  CHECK_THROWS_WITH_AS(io::load_weights(d, dir / "f32.ctnn"), doctest::Contains("holds float32 values but this model uses float64"),
                       io::weights_error);
  std::filesystem::remove_all(dir);
}

TEST_CASE("float16 inference on Fashion-MNIST: the fp32 model's predictions on >= 99.5 % of the test set") {
  const auto dir = data::fashion_mnist::default_dir();
  if (!std::filesystem::exists(dir / "t10k-images-idx3-ubyte.gz")) {
    MESSAGE("CTNN_SKIP: " << dir << " is missing (apt-get install dataset-fashion-mnist)");
    return;
  }
  // one epoch on 20000 images keeps it cheap under the sanitizers; the
  // agreement is about the arithmetic, not how far the model trained
  const auto train = data::fashion_mnist::train(dir).take(20000).shuffle(1).batch(64);
  const auto test = data::fashion_mnist::test(dir);
  auto f32 = make_model<mlp>(42);
  adam opt{1e-3f};
  fit(f32, sparse_categorical_crossentropy{.from_logits = true}, opt, train, epochs{1});
  CHECK(evaluate(f32, sparse_categorical_crossentropy{.from_logits = true}, test.batch(1000),
                 sparse_categorical_accuracy{})["sparse_categorical_accuracy"] > 0.75);  // a trained model
  const auto file = std::filesystem::temp_directory_path() / "ctnn_fp16_inference.ctnn";
  io::save_weights(f32, file);
  auto f16 = make_model<mlp, precision::float16>(0);
  io::load_weights(f16, file);
  std::filesystem::remove(file);
  const std::size_t n = test.size();
  const auto a = f32.predict(test.features(), n), b = f16.predict(test.features(), n);
  auto argmax = [](const float* p) { return std::size_t(std::max_element(p, p + 10) - p); };
  std::size_t same = 0, right32 = 0, right16 = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t p = argmax(a.data() + i * 10), q = argmax(b.data() + i * 10);
    same += p == q;
    right32 += p == std::size_t(test.targets()[i]);
    right16 += q == std::size_t(test.targets()[i]);
  }
  MESSAGE("float16 inference agrees with float32 on " << same << " of " << n << " test images; accuracy "
          << double(right32) / n << " (float32) vs " << double(right16) / n << " (float16); model bytes "
          << f16.layout().bytes(role::parameter) << " vs " << f32.layout().bytes(role::parameter));
  CHECK(double(same) / double(n) >= 0.995);
  CHECK(f16.layout().bytes(role::parameter) * 2 <= f32.layout().bytes(role::parameter) + 128);
}

TEST_CASE("mixed_bfloat16: a dense layer fed bfloat16 (AVX512-BF16 when the CPU has it) computes the rounded product") {
  using two = sequential<input<64>, dense<32, relu>, dense<16>>;
  auto m = make_model<two, precision::mixed_bfloat16>(8);
  const auto x = inputs<two>(5);
  const auto y = m.predict(x.data(), 5);
  // the reference: every operand rounded to bfloat16 (the model's input too: the first layer computes in
  // bfloat16), float32 sums, each layer's output rounded to bfloat16 (the last one then widened to float)
  auto rnd = [](float v) { return float(bfloat16_t(v)); };
  const float* p = m.parameters().data();
  const float* w2 = m.layer_parameters<1>().data();
  double worst = 0;
  for (std::size_t i = 0; i < 5; ++i) {
    std::vector<float> h(32);
    for (std::size_t j = 0; j < 32; ++j) {
      float s = 0;
      for (std::size_t k = 0; k < 64; ++k) s += rnd(x[i * 64 + k]) * rnd(p[k * 32 + j]);
      h[j] = rnd(std::max(0.0f, s + rnd(p[64 * 32 + j])));
    }
    for (std::size_t j = 0; j < 16; ++j) {
      float s = 0;
      for (std::size_t k = 0; k < 32; ++k) s += h[k] * rnd(w2[k * 16 + j]);
      s += rnd(w2[32 * 16 + j]);
      worst = std::max(worst, double(std::fabs(rnd(s) - y[i * 16 + j])));
    }
  }
  MESSAGE("largest difference " << worst << std::string(kernels::cpu::has_avx512_bf16() ? " (AVX512-BF16 path)" : " (conversion path)"));
  CHECK(worst < 1e-4);
}

namespace {
using small = sequential<input<3>, dense<4, relu>, dense<2>>;
template <class M>
std::vector<std::byte> parameter_bytes(const M& m) {
  const auto p = m.parameters();
  const auto* b = reinterpret_cast<const std::byte*>(p.data());
  return {b, b + p.size_bytes()};
}
// Saves a float32 model of `small` whose parameter i (0-11: layer 1's kernel, 12-15 its bias) is v.
std::filesystem::path f32_file_with(std::size_t i, float v) {
  const auto path = std::filesystem::temp_directory_path() / "ctnn_precision_convert.ctnn";
  auto a = make_model<small>(1);
  a.parameters()[i] = v;
  io::save_weights(a, path);
  return path;
}
}  // namespace

TEST_CASE("16-bit models refuse a converted tensor holding NaN, an infinity or a value the type cannot hold, naming it") {
  using bf16_policy = precision::policy<bfloat16_t>;
  auto h = make_model<small, precision::float16>(2);
  auto b = make_model<small, bf16_policy>(2);
  const auto h0 = parameter_bytes(h), b0 = parameter_bytes(b);
  // float16 holds at most 65504: 1e5 would become +Inf
  auto big = f32_file_with(5, 1e5f);
  CHECK_THROWS_WITH_AS(io::load_weights(h, big),
                       doctest::Contains("layer 1 parameter 'kernel' value [5] = 1e+05 overflows float16 (largest "
                                         "finite value 65504)"),
                       io::weights_error);
  CHECK(parameter_bytes(h) == h0);
  io::load_weights(b, big);  // bfloat16 has float32's range
  CHECK(float(b.parameters()[5]) == float(bfloat16_t(1e5f)));
  io::load_weights(b, f32_file_with(5, 65504.0f));
  io::load_weights(h, f32_file_with(5, 65504.0f));  // the largest float16 loads
  CHECK(float(h.parameters()[5]) == 65504.0f);
  // beyond bfloat16's largest value (3.3895e38) a float32 rounds to +Inf
  CHECK_THROWS_WITH_AS(io::load_weights(b, f32_file_with(0, 3.4e38f)),
                       doctest::Contains("layer 1 parameter 'kernel' value [0] = 3.4e+38 overflows bfloat16"),
                       io::weights_error);
  // NaN and infinities are refused by both
  h = make_model<small, precision::float16>(2);
  b = make_model<small, bf16_policy>(2);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH_AS(io::load_weights(h, f32_file_with(13, nan)),
                       doctest::Contains("layer 1 parameter 'bias' value [1] is NaN in the file (a float32 tensor "
                                         "converted to float16 must hold finite values)"),
                       io::weights_error);
  CHECK_THROWS_WITH_AS(io::load_weights(b, f32_file_with(13, nan)),
                       doctest::Contains("layer 1 parameter 'bias' value [1] is NaN in the file (a float32 tensor "
                                         "converted to bfloat16 must hold finite values)"),
                       io::weights_error);
  CHECK_THROWS_WITH_AS(io::load_weights(b, f32_file_with(2, -inf)),
                       doctest::Contains("layer 1 parameter 'kernel' value [2] is -Inf in the file"), io::weights_error);
  CHECK(parameter_bytes(h) == h0);
  CHECK(parameter_bytes(b) == b0);
  // and the other way: a float16 file holding +Inf does not load into a float32 model
  const auto path = std::filesystem::temp_directory_path() / "ctnn_precision_convert16.ctnn";
  h.parameters()[3] = float16_t(inf);
  io::save_weights(h, path);
  auto f = make_model<small>(3);
  CHECK_THROWS_WITH_AS(io::load_weights(f, path),
                       doctest::Contains("layer 1 parameter 'kernel' value [3] is +Inf in the file (a float16 tensor "
                                         "converted to float32 must hold finite values)"),
                       io::weights_error);
  // a float32 model keeps a float32 file's values bit for bit, NaN included (fit and evaluate report it)
  io::load_weights(f, f32_file_with(13, nan));
  CHECK(std::isnan(f.parameters()[13]));
  std::filesystem::remove(path);
  std::filesystem::remove(std::filesystem::temp_directory_path() / "ctnn_precision_convert.ctnn");
}

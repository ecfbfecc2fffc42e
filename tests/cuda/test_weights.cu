// cuda/host_variables.cuh and the callbacks that need host variables on the
// device: a device model's weights file is the CPU model's (version 2,
// logical tensors), early_stopping(restore_best_weights) and
// model_checkpoint run on fit's callback_model (cuda/fit.cuh).
// The cases before "on the device" need no device: they check the host side
// (the variable walk and the file of every policy against the CPU model's,
// and callback_model's copies) and run wherever nvcc builds this file.
#include "cuda_test.hpp"

// The headers under test, by name (cuda_test.hpp includes them all through ctnn/backends/cuda/cuda.cuh).
#include <ctnn/backends/cuda/fit.cuh>
#include <ctnn/backends/cuda/host_variables.cuh>
#include <ctnn/backends/cuda/model.cuh>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <tuple>
#include <unistd.h>
#include <vector>

using namespace ctnn_test;
using dev = ctnn::cuda<90>;
namespace fs = std::filesystem;

namespace {
// every variable role but masks: conv2d and dense parameters, batch_norm's state
using bn_cnn = ctnn::sequential<ctnn::input<6, 6, 2>, ctnn::conv2d<3, 3, 3, 1, ctnn::padding::same, ctnn::relu>,
                                ctnn::batch_norm, ctnn::max_pool2d<2>, ctnn::flatten, ctnn::dense<4>>;
using other = ctnn::sequential<ctnn::input<6, 6, 2>, ctnn::flatten, ctnn::dense<4>>;

struct tmpdir {
  fs::path p;
  tmpdir() {
    p = fs::temp_directory_path() / ("ctnn_cuda_w_" + std::to_string(::getpid()));
    fs::create_directories(p);
  }
  ~tmpdir() { fs::remove_all(p); }
};
std::vector<char> slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
template <class T>
std::vector<float> floats(std::span<T> s) {
  std::vector<float> v;
  for (const auto& x : s) v.push_back(float(x));
  return v;
}

// Applies f to every value of the tensors of role r (not to the padding between layers, which no file holds).
template <class HV, class F>
void change(HV& h, ctnn::role r, F f) {
  using V = typename HV::variable_type;
  h.for_each_variable([&](const ctnn::variable_ref& v) {
    if (v.kind != r) return;
    auto* p = reinterpret_cast<V*>(v.data);
    for (std::size_t i = 0; i < v.extent; ++i) p[i] = V(f(float(p[i])));
  });
}

// Stands in for model<Net, P, cuda<90>> where there is no device: its
// variables live in host memory, and it counts the copies back.
template <class Net, class P>
struct host_device_model {
  using real = ctnn::model<Net, P, dev>;
  using network = Net;
  using variable_type = typename real::variable_type;
  using value_type = typename real::value_type;
  using variable_layers = typename real::variable_layers;
  using variable_policy = typename real::variable_policy;
  using variable_plan = typename real::variable_plan;
  static constexpr std::size_t input_size = real::input_size, output_size = real::output_size;
  ctnn::host_variables<host_device_model> stored;
  ctnn::optimizer_state opt{};
  mutable int pulls = 0;
  int pushes = 0;
  ctnn::host_variables<host_device_model> variables_to_host() const {
    ++pulls;
    return stored;
  }
  void variables_from_host(const ctnn::host_variables<host_device_model>& h) {
    stored = h;
    ++pushes;
  }
  const ctnn::optimizer_state& optimizer_state() const noexcept { return opt; }
  ctnn::optimizer_state& mutable_optimizer_state() noexcept { return opt; }
  std::vector<value_type> predict(const value_type*, std::size_t n, std::size_t = 256) {
    return std::vector<value_type>(n * output_size);
  }
};
}  // namespace

// The device model's variables as the host sees them: float32 under float32
// and the mixed policies, float16_t under precision::float16.
static_assert(std::is_same_v<ctnn::host_variables<ctnn::model<bn_cnn, ctnn::precision::float32, dev>>::variable_type, float>);
static_assert(std::is_same_v<ctnn::host_variables<ctnn::model<bn_cnn, ctnn::precision::mixed_float16, dev>>::variable_type, float>);
static_assert(std::is_same_v<ctnn::host_variables<ctnn::model<bn_cnn, ctnn::precision::float16, dev>>::variable_type,
                             ctnn::float16_t>);
static_assert(std::is_same_v<ctnn::host_variables<ctnn::model<bn_cnn, ctnn::precision::policy<__nv_bfloat16>, dev>>::variable_type,
                             ctnn::bfloat16_t>);

TEST_CASE_TEMPLATE("a device model's host variables read and write the CPU model's weights file, byte for byte", P,
                   ctnn::precision::float32, ctnn::precision::mixed_float16, ctnn::precision::mixed_bfloat16,
                   ctnn::precision::float16) {
  // no device needed: host_variables is host memory laid out by the device model's plan
  using GM = ctnn::model<bn_cnn, P, dev>;
  tmpdir t;
  auto cm = ctnn::make_model<bn_cnn, P>(7);
  // moving statistics that are not the initial 0 and 1
  const auto x = random_values(5 * 72, 190);
  cm.forward(x.data(), 5, true);
  ctnn::io::save_weights(cm, t.p / "cpu.ctnn");

  ctnn::host_variables<GM> h;
  ctnn::io::load_weights(h, t.p / "cpu.ctnn");
  CHECK(floats(h.parameters()) == floats(cm.parameters()));
  CHECK(floats(h.state()) == floats(cm.state()));
  std::size_t tensors = 0;
  cm.for_each_variable([&](const ctnn::variable_ref&) { ++tensors; });
  std::size_t seen = 0;
  h.for_each_variable([&](const ctnn::variable_ref& v) {
    ++seen;
    CHECK(v.data >= h.bytes().data());
    CHECK(v.data + v.extent * v.element_bytes <= h.bytes().data() + h.bytes().size());
  });
  CHECK(seen == tensors);
  // saved again from the device layout: the same file
  ctnn::io::save_weights(h, t.p / "dev.ctnn");
  CHECK(slurp(t.p / "dev.ctnn") == slurp(t.p / "cpu.ctnn"));

  // and back: changed values load into a CPU model as they are
  change(h, ctnn::role::parameter, [](float w) { return w * 0.5f + 0.25f; });
  change(h, ctnn::role::state, [](float w) { return w + 0.125f; });
  ctnn::io::save_weights(h, t.p / "dev2.ctnn");
  auto cm2 = ctnn::make_model<bn_cnn, P>(8);
  ctnn::io::load_weights(cm2, t.p / "dev2.ctnn");
  CHECK(floats(cm2.parameters()) == floats(h.parameters()));
  CHECK(floats(cm2.state()) == floats(h.state()));

  // another network's file is refused, naming both architectures, and nothing changes
  auto om = ctnn::make_model<other, P>(9);
  ctnn::io::save_weights(om, t.p / "other.ctnn");
  const auto before = h.bytes();
  CHECK_THROWS_WITH_AS(ctnn::io::load_weights(h, t.p / "other.ctnn"), doctest::Contains("flatten | dense<4>"),
                       ctnn::io::weights_error);
  CHECK(h.bytes() == before);
  CHECK_THROWS_WITH_AS(ctnn::host_variables<GM>(std::vector<std::byte>(3)), doctest::Contains("3 bytes given"),
                       std::invalid_argument);
}

TEST_CASE("callbacks on the device: early_stopping restores and model_checkpoint saves through host copies of the variables") {
  // no device needed: host_device_model stands in for the device model
  using M = host_device_model<bn_cnn, ctnn::precision::float32>;
  tmpdir t;
  auto cm = ctnn::make_model<bn_cnn, ctnn::precision::float32>(11);
  ctnn::io::save_weights(cm, t.p / "start.ctnn");
  M dm;
  ctnn::io::load_weights(dm.stored, t.p / "start.ctnn");
  const auto start = dm.stored.bytes();

  ctnn::early_stopping es{.monitor = "loss", .patience = 5, .restore_best_weights = true, .verbose = 0};
  ctnn::model_checkpoint ck{.filepath = (t.p / "ck-{epoch}.ctnn").string(), .monitor = "loss"};
  std::tuple<ctnn::early_stopping&, ctnn::model_checkpoint&> callbacks{es, ck};
  ctnn::sgd opt{0.1};
  ctnn::history hist;
  ctnn::cuda_detail::callback_model<M> view(dm);
  ctnn::train_context<ctnn::cuda_detail::callback_model<M>, ctnn::sgd<>> ctx{view, opt, hist};
  using hook = ctnn::detail::callback_hook;

  ctnn::cuda_detail::call_device_callbacks<hook::train_begin>(callbacks, ctx);
  CHECK(dm.pulls == 0);  // a hook that does not touch the variables copies nothing
  CHECK(!view.pulled());
  ctx.epoch = 0;
  ctx.epoch_logs.set("loss", 1.0);
  ctnn::cuda_detail::call_device_callbacks<hook::epoch_end>(callbacks, ctx);
  CHECK(dm.pulls == 1);   // early_stopping's copy of the best weights and the checkpoint share one copy
  CHECK(dm.pushes == 0);  // read only: nothing goes back
  CHECK(!view.pulled());

  // "training" changes the device model's variables
  change(dm.stored, ctnn::role::parameter, [](float w) { return w + 1.0f; });
  change(dm.stored, ctnn::role::state, [](float w) { return w - 0.5f; });
  const auto trained = dm.stored.bytes();
  ctx.epoch = 1;
  ctx.epoch_logs = ctnn::logs{};
  ctx.epoch_logs.set("loss", 2.0);  // worse: not the best
  ctnn::cuda_detail::call_device_callbacks<hook::epoch_end>(callbacks, ctx);
  CHECK(dm.pulls == 2);  // a fresh copy: the device changed since the last hook
  CHECK(dm.pushes == 0);
  CHECK(ck.saved.size() == 2);

  ctnn::cuda_detail::call_device_callbacks<hook::train_end>(callbacks, ctx);
  CHECK(dm.pushes == 1);  // the best epoch's weights went back to the device
  CHECK(dm.stored.bytes() == start);

  // each checkpoint is the CPU model's file of that epoch's variables
  auto c1 = ctnn::make_model<bn_cnn, ctnn::precision::float32>(12);
  ctnn::io::load_weights(c1, t.p / "ck-1.ctnn");
  CHECK(floats(c1.parameters()) == floats(cm.parameters()));
  CHECK(floats(c1.state()) == floats(cm.state()));
  ctnn::host_variables<M> h2(trained);
  ctnn::io::load_weights(c1, t.p / "ck-2.ctnn");
  CHECK(floats(c1.parameters()) == floats(h2.parameters()));
  CHECK(floats(c1.state()) == floats(h2.state()));

  // the optimizer state is the device model's (reduce_lr_on_plateau's scale_learning_rate)
  ctx.scale_learning_rate(0.5);
  CHECK(dm.opt.learning_rate_scale == 0.5);
  CHECK(ctx.learning_rate() == doctest::Approx(0.05));
}

TEST_CASE_TEMPLATE("on the device: io::save_weights and io::load_weights of a device model are the CPU model's files", P,
                   ctnn::precision::float32, ctnn::precision::mixed_float16) {
  CTNN_REQUIRE_DEVICE();
  tmpdir t;
  auto gm = ctnn::make_model<bn_cnn, P, dev>(13);
  using H = typename ctnn::model<bn_cnn, P, dev>::compute_type;
  auto gx = to_device<H>(random_values(5 * 72, 191));
  gm.forward(gx.data(), 5, true);  // moving statistics that are not the initial 0 and 1
  ctnn::io::save_weights(gm, t.p / "dev.ctnn");
  auto cm = ctnn::make_model<bn_cnn, P>(14);
  ctnn::io::load_weights(cm, t.p / "dev.ctnn");
  CHECK(gm.download(ctnn::role::parameter) == floats(cm.parameters()));
  CHECK(gm.download(ctnn::role::state) == floats(cm.state()));

  auto cm2 = ctnn::make_model<bn_cnn, P>(15);
  ctnn::io::save_weights(cm2, t.p / "cpu.ctnn");
  ctnn::io::load_weights(gm, t.p / "cpu.ctnn");
  CHECK(gm.download(ctnn::role::parameter) == floats(cm2.parameters()));
  CHECK(gm.download(ctnn::role::state) == floats(cm2.state()));
  const auto x = random_values(9 * 72, 192);
  const double tol = std::is_same_v<H, float> ? 1e-5 : 8.0 / 1024;
  CHECK(relative_error(gm.predict(x.data(), 9), cm2.predict(x.data(), 9)) <= tol);

  // a foreign file leaves the device model as it was
  auto om = ctnn::make_model<other, P>(16);
  ctnn::io::save_weights(om, t.p / "other.ctnn");
  const auto before = gm.get_variables();
  CHECK_THROWS_AS(ctnn::io::load_weights(gm, t.p / "other.ctnn"), ctnn::io::weights_error);
  CHECK(gm.get_variables() == before);
}

TEST_CASE("on the device: fit with early_stopping(restore_best_weights) and model_checkpoint") {
  CTNN_REQUIRE_DEVICE();
  tmpdir t;
  using mlp = ctnn::sequential<ctnn::input<12>, ctnn::dense<16, ctnn::relu>, ctnn::batch_norm, ctnn::dense<4>>;
  std::vector<std::int32_t> labels(96);
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = std::int32_t(i * 7 % 4);
  const auto data =
      ctnn::data::in_memory<mlp::input_type, ctnn::sparse_labels, float>(random_values(96 * 12, 193), labels).batch(16);
  auto gm = ctnn::make_model<mlp, ctnn::precision::mixed_float16, dev>(17);
  ctnn::adam opt{1e-2};
  // the "best" epoch is the one with the highest loss (the first, as training lowers it), so the
  // restored weights differ from the last epoch's
  ctnn::early_stopping es{.monitor = "loss", .patience = 10, .mode = ctnn::monitor_mode::max,
                          .restore_best_weights = true, .verbose = 0};
  ctnn::model_checkpoint ck{.filepath = (t.p / "e{epoch}.ctnn").string(), .monitor = "loss"};
  const auto h = ctnn::fit(gm, ctnn::sparse_categorical_crossentropy{.from_logits = true}, opt, data,
                           ctnn::epochs{4}, es, ck);
  REQUIRE(ck.saved.size() == 4);
  auto best = ctnn::make_model<mlp, ctnn::precision::mixed_float16>(18);
  ctnn::io::load_weights(best, t.p / ("e" + std::to_string(es.best_epoch + 1) + ".ctnn"));
  CHECK(gm.download(ctnn::role::parameter) == floats(best.parameters()));
  CHECK(gm.download(ctnn::role::state) == floats(best.state()));
  auto last = ctnn::make_model<mlp, ctnn::precision::mixed_float16>(19);
  ctnn::io::load_weights(last, t.p / "e4.ctnn");
  if (es.best_epoch != 3) CHECK(gm.download(ctnn::role::parameter) != floats(last.parameters()));
  CHECK(h.values.at("loss").size() == 4);
}

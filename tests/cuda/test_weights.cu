// A device model's variables through the generic model's host views
// (cuda<SM>::memory::host_view, memory.cuh): its weights file is the CPU
// model's (version 2, logical tensors), and early_stopping
// (restore_best_weights) and model_checkpoint run on it in the generic fit.
// The cases before "on the device" need no device: they check that the
// device model's plan lays the variables out as the CPU model's, so its
// variable walk (and so its file) is the CPU model's, for every policy.
#include "cuda_test.hpp"

// The headers under test, by name (cuda_test.hpp includes them all through ctnn/backends/cuda/cuda.cuh).
#include <ctnn/backends/cuda/memory.cuh>

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

// The variable regions' bytes (parameters .. metadata) on the host.
template <class M>
std::vector<std::byte> variable_bytes(const M& m) {
  std::vector<std::byte> b;
  for (ctnn::role r : {ctnn::role::parameter, ctnn::role::state, ctnn::role::mask, ctnn::role::metadata}) {
    const auto v = m.host_region(r);
    b.insert(b.end(), v.data(), v.data() + v.size());
  }
  return b;
}
}  // namespace

TEST_CASE_TEMPLATE("a device model's variables are laid out and walked as the CPU model's (so its weights file is the CPU's)", P,
                   ctnn::precision::float32, ctnn::precision::mixed_float16, ctnn::precision::mixed_bfloat16,
                   ctnn::precision::float16) {
  // no device needed: the walk runs on host bytes laid out by the device model's plan
  using GM = ctnn::model<bn_cnn, P, dev>;
  using CM = ctnn::model<bn_cnn, P>;
  static_assert(std::is_same_v<typename GM::variable_type, typename CM::variable_type>);
  static_assert(std::is_same_v<typename GM::compute_type, typename CM::compute_type>);
  const ctnn::plan_layout gl = GM::plan::layout(1, 0), cl = CM::plan::layout(1, 0);
  for (ctnn::role r : {ctnn::role::parameter, ctnn::role::gradient, ctnn::role::state, ctnn::role::mask,
                       ctnn::role::metadata, ctnn::role::compute_parameter, ctnn::role::compute_gradient}) {
    CHECK(gl.bytes(r) == cl.bytes(r));
    if (gl.bytes(r)) CHECK(gl.at(r) == cl.at(r));
  }
  auto cm = ctnn::make_model<bn_cnn, P>(7);
  std::vector<ctnn::variable_ref> want, got;
  cm.for_each_variable([&](const ctnn::variable_ref& v) { want.push_back(v); });
  std::vector<std::byte> host(gl.at(ctnn::role::optimizer_slot));
  ctnn::detail::for_each_variable_in<typename GM::layers, typename GM::policy, typename GM::plan>(
      host.data(), gl, 1, [&](const ctnn::variable_ref& v) { got.push_back(v); });
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("variable " << i << ": " << want[i].name);
    CHECK(std::string_view(got[i].name) == std::string_view(want[i].name));
    CHECK(got[i].kind == want[i].kind);
    CHECK(got[i].layer == want[i].layer);
    CHECK(got[i].offset == want[i].offset);
    CHECK(got[i].extent == want[i].extent);
    CHECK(got[i].element_bytes == want[i].element_bytes);
    CHECK(got[i].rank == want[i].rank);
  }
}

TEST_CASE_TEMPLATE("on the device: io::save_weights and io::load_weights of a device model are the CPU model's files", P,
                   ctnn::precision::float32, ctnn::precision::mixed_float16) {
  CTNN_REQUIRE_DEVICE();
  tmpdir t;
  auto gm = ctnn::make_model<bn_cnn, P, dev>(13);
  using H = typename ctnn::model<bn_cnn, P, dev>::compute_type;
  const auto x5 = random_values(5 * 72, 191);
  gm.forward(x5.data(), 5, true);  // moving statistics that are not the initial 0 and 1
  ctnn::io::save_weights(gm, t.p / "dev.ctnn");
  auto cm = ctnn::make_model<bn_cnn, P>(14);
  ctnn::io::load_weights(cm, t.p / "dev.ctnn");
  CHECK(download(gm, ctnn::role::parameter) == floats(cm.parameters()));
  CHECK(download(gm, ctnn::role::state) == floats(cm.state()));
  // byte for byte: the CPU model saves the file the device model saved
  ctnn::io::save_weights(cm, t.p / "cpu_again.ctnn");
  CHECK(slurp(t.p / "cpu_again.ctnn") == slurp(t.p / "dev.ctnn"));

  auto cm2 = ctnn::make_model<bn_cnn, P>(15);
  ctnn::io::save_weights(cm2, t.p / "cpu.ctnn");
  ctnn::io::load_weights(gm, t.p / "cpu.ctnn");
  CHECK(download(gm, ctnn::role::parameter) == floats(cm2.parameters()));
  CHECK(download(gm, ctnn::role::state) == floats(cm2.state()));
  const auto x = random_values(9 * 72, 192);
  const double tol = std::is_same_v<H, float> ? 1e-5 : 8.0 / 1024;
  CHECK(relative_error(gm.predict(x.data(), 9), cm2.predict(x.data(), 9)) <= tol);

  // a foreign file leaves the device model as it was
  auto om = ctnn::make_model<other, P>(16);
  ctnn::io::save_weights(om, t.p / "other.ctnn");
  const auto before = variable_bytes(gm);
  CHECK_THROWS_AS(ctnn::io::load_weights(gm, t.p / "other.ctnn"), ctnn::io::weights_error);
  CHECK(variable_bytes(gm) == before);
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
  CHECK(download(gm, ctnn::role::parameter) == floats(best.parameters()));
  CHECK(download(gm, ctnn::role::state) == floats(best.state()));
  auto last = ctnn::make_model<mlp, ctnn::precision::mixed_float16>(19);
  ctnn::io::load_weights(last, t.p / "e4.ctnn");
  if (es.best_epoch != 3) CHECK(download(gm, ctnn::role::parameter) != floats(last.parameters()));
  CHECK(h.values.at("loss").size() == 4);
}

// A backend other than cpu slots in by partially specializing the bound layer
// (dense_layer<Spec, In, Precision, Backend>), while the user's network type stays the
// same: this is how the CUDA half-precision layers attach (dense.hpp).
#include <doctest/doctest.h>

#include <ctnn/layers/dense.hpp>
#include <ctnn/train/model.hpp>

#include <array>
#include <string>
#include <vector>

namespace {
struct recording_backend {
  using memory = ctnn::host_memory;
  static std::string name() { return "recording"; }
};
std::vector<std::string> calls;
}  // namespace

// Every backend provides the whole op set (core/backend_ops.hpp; a model checks it); this
// one computes on the host, so the CPU's ops do.
template <>
struct ctnn::ops<recording_backend> : ctnn::ops<ctnn::cpu<>> {};

template <class Spec, ctnn::Shape In>
struct ctnn::dense_layer<Spec, In, ctnn::precision::float32, recording_backend> {
  using variable_type = float;
  using compute_type = float;
  using in_shape = In;
  using out_shape = ctnn::shape<Spec::units>;
  static constexpr std::array<ctnn::buffer, 2> buffers{ctnn::buffer::parameter("kernel", {In::size, Spec::units}),
                                                       ctnn::buffer::parameter("bias", {Spec::units})};
  static constexpr std::size_t parameter_count = In::size * Spec::units + Spec::units;
  static constexpr std::size_t state_count = 0;
  static constexpr std::size_t cache_per_sample = 0;
  static std::string name() { return Spec::name(); }
  static void init(ctnn::layer_slot<float>, ctnn::rng&) { calls.push_back("init " + Spec::name()); }
  static void forward(ctnn::layer_slot<float>, const float*, float* y, ctnn::run_info r) {
    calls.push_back("forward " + Spec::name());
    for (std::size_t i = 0; i < r.batch * Spec::units; ++i) y[i] = 7;
  }
  static void backward(ctnn::layer_slot<float>, const float*, const float*, float*, float*, ctnn::run_info) {
    calls.push_back("backward " + Spec::name());
  }
};

using net = ctnn::sequential<ctnn::input<3>, ctnn::dense<4, ctnn::relu>, ctnn::dense<2>>;

TEST_CASE("the same network type runs on another backend's specialization") {
  calls.clear();
  auto m = ctnn::make_model<net, float, recording_backend>(1);
  const float x[3] = {1, 2, 3};
  const float* y = m.forward(x, 1, true);
  CHECK(y[0] == 7.0f);
  m.backward();
  const std::vector<std::string> want{"init dense<4, relu>", "init dense<2>",       "forward dense<4, relu>",
                                      "forward dense<2>",    "backward dense<2>", "backward dense<4, relu>"};
  CHECK(calls == want);
  static_assert(std::is_same_v<net::bound<float, recording_backend>, std::tuple<ctnn::dense_layer<ctnn::dense<4, ctnn::relu>, ctnn::shape<3>, ctnn::precision::float32, recording_backend>, ctnn::dense_layer<ctnn::dense<2>, ctnn::shape<4>, ctnn::precision::float32, recording_backend>>>);
}

// A second backend, as docs/design.md's worked example: counting_cpu runs
// the CPU kernels (its ops are cpu<>'s) but its memory counts every
// allocation, release and copy. The MLP of the demo runs end to end through
// the same network type on it — make_model, fit, evaluate, save and load —
// with the same results as on cpu<>, and the model allocates exactly once per
// plan (once at make_model, once when the batch or the optimizer's slots grow).
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>

#include <filesystem>
#include <vector>

namespace {
struct counting_memory {
  static inline std::size_t allocations = 0, releases = 0, copies = 0, bytes_copied = 0, live_bytes = 0;
  static constexpr bool host_accessible = true;
  static void* allocate(std::size_t n) {
    ++allocations;
    live_bytes += n;
    return ctnn::host_memory::allocate(n);
  }
  static void deallocate(void* p, std::size_t n) noexcept {
    if (!p) return;
    ++releases;
    live_bytes -= n;
    ctnn::host_memory::deallocate(p, n);
  }
  static void copy(void* d, const void* s, std::size_t n) noexcept {
    ++copies;
    bytes_copied += n;
    ctnn::host_memory::copy(d, s, n);
  }
  static void reset() { allocations = releases = copies = bytes_copied = 0; }
};
struct counting_cpu {
  using memory = counting_memory;
  static std::string name() { return "counting_cpu"; }
};
}  // namespace

// Its ops are the CPU's: the one line a host backend needs.
template <>
struct ctnn::ops<counting_cpu> : ctnn::ops<ctnn::cpu<>> {};

namespace {
using net = ctnn::sequential<ctnn::input<28, 28>, ctnn::flatten, ctnn::dense<256, ctnn::relu>,
                             ctnn::dense<128, ctnn::relu>, ctnn::dense<10>>;
static_assert(ctnn::Backend<counting_cpu>);
// the plan of the binding that runs on it (the same buffers as cpu<>'s here)
static_assert(net::plan<float, counting_cpu>::bytes(ctnn::role::parameter, 1) ==
              net::plan<float, ctnn::cpu<>>::bytes(ctnn::role::parameter, 1));

ctnn::data::in_memory<ctnn::shape<28, 28>, ctnn::sparse_labels> images(std::size_t n, std::uint64_t seed) {
  std::vector<float> x(n * 784);
  std::vector<std::int32_t> y(n);
  ctnn::rng g(seed);
  for (std::size_t i = 0; i < n; ++i) {
    y[i] = std::int32_t(g.below(10));
    for (std::size_t j = 0; j < 784; ++j) x[i * 784 + j] = float(g.uniform(0, 0.5)) + (j % 10 == std::size_t(y[i]) ? 0.5f : 0.0f);
  }
  return {x, y};
}
}  // namespace

TEST_CASE("a toy second backend runs the MLP end to end through the same network type") {
  counting_memory::reset();
  auto m = ctnn::make_model<net, float, counting_cpu>(42);
  CHECK(counting_memory::allocations == 1);  // one allocation for the whole plan at batch 1
  CHECK(counting_memory::live_bytes == net::plan<float, counting_cpu>::layout(1, 0).total);
  auto ref = ctnn::make_model<net>(42);

  const auto train = images(256, 1).batch(32);
  const auto test = images(64, 2).batch(64);
  ctnn::adam o1{1e-3}, o2{1e-3};
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};
  const auto h = ctnn::fit(m, loss, o1, train, ctnn::epochs{2}, ctnn::sparse_categorical_accuracy{},
                           ctnn::validation_data(test));
  const auto h_ref = ctnn::fit(ref, loss, o2, train, ctnn::epochs{2}, ctnn::sparse_categorical_accuracy{},
                               ctnn::validation_data(test));
  // growth: Adam's 2 slots (3 only with amsgrad; one reallocation), batch 32, then the validation batch of 64
  CHECK(counting_memory::allocations == 4);
  CHECK(counting_memory::live_bytes == net::plan<float, counting_cpu>::layout(64, 2).total);
  CHECK(counting_memory::copies >= 3);  // each growth copies the variables (and slots) over
  CHECK(h["loss"] == h_ref["loss"]);
  CHECK(h["val_sparse_categorical_accuracy"] == h_ref["val_sparse_categorical_accuracy"]);
  CHECK(std::vector<float>(m.parameters().begin(), m.parameters().end()) ==
        std::vector<float>(ref.parameters().begin(), ref.parameters().end()));
  CHECK(h["sparse_categorical_accuracy"].back() > 0.5);

  // weights files hold logical tensors: one backend's file loads into the other's model
  const auto path = std::filesystem::temp_directory_path() / "ctnn_counting_backend.ctnn";
  ctnn::io::save_weights(m, path);
  auto fresh = ctnn::make_model<net>(7);
  ctnn::io::load_weights(fresh, path);
  std::filesystem::remove(path);
  CHECK(std::vector<float>(fresh.parameters().begin(), fresh.parameters().end()) ==
        std::vector<float>(ref.parameters().begin(), ref.parameters().end()));
  const auto r = ctnn::evaluate(m, loss, test, ctnn::sparse_categorical_accuracy{});
  CHECK(r["sparse_categorical_accuracy"] == h["val_sparse_categorical_accuracy"].back());
  const std::size_t before = counting_memory::releases;
  { auto tmp = m; }  // a copy allocates and copies once, and releases on destruction
  CHECK(counting_memory::releases == before + 1);
}

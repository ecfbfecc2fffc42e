// save_optimizer_state / load_optimizer_state (train/optimizer_state_file.hpp): a run stopped
// after one epoch and resumed from its weights and optimizer state (into a model made from
// another seed) ends with the uninterrupted run's weights, bit for bit (same batches, same
// machine); resumed from the weights alone it does not (Adam's moments and count restart).
// The file's errors name what differs, and a refused file leaves the model as it was.
// model_checkpoint's save_optimizer_state writes the pair at every save.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/train/optimizer_state_file.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include <zlib.h>

using namespace ctnn;

namespace {
using net = sequential<input<4>, dense<8, relu>, dense<3>>;
using ds_t = data::in_memory<shape<4>, sparse_labels>;
ds_t make_data() {
  rng g(5);
  std::vector<float> x(64 * 4);
  std::vector<std::int32_t> y(64);
  for (std::size_t i = 0; i < 64; ++i) {
    for (int k = 0; k < 4; ++k) x[i * 4 + k] = float(g.uniform(-1, 1));
    y[i] = x[i * 4] > x[i * 4 + 1] ? (x[i * 4 + 2] > 0 ? 2 : 1) : 0;
  }
  return {x, y};
}
const sparse_categorical_crossentropy loss{.from_logits = true};
std::filesystem::path scratch(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("ctnn_optstate_" + name + "_" + std::to_string(::getpid()));
}
std::vector<float> params(model<net>& m) { return {m.parameters().begin(), m.parameters().end()}; }
std::string what_of(auto&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}
// Rewrites the file's CRC after a change, so that the check behind it is reached.
void fix_crc(std::vector<char>& d) {
  const auto crc = std::uint32_t(::crc32(0L, reinterpret_cast<const Bytef*>(d.data()), uInt(d.size() - 4)));
  std::memcpy(d.data() + d.size() - 4, &crc, 4);
}
}  // namespace

TEST_CASE("optimizer state: model_checkpoint with save_optimizer_state writes both files, and they resume the run exactly") {
  const auto data = make_data().batch(16);
  auto whole = make_model<net>(1);
  adam o1{0.01};
  fit(whole, loss, o1, data, epochs{3});

  const auto dir = scratch("ckpt");
  std::filesystem::create_directories(dir);
  auto first = make_model<net>(1);
  adam o2{0.01};
  model_checkpoint ckpt{.filepath = (dir / "w-{epoch}.ctnn").string(), .save_optimizer_state = true};
  fit(first, loss, o2, data, epochs{2}, ckpt);
  REQUIRE(ckpt.saved.size() == 2);
  for (auto& p : ckpt.saved) CHECK(std::filesystem::exists(p + ".opt"));

  auto resumed = make_model<net>(99);
  adam o3{0.01};
  io::load_weights(resumed, dir / "w-2.ctnn");
  io::load_optimizer_state(resumed, o3, dir / "w-2.ctnn.opt");
  CHECK(resumed.optimizer_state().iterations == 8);
  fit(resumed, loss, o3, data, epochs{1});
  CHECK(params(resumed) == params(whole));

  // without the option, weights only (Keras's save_weights_only)
  model_checkpoint plain{.filepath = (dir / "plain.ctnn").string()};
  fit(first, loss, o2, data, epochs{1}, plain);
  CHECK(std::filesystem::exists(dir / "plain.ctnn"));
  CHECK(!std::filesystem::exists(dir / "plain.ctnn.opt"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("optimizer state: a run resumed from its weights and optimizer state ends with the uninterrupted run's weights") {
  const auto data = make_data().batch(16);
  auto whole = make_model<net>(1);
  adam o1{0.01};
  fit(whole, loss, o1, data, epochs{2});

  auto first = make_model<net>(1);
  adam o2{0.01};
  fit(first, loss, o2, data, epochs{1});
  const auto w = scratch("w"), s = scratch("s");
  io::save_weights(first, w);
  io::save_optimizer_state(first, o2, s);

  auto resumed = make_model<net>(99);
  adam o3{0.01};
  io::load_weights(resumed, w);
  io::load_optimizer_state(resumed, o3, s);
  CHECK(resumed.optimizer_state().iterations == 4);
  CHECK(resumed.optimizer_state().steps == 4);
  fit(resumed, loss, o3, data, epochs{1});
  CHECK(params(resumed) == params(whole));

  auto weights_only = make_model<net>(99);
  adam o4{0.01};
  io::load_weights(weights_only, w);
  fit(weights_only, loss, o4, data, epochs{1});
  CHECK(params(weights_only) != params(whole));  // what the state file changes
  std::filesystem::remove(w);
  std::filesystem::remove(s);
}

TEST_CASE("optimizer state: the learning-rate scale and sgd's momentum come back") {
  const auto data = make_data().batch(32);
  auto m = make_model<net>(2);
  sgd o{0.05, 0.9};
  fit(m, loss, o, data, epochs{1});
  detail::training_access::optimizer_state(m).learning_rate_scale = 0.25;  // as reduce_lr_on_plateau leaves it
  const auto s = scratch("sgd");
  io::save_optimizer_state(m, o, s);
  auto r = make_model<net>(2);
  io::load_optimizer_state(r, o, s);
  CHECK(r.optimizer_state().learning_rate_scale == 0.25);
  CHECK(r.optimizer_state().iterations == 2);
  CHECK(std::equal(m.optimizer_slots().begin(), m.optimizer_slots().end(), r.optimizer_slots().begin()));
  std::filesystem::remove(s);
}

TEST_CASE("optimizer state: a file that does not fit is refused naming why, and the model keeps its state") {
  const auto data = make_data().batch(32);
  auto m = make_model<net>(3);
  adam o{0.01};
  const auto s = scratch("bad");
  CHECK(what_of([&] { io::save_optimizer_state(m, o, s); }).find("holds no optimizer state") != std::string::npos);
  fit(m, loss, o, data, epochs{1});
  io::save_optimizer_state(m, o, s);
  CHECK(what_of([&] { io::save_optimizer_state(m, sgd{0.1}, s); }).find("another optimizer type than sgd") != std::string::npos);

  auto target = make_model<net>(4);
  sgd t{0.1, 0.5};
  fit(target, loss, t, data, epochs{1});
  const std::vector<float> slots(target.optimizer_slots().begin(), target.optimizer_slots().end());
  auto unchanged = [&] {
    return target.optimizer_state().iterations == 2 &&
           std::equal(slots.begin(), slots.end(), target.optimizer_slots().begin());
  };
  CHECK(what_of([&] { io::load_optimizer_state(target, t, s); }) ==
        "load_optimizer_state: " + s.string() + ": it holds the state of optimizer 'adam', not of 'sgd'");
  CHECK(unchanged());
  CHECK(what_of([&] { io::load_optimizer_state(target, adam{0.01, 0.9, 0.999, 1e-7, true}, s); })
            .find("it holds 2 slots per parameter, but this adam uses 3") != std::string::npos);
  auto other = make_model<sequential<input<4>, dense<5, relu>, dense<3>>>(1);
  CHECK(what_of([&] { io::load_optimizer_state(other, o, s); }).find("it was saved from the network") != std::string::npos);

  const auto d = io::read_file<std::vector<char>, io::weights_error>(s, "test");
  const auto bad = scratch("bad2");
  auto refused = [&](std::vector<char> bytes, const std::string& part) {
    io::write_file_atomically(bad, std::string(bytes.begin(), bytes.end()));
    auto into = make_model<net>(3);
    adam a{0.01};
    fit(into, loss, a, data, epochs{1});
    const std::vector<float> before(into.optimizer_slots().begin(), into.optimizer_slots().end());
    const std::string what = what_of([&] { io::load_optimizer_state(into, a, bad); });
    CAPTURE(what);
    CHECK(what.find(part) != std::string::npos);
    CHECK(std::equal(before.begin(), before.end(), into.optimizer_slots().begin()));
  };
  refused(std::vector<char>(d.begin(), d.begin() + 10), "truncated");
  refused(std::vector<char>(d.begin(), d.end() - 9), "checksum mismatch");
  auto flipped = d;
  flipped[flipped.size() / 2] ^= 0x10;
  refused(flipped, "checksum mismatch");
  auto nan = d;  // the last slot value NaN, the checksum made to match
  const float q = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(nan.data() + nan.size() - 8, &q, 4);
  fix_crc(nan);
  refused(nan, "is not finite");
  auto scale = d;  // the learning-rate scale (after the name, slots, parameters and two counts) negative
  const std::size_t at = 8 + 4 + 8 + 4 + net::spec_string().size() + 4 + 4 + 4 + 8 + 8 + 8;
  const double neg = -1.0;
  std::memcpy(scale.data() + at, &neg, 8);
  fix_crc(scale);
  refused(scale, "the learning-rate scale -1");
  auto magic = d;
  magic[0] = 'X';
  refused(magic, "wrong magic");
  std::filesystem::remove(s);
  std::filesystem::remove(bad);
}

// read_weights_file (io/weights.hpp), read_optimizer_state_file (train/optimizer_state_file.hpp)
// and read_model_file (train/model_file.hpp): the files of any network read without its type; the
// ctnn-inspect tool (tools/ctnn_inspect.cpp), run on files written here and on corrupt ones (exit
// code 1 and the reader's message).
#include <doctest/doctest.h>

#include <ctnn/data/in_memory.hpp>
#include <ctnn/io/weights.hpp>
#include <ctnn/layers/dense.hpp>
#include <ctnn/losses/mean_squared_error.hpp>
#include <ctnn/optimizers/adam.hpp>
#include <ctnn/train/fit.hpp>
#include <ctnn/train/model.hpp>
#include <ctnn/train/model_file.hpp>
#include <ctnn/train/optimizer_state_file.hpp>

#include "io/weights_file.hpp"

#include <unistd.h>
#include <sys/wait.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

using namespace ctnn;
namespace fs = std::filesystem;

namespace {
using net = sequential<input<3>, dense<4, relu>, dense<2>>;
struct tmpdir {
  fs::path p;
  tmpdir() {
    p = fs::temp_directory_path() / ("ctnn_inspect_" + std::to_string(::getpid()));
    fs::create_directories(p);
  }
  ~tmpdir() { fs::remove_all(p); }
};
// A model whose variables hold 0, 0.5, 1, ... within each tensor (known statistics).
model<net> counting_model() {
  auto m = make_model<net>(1);
  m.for_each_variable([](const variable_ref& v) {
    for (std::size_t i = 0; i < v.extent; ++i) {
      const float f = 0.5f * float(i);
      std::memcpy(v.data + i * 4, &f, 4);
    }
  });
  return m;
}
}  // namespace

TEST_CASE("read_weights_file reads a file without the network type: header, tensors, values") {
  tmpdir t;
  const auto m = counting_model();
  io::save_weights(m, t.p / "w.ctnn");
  const io::weights_file f = io::read_weights_file(t.p / "w.ctnn");
  CHECK(f.version == 2);
  CHECK(f.architecture == net::spec_string());
  CHECK(f.fingerprint == net::fingerprint());
  REQUIRE(f.tensors.size() == 4);
  std::size_t k = 0;
  m.for_each_variable([&](const variable_ref& v) {
    const io::weights_file_tensor& s = f.tensors[k++];
    CHECK(s.layer == v.layer);
    CHECK(s.kind == v.kind);
    CHECK(s.name == v.name);
    CHECK(s.dtype_name() == "float32");
    CHECK(s.dims == std::vector<std::uint64_t>(v.dims.begin(), v.dims.begin() + std::ptrdiff_t(v.rank)));
    CHECK(s.elements == v.extent);
    CHECK(s.bytes == v.extent * 4);
    for (std::size_t i = 0; i < v.extent; ++i) CHECK(s.value(i, f.data) == 0.5 * double(i));
  });
  CHECK(f.tensors[0].shape() == "[3x4]");
}

TEST_CASE("read_weights_file refuses hostile files naming the file and the fault") {
  tmpdir t;
  io::save_weights(counting_model(), t.p / "w.ctnn");
  const auto good = weights_file::slurp(t.p / "w.ctnn");
  const auto refused = [&](const std::vector<char>& d, const char* why) {
    weights_file::spit(t.p / "bad.ctnn", d);
    CHECK_THROWS_WITH_AS(io::read_weights_file(t.p / "bad.ctnn"),
                         doctest::Contains(("read_weights_file: " + (t.p / "bad.ctnn").string() + ": " + why).c_str()),
                         io::weights_error);
  };
  refused(std::vector<char>(good.begin(), good.begin() + 10), "truncated (10 bytes");
  auto d = good;
  d[0] = 'X';
  refused(d, "not a ctnn weights file (wrong magic)");
  d = good;
  d[40] ^= 1;
  refused(d, "checksum mismatch");
  // Hand-edited with the CRC recomputed: an unknown dtype, a shape far past the file's end.
  const auto kernel = weights_file::find(good, 0, "kernel");
  d = good;
  d[kernel.dims_at - kernel.name.size() - 12 + 5] = 9;
  weights_file::put_crc(d);
  refused(d, "tensor 1 of 4 (layer 1 'kernel') has an unknown dtype 9");
  d = good;
  weights_file::set<std::uint64_t>(d, kernel.dims_at, std::uint64_t(1) << 62);
  weights_file::put_crc(d);
  refused(d, "truncated inside the values of tensor 1 of 4 (layer 1 'kernel')");
  CHECK_THROWS_WITH_AS(io::read_weights_file(t.p / "none.ctnn"), doctest::Contains("no such file"), io::weights_error);
}

TEST_CASE("read_optimizer_state_file reads the counts and slots without the network and optimizer types") {
  tmpdir t;
  auto m = make_model<net>(1);
  adam opt{0.01};
  const data::in_memory<shape<3>, dense_targets<shape<2>>> d({1, 2, 3, -1, 0, 1}, {1, 0, 0, 1});
  fit(m, mean_squared_error{}, opt, d.batch(2), epochs{1});
  io::save_optimizer_state(m, opt, t.p / "run.opt");
  const io::optimizer_state_file f = io::read_optimizer_state_file(t.p / "run.opt");
  CHECK(f.architecture == net::spec_string());
  CHECK(f.optimizer == opt.name());
  CHECK(f.slots_per_parameter == 2);
  CHECK(f.parameters == decltype(m)::parameter_count);
  CHECK(f.iterations == m.optimizer_state().iterations);
  CHECK(f.element_bytes == 4);
  CHECK(f.slot_bytes == m.optimizer_slots().size() * 4);
  CHECK(std::memcmp(f.data.data() + f.slots_offset, m.optimizer_slots().data(), f.slot_bytes) == 0);
  auto w = weights_file::slurp(t.p / "run.opt");
  w[0] = 'X';
  weights_file::spit(t.p / "bad.opt", w);
  CHECK_THROWS_WITH_AS(io::read_optimizer_state_file(t.p / "bad.opt"), doctest::Contains("wrong magic"),
                       io::weights_error);
}

#ifdef CTNN_INSPECT
namespace {
struct run_result {
  int status = -1;
  std::string out;
};
run_result run(const std::string& args) {
  run_result r;
  FILE* p = ::popen((std::string("'") + CTNN_INSPECT + "' " + args + " 2>&1").c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int s = ::pclose(p);
  r.status = WIFEXITED(s) ? WEXITSTATUS(s) : -1;
  return r;
}
}  // namespace

TEST_CASE("ctnn-inspect prints a weights file's header, tensors, totals and statistics") {
  tmpdir t;
  const std::string file = (t.p / "w.ctnn").string();
  io::save_weights(counting_model(), file);
  const auto r = run("--stats '" + file + "'");
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK(r.out.find("format: ctnn weights, version 2\n") != std::string::npos);
  CHECK(r.out.find("network: " + net::spec_string() + "\n") != std::string::npos);
  CHECK(r.out.find("tensors: 4\n") != std::string::npos);
  CHECK(r.out.find("  layer 1 parameter 'kernel' float32 [3x4] 12 elements 48 bytes\n"
                   "    min 0  max 5.5  mean 2.75  std ") != std::string::npos);
  CHECK(r.out.find("  layer 2 parameter 'bias' float32 [2] 2 elements 8 bytes\n") != std::string::npos);
  CHECK(r.out.find("total: 4 tensors, 26 elements, 104 bytes\n") != std::string::npos);
  const auto v = run("--values '" + file + "'");
  CHECK(v.out.find("  layer 2 parameter 'bias' float32 [2] 2 elements 8 bytes\n    [0] 0 0.5\n") != std::string::npos);
}

TEST_CASE("ctnn-inspect on a corrupt or foreign file: exit code 1 and the reader's message") {
  tmpdir t;
  const std::string file = (t.p / "w.ctnn").string();
  io::save_weights(counting_model(), file);
  auto d = weights_file::slurp(file);
  d.resize(d.size() - 7);
  weights_file::spit(file, d);
  const auto r = run("'" + file + "'");
  CHECK(r.status == 1);
  CHECK(r.out == "ctnn-inspect: read_weights_file: " + file + ": checksum mismatch: the file is corrupt or truncated\n");
  weights_file::spit(file, {'a', 'b'});
  CHECK(run("'" + file + "'").out == "ctnn-inspect: read_weights_file: " + file +
                                         ": truncated (2 bytes, too short for a header)\n");
  CHECK(run("").status == 2);  // usage
}

TEST_CASE("ctnn-inspect prints a model file: description, training configuration, tensors, optimizer state") {
  tmpdir t;
  const std::string file = (t.p / "m.ctnn-model").string();
  auto m = counting_model();
  io::save_model(m, file, {.loss = "mean_squared_error", .metrics = {"mae"}});
  auto r = run("--stats '" + file + "'");
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK(r.out.find("format: ctnn model, version 1\n"
                   "network: " + net::spec_string() + "\n") != std::string::npos);
  CHECK(r.out.find("policy: float32\n"
                   "layers: 2\n"
                   "  layer 1 dense<4, relu> (dense) (None, 3) -> (None, 4) 16 parameters 0 states\n"
                   "  layer 2 dense<2> (dense) (None, 4) -> (None, 2) 10 parameters 0 states\n"
                   "training configuration: optimizer (none); loss mean_squared_error; metrics mae\n"
                   "weights: version 2\n"
                   "tensors: 4\n"
                   "  layer 1 parameter 'kernel' float32 [3x4] 12 elements 48 bytes\n"
                   "    min 0  max 5.5  mean 2.75  std ") != std::string::npos);
  CHECK(r.out.find("total: 4 tensors, 26 elements, 104 bytes\n") != std::string::npos);
  CHECK(r.out.find("optimizer: ") == std::string::npos);

  adam opt{0.01};
  const data::in_memory<shape<3>, dense_targets<shape<2>>> d({1, 2, 3, -1, 0, 1}, {1, 0, 0, 1});
  fit(m, mean_squared_error{}, opt, d.batch(2), epochs{1});
  io::save_model(m, opt, file);
  r = run("'" + file + "'");
  CHECK(r.out.find("training configuration: optimizer adam, learning_rate 0.01, beta_1 0.9, beta_2 0.999, "
                   "epsilon 1e-07, amsgrad 0; loss (none); metrics (none)\n") != std::string::npos);
  CHECK(r.out.find("optimizer: adam, 2 slots per parameter, 26 parameters\niterations: 1, steps: 1") !=
        std::string::npos);

  auto bytes = weights_file::slurp(file);
  bytes[bytes.size() - 30] ^= 1;  // in the optimizer section
  weights_file::spit(file, bytes);
  r = run("'" + file + "'");
  CHECK(r.status == 1);
  CHECK(r.out == "ctnn-inspect: read_model_file: " + file +
                     ": checksum mismatch in section 4 of 4 ('OPTM'): the file is corrupt\n");
}
#else
TEST_CASE("ctnn-inspect (built by CMake: CTNN_INSPECT names it)") {
  MESSAGE("CTNN_SKIP: CTNN_INSPECT is not defined (the tool is built and named by tests/CMakeLists.txt)");
}
#endif

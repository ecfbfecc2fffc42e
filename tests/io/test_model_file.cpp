// save_model / load_model / read_model_file (train/model_file.hpp): a run saved after one epoch
// and loaded into a model made from another seed continues as the uninterrupted run, bit for bit
// (same batches, same machine); a model of another architecture, policy or optimizer is refused
// naming what differs (the layer: index, kind, shapes); every byte of a small file flipped and
// every cut is refused, and a refused file leaves the model as it was.
#include <doctest/doctest.h>

#include <ctnn/data/in_memory.hpp>
#include <ctnn/layers/dense.hpp>
#include <ctnn/losses/sparse_categorical_crossentropy.hpp>
#include <ctnn/optimizers/adagrad.hpp>
#include <ctnn/optimizers/adam.hpp>
#include <ctnn/optimizers/lion.hpp>
#include <ctnn/optimizers/options.hpp>
#include <ctnn/optimizers/rmsprop.hpp>
#include <ctnn/optimizers/sgd.hpp>
#include <ctnn/train/fit.hpp>
#include <ctnn/train/model.hpp>
#include <ctnn/train/model_file.hpp>

#include "io/weights_file.hpp"

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

using namespace ctnn;
namespace fs = std::filesystem;

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
fs::path scratch(const std::string& name) {
  return fs::temp_directory_path() / ("ctnn_model_file_" + name + "_" + std::to_string(::getpid()) + ".ctnn-model");
}
std::vector<float> params(const model<net>& m) { return {m.parameters().begin(), m.parameters().end()}; }
std::string what_of(auto&& f) {
  try {
    f();
  } catch (const io::weights_error& e) {
    return e.what();
  }
  return "(no weights_error)";
}
}  // namespace

TEST_CASE("save_model after one epoch, load_model into a model of another seed, one more epoch: two epochs, bit for bit") {
  const auto data = make_data().batch(16);
  auto whole = make_model<net>(1);
  adam o1{0.01};
  fit(whole, loss, o1, data, epochs{2});

  auto first = make_model<net>(1);
  adam o2{0.01};
  fit(first, loss, o2, data, epochs{1});
  const auto path = scratch("resume");
  io::save_model(first, o2, path, {.loss = loss.name(), .metrics = {"accuracy"}});

  auto resumed = make_model<net>(99);
  adam o3{0.01};
  const io::training_config config = io::load_model(resumed, o3, path);
  CHECK(config.loss == loss.name());
  CHECK(config.metrics == std::vector<std::string>{"accuracy"});
  CHECK(params(resumed) == params(first));
  CHECK(resumed.optimizer_state().iterations == 4);
  fit(resumed, loss, o3, data, epochs{1});
  CHECK(params(resumed) == params(whole));

  // the weights alone (Keras's compile=False), into a given model or a new one
  auto weights_only = make_model<net>(99);
  CHECK(io::load_model(weights_only, path).loss == loss.name());
  CHECK(params(weights_only) == params(first));
  CHECK(weights_only.optimizer_state().kind == nullptr);
  CHECK(params(io::load_model<net>(path)) == params(first));

  // what the file holds, read without the types
  const io::model_file f = io::read_model_file(path);
  CHECK(f.architecture == net::spec_string());
  CHECK(f.fingerprint == net::fingerprint());
  CHECK(f.policy == "float32");
  REQUIRE(f.layers.size() == 2);
  CHECK(f.layers[0] == io::model_file_layer{"dense<8, relu>", "dense", {4}, {8}, 40, 0});
  CHECK(f.layers[1] == io::model_file_layer{"dense<3>", "dense", {8}, {3}, 27, 0});
  CHECK(f.optimizer == "adam");
  CHECK(f.hyperparameters == optimizer_config{{"learning_rate", 0.01}, {"beta_1", 0.9}, {"beta_2", 0.999},
                                              {"epsilon", 1e-7}, {"amsgrad", 0}});
  REQUIRE(f.optimizer_state);
  CHECK(f.optimizer_state->iterations == 4);
  CHECK(f.weights.tensors.size() == 4);
  fs::remove(path);
}

TEST_CASE("load_model refuses another architecture naming the layer, another optimizer, hyperparameters or policy") {
  const auto data = make_data().batch(16);
  auto m = make_model<net>(1);
  adam opt{0.01};
  fit(m, loss, opt, data, epochs{1});
  const auto path = scratch("refuse");
  io::save_model(m, opt, path);
  const std::string file = "load_model: " + path.string() + ": ";

  using wider = sequential<input<4>, dense<9, relu>, dense<3>>;
  auto w = make_model<wider>(3);
  const std::vector<float> before(w.parameters().begin(), w.parameters().end());
  adam o{0.01};
  CHECK(what_of([&] { io::load_model(w, o, path); }) ==
        file + "layer 1 (dense) differs: the file's is dense<8, relu>, input (None, 4), output (None, 8), 40 "
               "parameters, 0 states; this model's is dense<9, relu>, input (None, 4), output (None, 9), 45 "
               "parameters, 0 states");
  CHECK(std::vector<float>(w.parameters().begin(), w.parameters().end()) == before);
  CHECK(w.optimizer_state().kind == nullptr);

  using deeper = sequential<input<4>, dense<8, relu>, dense<3>, dense<3>>;
  auto d = make_model<deeper>(3);
  CHECK(what_of([&] { io::load_model(d, path); }) ==
        file + "the file's network has 2 layers, this model's 3: layer 3 (dense) is not in the file");

  auto fresh = make_model<net>(7);
  const auto fresh_before = params(fresh);
  sgd s{0.01};
  CHECK(what_of([&] { io::load_model(fresh, s, path); }) == file + "it holds the state of optimizer 'adam', not of 'sgd'");
  adam faster{0.02};
  CHECK(what_of([&] { io::load_model(fresh, faster, path); }) ==
        file + "its adam has learning_rate 0.01, beta_1 0.9, beta_2 0.999, epsilon 1e-07, amsgrad 0; this one has "
               "learning_rate 0.02, beta_1 0.9, beta_2 0.999, epsilon 1e-07, amsgrad 0");
  CHECK(params(fresh) == fresh_before);

  auto wide = make_model<net, double>(3);
  CHECK(what_of([&] { io::load_model(wide, path); }) ==
        file + "it was saved under the precision policy 'float32' but this model's is 'float64'");

  // saved without an optimizer; an untrained model has no state to save
  io::save_model(fresh, path);
  CHECK(what_of([&] { io::load_model(m, opt, path); }) ==
        file + "it was saved without an optimizer's state (load it with load_model(m, path), the weights only)");
  CHECK(io::read_model_file(path).optimizer.empty());
  CHECK(what_of([&] { io::save_model(fresh, opt, path); }) ==
        "save_model: " + path.string() + ": the model holds no optimizer state (it has not been trained yet)");
  fs::remove(path);
}

TEST_CASE("load_model refuses every flipped byte and every cut of a small file, leaving the model as it was") {
  using tiny = sequential<input<2>, dense<2>>;
  const data::in_memory<shape<2>, sparse_labels> d({1, 2, -1, 0}, {1, 0});
  auto saved = make_model<tiny>(1);
  sgd opt{0.1, 0.9};
  fit(saved, loss, opt, d.batch(2), epochs{1});
  const auto path = scratch("flip"), bad = scratch("bad");
  io::save_model(saved, opt, path);
  const auto good = weights_file::slurp(path);

  auto m = make_model<tiny>(2);
  fit(m, loss, opt, d.batch(2), epochs{2});
  const std::vector<float> weights(m.parameters().begin(), m.parameters().end());
  const std::vector<float> slots(m.optimizer_slots().begin(), m.optimizer_slots().end());
  const auto iterations = m.optimizer_state().iterations;
  std::size_t refused = 0;
  const auto attempt = [&](const std::vector<char>& bytes) {
    weights_file::spit(bad, bytes);
    try {
      io::load_model(m, opt, bad);
    } catch (const io::weights_error&) {
      ++refused;
    }
  };
  for (std::size_t i = 0; i < good.size(); ++i) {
    auto flipped = good;
    flipped[i] = char(flipped[i] ^ 0x5a);
    attempt(flipped);
  }
  for (std::size_t n = 0; n < good.size(); ++n) attempt(std::vector<char>(good.begin(), good.begin() + std::ptrdiff_t(n)));
  CHECK(refused == 2 * good.size());
  CHECK(std::vector<float>(m.parameters().begin(), m.parameters().end()) == weights);
  CHECK(std::vector<float>(m.optimizer_slots().begin(), m.optimizer_slots().end()) == slots);
  CHECK(m.optimizer_state().iterations == iterations);
  weights_file::spit(bad, std::vector<char>(good.begin(), good.begin() + 40));
  CHECK(what_of([&] { io::read_model_file(bad); }).find("truncated inside section 1 of 4 ('DESC') of ") !=
        std::string::npos);
  auto corrupt = good;
  corrupt[30] ^= 1;
  weights_file::spit(bad, corrupt);
  CHECK(what_of([&] { io::read_model_file(bad); }) ==
        "read_model_file: " + bad.string() + ": checksum mismatch in section 1 of 4 ('DESC'): the file is corrupt");
  io::load_model(m, opt, path);  // the good file loads
  CHECK(std::vector<float>(m.parameters().begin(), m.parameters().end()) ==
        std::vector<float>(saved.parameters().begin(), saved.parameters().end()));
  fs::remove(path);
  fs::remove(bad);
}

TEST_CASE("the training configuration keeps each optimizer's hyperparameters by Keras's names") {
  using c = optimizer_config;
  CHECK(io::optimizer_config_of(sgd{0.1, 0.9, true}) == c{{"learning_rate", 0.1}, {"momentum", 0.9}, {"nesterov", 1}});
  CHECK(io::optimizer_config_of(rmsprop{0.001}) ==
        c{{"learning_rate", 0.001}, {"rho", 0.9}, {"momentum", 0}, {"epsilon", 1e-7}, {"centered", 0}});
  CHECK(io::optimizer_config_of(adagrad{0.01}) ==
        c{{"learning_rate", 0.01}, {"initial_accumulator_value", 0.1}, {"epsilon", 1e-7}});
  CHECK(io::optimizer_config_of(lion{0.001}) == c{{"learning_rate", 0.001}, {"beta_1", 0.9}, {"beta_2", 0.99}});
  const with_options opt{adam{0.01}, optimizer_options{.clipnorm = 1.0, .gradient_accumulation_steps = 2}};
  CHECK(io::optimizer_config_of(opt) ==
        c{{"learning_rate", 0.01}, {"beta_1", 0.9}, {"beta_2", 0.999}, {"epsilon", 1e-7}, {"amsgrad", 0},
          {"clipnorm", 1.0}, {"gradient_accumulation_steps", 2}, {"use_ema", 0}, {"count_micro_steps", 1}});
}

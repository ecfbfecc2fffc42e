// monitor.hpp, reduce_lr_on_plateau.hpp, early_stopping.hpp,
// model_checkpoint.hpp, csv_logger.hpp, terminate_on_nan.hpp,
// progress_bar.hpp, tensorboard.hpp: each callback driven directly with a scripted sequence of
// epoch logs (a fake context holding only what the hooks read), then once
// through fit. The expected epochs were traced by hand from Keras 3's code.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/train/csv_logger.hpp>
#include <ctnn/train/early_stopping.hpp>
#include <ctnn/train/model_checkpoint.hpp>
#include <ctnn/train/monitor.hpp>
#include <ctnn/train/progress_bar.hpp>
#include <ctnn/train/reduce_lr_on_plateau.hpp>
#include <ctnn/train/tensorboard.hpp>
#include <ctnn/train/terminate_on_nan.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

using namespace ctnn;
namespace fs = std::filesystem;

namespace {
using xor_net = sequential<input<2>, dense<8, ctnn::tanh>, dense<2>>;
using xor_data = data::in_memory<shape<2>, sparse_labels>;
xor_data make_xor() { return xor_data({0, 0, 0, 1, 1, 0, 1, 1}, {0, 1, 1, 0}); }

// The fields the callbacks read, and nothing else.
template <class M, class O>
struct fake_ctx : train_context<M, O> {
  history h;
  fake_ctx(M& m, O& o) : train_context<M, O>{m, o, h} {}
};

// Overwrites the epoch's "loss" with a scripted value (placed before the callback under test).
struct script_loss {
  std::vector<double> values;
  template <class C>
  void on_epoch_end(C& c) {
    c.epoch_logs.set("loss", values.at(c.epoch));
  }
};

// Copies the weights at the end of epoch 1.
struct keep_epoch1 {
  std::vector<float>* out;
  template <class C>
  void on_epoch_end(C& c) {
    if (c.epoch == 1) *out = {c.model.parameters().begin(), c.model.parameters().end()};
  }
};

// Runs cb over the scripted losses, calling after_epoch() after each epoch end; returns the
// epoch at whose end it set stop_training (or -1).
template <class CB, class Ctx, class After = void (*)()>
int drive(CB& cb, Ctx& ctx, const std::vector<double>& losses, After after_epoch = [] {}) {
  cb.on_train_begin(ctx);
  for (std::size_t e = 0; e < losses.size(); ++e) {
    ctx.epoch = e;
    ctx.epoch_logs = logs{};
    ctx.epoch_logs.set("loss", losses[e]);
    cb.on_epoch_end(ctx);
    after_epoch();
    if (ctx.stop_training) return int(e);
  }
  return -1;
}

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("ctnn-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}
std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
}  // namespace

TEST_CASE("monitor: automatic mode maximizes names with 'acc', a missing key is named") {
  CHECK(detail::maximizes("val_accuracy", monitor_mode::automatic));
  CHECK_FALSE(detail::maximizes("val_loss", monitor_mode::automatic));
  CHECK_FALSE(detail::maximizes("mean_absolute_error", monitor_mode::automatic));
  for (const char* up : {"auc", "val_auc", "precision", "val_precision", "recall", "val_recall"}) {
    INFO(up);
    CHECK(detail::maximizes(up, monitor_mode::automatic));  // Keras' direction "up" for these metrics
  }
  CHECK_FALSE(detail::maximizes("val_auc_loss", monitor_mode::automatic));
  CHECK(detail::maximizes("loss", monitor_mode::max));
  logs l;
  l.set("loss", 1);
  CHECK_THROWS_WITH_AS(detail::monitored(l, "val_loss", "early_stopping"),
                       "early_stopping: the monitored value 'val_loss' is not in the epoch logs (they have: loss)",
                       std::invalid_argument);
}

TEST_CASE("reduce_lr_on_plateau: reduces at the documented epochs (patience, cooldown, min_delta, min_lr)") {
  auto m = make_model<xor_net>(1);
  sgd opt{0.1};
  fake_ctx<decltype(m), decltype(opt)> ctx{m, opt};
  reduce_lr_on_plateau cb{.monitor = "loss", .factor = 0.5, .patience = 2, .min_delta = 0.01, .cooldown = 1, .min_lr = 0.02};
  // e0 best; e1 best; e2 wait 1; e3 wait 2 -> 0.05, cooldown; e4 cooldown ends, wait 1 (0.91 is not < 0.89);
  // e5 wait 2 -> 0.025; e6 wait 1; e7 wait 2 -> max(0.0125, 0.02) = 0.02; then lr == min_lr: no more reductions.
  const std::vector<double> losses{1.0, 0.9, 0.95, 0.92, 0.91, 0.899, 0.95, 0.96, 0.97, 0.98, 0.99, 1.0};
  std::vector<double> lr_after;
  CHECK(drive(cb, ctx, losses, [&] { lr_after.push_back(ctx.learning_rate()); }) == -1);
  CHECK(cb.reduced_at == std::vector<std::size_t>{3, 5, 7});
  const std::vector<double> want{0.1, 0.1, 0.1, 0.05, 0.05, 0.025, 0.025, 0.02, 0.02, 0.02, 0.02, 0.02};
  for (std::size_t e = 0; e < want.size(); ++e) CHECK(lr_after[e] == doctest::Approx(want[e]).epsilon(1e-12));

  SUBCASE("maximizing an accuracy") {
    m.reset_optimizer();
    sgd o2{0.1};
    fake_ctx<decltype(m), decltype(o2)> c2{m, o2};
    reduce_lr_on_plateau acc{.monitor = "accuracy", .factor = 0.1, .patience = 1, .min_delta = 0};
    acc.on_train_begin(c2);
    for (double v : {0.5, 0.6, 0.6}) {
      c2.epoch_logs = logs{};
      c2.epoch_logs.set("accuracy", v);
      acc.on_epoch_end(c2);
      ++c2.epoch;
    }
    CHECK(acc.reduced_at == std::vector<std::size_t>{2});
    CHECK(c2.learning_rate() == doctest::Approx(0.01));
  }
  SUBCASE("a schedule keeps running, scaled") {
    m.reset_optimizer();
    sgd o3{exponential_decay{0.1, 1, 0.5}};
    fake_ctx<decltype(m), decltype(o3)> c3{m, o3};
    reduce_lr_on_plateau r{.monitor = "loss", .factor = 0.5, .patience = 1};
    drive(r, c3, {1.0, 1.0});
    CHECK(c3.learning_rate() == doctest::Approx(0.05));
    // the schedule keeps decaying under the scale: 0.1 * 0.5 at count 1, halved
    CHECK(o3.learning_rate(1) * m.optimizer_state().learning_rate_scale == doctest::Approx(0.025));
  }
  SUBCASE("invalid hyperparameters") {
    reduce_lr_on_plateau bad{.factor = 1.0};
    CHECK_THROWS_WITH_AS(bad.on_train_begin(ctx), "reduce_lr_on_plateau: factor must be in (0, 1), got 1",
                         std::invalid_argument);
    reduce_lr_on_plateau bad2{.patience = -1};
    CHECK_THROWS_AS(bad2.on_train_begin(ctx), std::invalid_argument);
    reduce_lr_on_plateau missing{};  // val_loss by default
    missing.on_train_begin(ctx);
    CHECK_THROWS_WITH_AS(missing.on_epoch_end(ctx), doctest::Contains("'val_loss' is not in the epoch logs"),
                         std::invalid_argument);
  }
}

TEST_CASE("early_stopping: stops at the documented epochs") {
  auto m = make_model<xor_net>(1);
  sgd opt{0.1};
  const std::vector<double> losses{1.0, 0.8, 0.79, 0.81, 0.7, 0.72, 0.71, 0.73, 0.6};
  {
    // e0 best; e1 best (0.8 + 0.05 < 1); e2 wait 1 (0.79 + 0.05 >= 0.8); e3 wait 2 -> stop.
    fake_ctx<decltype(m), decltype(opt)> ctx{m, opt};
    early_stopping es{.monitor = "loss", .min_delta = 0.05, .patience = 2};
    CHECK(drive(es, ctx, losses) == 3);
    CHECK(es.stopped_epoch == 3);
    CHECK(es.best_epoch == 1);
    CHECK(*es.best == 0.8);
  }
  {
    // min_delta 0, patience 3: best at e2 and e4; e5, e6, e7 wait 1, 2, 3 -> stop at 7.
    fake_ctx<decltype(m), decltype(opt)> ctx{m, opt};
    early_stopping es{.monitor = "loss", .patience = 3};
    CHECK(drive(es, ctx, losses) == 7);
    CHECK(es.best_epoch == 4);
  }
  {
    // A baseline never beaten: improvements do not reset wait. e0 w1, e1 w2 (improved), e2 w3 -> stop.
    fake_ctx<decltype(m), decltype(opt)> ctx{m, opt};
    early_stopping es{.monitor = "loss", .patience = 2, .baseline = 0.5};
    CHECK(drive(es, ctx, {1.0, 0.9, 0.95, 0.96}) == 2);
    early_stopping plain{.monitor = "loss", .patience = 2};
    fake_ctx<decltype(m), decltype(opt)> c2{m, opt};
    CHECK(drive(plain, c2, {1.0, 0.9, 0.95, 0.96}) == 3);
  }
  {
    // start_from_epoch: the first two epochs are not looked at.
    fake_ctx<decltype(m), decltype(opt)> ctx{m, opt};
    early_stopping es{.monitor = "loss", .patience = 1, .start_from_epoch = 2};
    CHECK(drive(es, ctx, {1.0, 2.0, 3.0, 4.0}) == 3);
  }
  {
    fake_ctx<decltype(m), decltype(opt)> ctx{m, opt};
    early_stopping bad{.patience = -2};
    CHECK_THROWS_WITH_AS(bad.on_train_begin(ctx), "early_stopping: patience must be >= 0, got -2", std::invalid_argument);
  }
}

TEST_CASE("early_stopping: restore_best_weights puts back the best epoch's weights") {
  auto m = make_model<xor_net>(1);
  sgd opt{0.1};
  fake_ctx<decltype(m), decltype(opt)> ctx{m, opt};
  early_stopping es{.monitor = "loss", .patience = 2, .restore_best_weights = true};
  const std::vector<double> losses{1.0, 0.5, 0.7, 0.8, 0.9};
  es.on_train_begin(ctx);
  for (std::size_t e = 0; e < losses.size() && !ctx.stop_training; ++e) {
    auto p = m.parameters();
    std::fill(p.begin(), p.end(), float(e + 1));  // "training" leaves epoch e's mark in the weights
    ctx.epoch = e;
    ctx.epoch_logs = logs{};
    ctx.epoch_logs.set("loss", losses[e]);
    es.on_epoch_end(ctx);
  }
  CHECK(es.stopped_epoch == 3);
  CHECK(m.parameters()[0] == 4.0f);
  std::ostringstream out;
  es.out = &out;
  es.on_train_end(ctx);
  CHECK(std::all_of(m.parameters().begin(), m.parameters().end(), [](float v) { return v == 2.0f; }));
  CHECK(out.str() ==
        "Epoch 4: early stopping: loss did not improve for 2 epochs (patience 2); the best was 0.5 at epoch 2\n"
        "Restoring model weights from the end of the best epoch: 2.\n");
  // verbose = 0: quiet
  std::ostringstream quiet;
  es.out = &quiet;
  es.verbose = 0;
  es.on_train_end(ctx);
  CHECK(quiet.str().empty());
}

TEST_CASE("reduce_lr_on_plateau and early_stopping through fit act on the documented epochs") {
  auto m = make_model<xor_net>(3);
  sgd opt{0.1};
  script_loss script{{1.0, 0.9, 0.95, 0.97, 0.96, 0.99, 1.2, 1.3}};
  reduce_lr_on_plateau rl{.monitor = "loss", .factor = 0.5, .patience = 2, .min_delta = 0};
  early_stopping es{.monitor = "loss", .patience = 4, .restore_best_weights = true};
  std::vector<float> at_best;
  keep_epoch1 keep{&at_best};
  auto h = fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, make_xor().batch(2), epochs{8}, script, rl,
               es, keep);
  // rl: best at e1, waits e2, e3 -> halves at e3; e4, e5 -> halves at e5.
  // es: best at e1, waits e2..e5 -> stops at the end of e5 (6 epochs), then restores e1's weights.
  CHECK(rl.reduced_at == std::vector<std::size_t>{3, 5});
  CHECK(h.epochs() == 6);
  CHECK(es.stopped_epoch == 5);
  CHECK(h["loss"] == std::vector<double>{1.0, 0.9, 0.95, 0.97, 0.96, 0.99});
  const auto& lr = h["learning_rate"];  // logged before the callbacks run: the rate used in that epoch
  CHECK(lr[3] == doctest::Approx(0.1));
  CHECK(lr[4] == doctest::Approx(0.05));
  CHECK(lr[5] == doctest::Approx(0.05));
  CHECK(opt.learning_rate(m.optimizer_iterations()) * m.optimizer_state().learning_rate_scale ==
        doctest::Approx(0.025));
  CHECK(std::vector<float>(m.parameters().begin(), m.parameters().end()) == at_best);
}

TEST_CASE("model_checkpoint: writes only on improvement, atomically, with a formatted path") {
  const fs::path dir = temp_dir("ckpt");
  auto m = make_model<xor_net>(1);
  sgd opt{0.1};
  fake_ctx<decltype(m), decltype(opt)> ctx{m, opt};
  model_checkpoint cb{.filepath = (dir / "w-{epoch:02d}-{loss:.3f}.ctnn").string(), .monitor = "loss",
                      .save_best_only = true};
  drive(cb, ctx, {1.0, 0.9, 0.95, 0.8, 0.8});
  const std::vector<std::string> want{(dir / "w-01-1.000.ctnn").string(), (dir / "w-02-0.900.ctnn").string(),
                                      (dir / "w-04-0.800.ctnn").string()};
  CHECK(cb.saved == want);
  std::size_t files = 0;
  for (auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  CHECK(files == 3);  // no temporaries left behind
  auto other = make_model<xor_net>(99);
  io::load_weights(other, want.back());
  CHECK(std::vector<float>(other.parameters().begin(), other.parameters().end()) ==
        std::vector<float>(m.parameters().begin(), m.parameters().end()));

  model_checkpoint every{.filepath = (dir / "last.ctnn").string(), .monitor = "loss"};
  drive(every, ctx, {1.0, 2.0});
  CHECK(every.saved.size() == 2);
  model_checkpoint threshold{.filepath = (dir / "t.ctnn").string(), .monitor = "loss", .save_best_only = true,
                             .initial_value_threshold = 0.5};
  drive(threshold, ctx, {1.0, 0.6, 0.4});
  CHECK(threshold.saved.size() == 1);
  model_checkpoint bad_key{.filepath = (dir / "{nope}.ctnn").string(), .monitor = "loss"};
  bad_key.on_train_begin(ctx);
  CHECK_THROWS_WITH_AS(bad_key.on_epoch_end(ctx), doctest::Contains("names 'nope', which is not in the epoch logs"),
                       std::invalid_argument);
  model_checkpoint bad_spec{.filepath = (dir / "{epoch:x}.ctnn").string()};
  CHECK_THROWS_WITH_AS(bad_spec.on_train_begin(ctx), doctest::Contains("unsupported format 'epoch:x'"),
                       std::invalid_argument);
  fs::remove_all(dir);
}

TEST_CASE("model_checkpoint: plateau_monitor's rule (mode, NaN never improves), as early_stopping's") {
  const fs::path dir = temp_dir("ckpt-mode");
  auto m = make_model<xor_net>(1);
  sgd opt{0.1};
  fake_ctx<decltype(m), decltype(opt)> ctx{m, opt};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  model_checkpoint up{.filepath = (dir / "up-{epoch}.ctnn").string(), .monitor = "loss", .save_best_only = true,
                      .mode = monitor_mode::max};
  drive(up, ctx, {1.0, 0.5, 1.0, nan, 2.0});
  CHECK(up.saved == std::vector<std::string>{(dir / "up-1.ctnn").string(), (dir / "up-5.ctnn").string()});
  CHECK(*up.best == 2.0);
  model_checkpoint down{.filepath = (dir / "down-{epoch}.ctnn").string(), .monitor = "loss", .save_best_only = true};
  drive(down, ctx, {nan, 1.0, nan, 1.0, 0.5});
  CHECK(down.saved == std::vector<std::string>{(dir / "down-2.ctnn").string(), (dir / "down-5.ctnn").string()});
  // the same decision as plateau_monitor's with min_delta 0 at every step
  const plateau_monitor rule{"loss", monitor_mode::min};
  CHECK(rule.improves(1.0, std::nullopt));
  CHECK_FALSE(rule.improves(nan, 1.0));
  CHECK_FALSE(rule.improves(1.0, 1.0));
  fs::remove_all(dir);
}

TEST_CASE("model_checkpoint through fit keeps the best validation loss") {
  const fs::path dir = temp_dir("ckpt-fit");
  auto m = make_model<xor_net>(7);
  adam opt{0.05};
  const auto ds = make_xor().batch(4);
  model_checkpoint cb{.filepath = (dir / "best.ctnn").string(), .save_best_only = true};
  auto h = fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, ds, epochs{20}, validation_data(ds), cb);
  const auto& v = h["val_loss"];
  std::size_t improvements = 0;
  double best = std::numeric_limits<double>::infinity();
  for (double x : v)
    if (x < best) best = x, ++improvements;
  CHECK(cb.saved.size() == improvements);
  CHECK(*cb.best == best);
  CHECK(fs::exists(dir / "best.ctnn"));
  fs::remove_all(dir);
}

// Issue 24, item 7: checkpoints and CSV logs under a regular file, or with a name too long.
TEST_CASE("model_checkpoint and csv_logger: a path under a regular file or a name too long is an io_error naming it") {
  const fs::path dir = temp_dir("fs-errors");
  std::ofstream(dir / "file") << "a regular file";
  auto m = make_model<xor_net>(1);
  sgd opt{0.1};
  fake_ctx<decltype(m), decltype(opt)> ctx{m, opt};
  const fs::path under = dir / "file" / "w.ctnn", longer = dir / std::string(300, 'n');
  model_checkpoint into_file{.filepath = under.string(), .monitor = "loss"};
  CHECK_THROWS_WITH_AS(drive(into_file, ctx, {1.0}), ("write_file_atomically: " + under.string() + ": cannot stat (Not a directory)").c_str(),
                       io_error);
  model_checkpoint too_long{.filepath = longer.string(), .monitor = "loss"};
  CHECK_THROWS_WITH_AS(drive(too_long, ctx, {1.0}), ("write_file_atomically: " + longer.string() + ": cannot stat (File name too long)").c_str(),
                       io_error);
  for (bool append : {false, true}) {
    CAPTURE(append);
    csv_logger log{.filename = longer.string(), .append = append};
    CHECK_THROWS_AS([&] {
      log.on_train_begin(ctx);
      ctx.epoch_logs.set("loss", 0.5);
      log.on_epoch_end(ctx);
    }(), io_error);
  }
  csv_logger appending{.filename = longer.string(), .append = true};  // std::filesystem::exists threw filesystem_error
  CHECK_THROWS_WITH_AS(appending.on_train_begin(ctx),
                       ("csv_logger: " + longer.string() + ": cannot open for reading (File name too long)").c_str(), io_error);
  fs::remove_all(dir);
}

TEST_CASE("csv_logger: sorted keys, 0-based epochs, NA, append keeps the header once") {
  const fs::path dir = temp_dir("csv");
  const fs::path file = dir / "log.csv";
  auto m = make_model<xor_net>(1);
  sgd opt{0.1};
  fake_ctx<decltype(m), decltype(opt)> ctx{m, opt};
  csv_logger cb{.filename = file.string()};
  cb.on_train_begin(ctx);
  ctx.epoch_logs.set("loss", 0.5);
  ctx.epoch_logs.set("accuracy", 0.25);
  cb.on_epoch_end(ctx);
  CHECK(slurp(file) == "epoch,accuracy,loss\n0,0.25,0.5\n");
  ctx.epoch = 1;
  ctx.epoch_logs = logs{};
  ctx.epoch_logs.set("loss", 0.125);
  cb.on_epoch_end(ctx);
  CHECK(slurp(file) == "epoch,accuracy,loss\n0,0.25,0.5\n1,NA,0.125\n");

  csv_logger again{.filename = file.string(), .separator = ';', .append = true};
  again.on_train_begin(ctx);
  ctx.epoch = 0;
  again.on_epoch_end(ctx);
  CHECK(slurp(file) == "epoch,accuracy,loss\n0,0.25,0.5\n1,NA,0.125\n0;0.125\n");

  csv_logger fresh{.filename = file.string()};  // not appending: a new file
  auto h = fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, make_xor().batch(2), epochs{3}, accuracy{},
               fresh);
  const std::string text = slurp(file);
  CHECK(text.rfind("epoch,accuracy,compute_seconds,data_seconds,input_bound,input_share,learning_rate,loss,seconds\n0,", 0) == 0);
  CHECK(std::count(text.begin(), text.end(), '\n') == 4);
  CHECK(text.find("\n2,") != std::string::npos);
  CHECK(text.find(detail::format_number(h["loss"][2])) != std::string::npos);

  // Appending to what cannot be read: an io_error naming the logger and the path.
  csv_logger into_dir{.filename = dir.string(), .append = true};
  CHECK_THROWS_WITH_AS(into_dir.on_train_begin(ctx), ("csv_logger: " + dir.string() + ": is a directory, not a file").c_str(),
                       io_error);
  fs::remove_all(dir);
}

TEST_CASE("terminate_on_nan: stops fit at the bad batch instead of throwing") {
  using net = sequential<input<1>, dense<1>>;
  const data::in_memory<shape<1>, dense_targets<shape<1>>> ds({1, std::numeric_limits<float>::quiet_NaN(), 2}, {1, 1, 1});
  auto m = make_model<net>(1);
  sgd opt;
  std::ostringstream out;
  terminate_on_nan cb{&out};
  history h;
  CHECK_NOTHROW(h = fit(m, mean_squared_error{}, opt, ds.batch(1), epochs{3}, cb));
  CHECK(h.epochs() == 1);
  CHECK(m.optimizer_iterations() == 1);  // the bad batch's update was not applied, nor any after it
  CHECK(*cb.stopped_epoch == 0);
  CHECK(*cb.stopped_step == 1);
  CHECK(out.str() == "Batch 1: Invalid loss, terminating training\n");
  CHECK(std::isfinite(m.parameters()[0]));
  // The first batch bad: the epoch's loss is NaN, training still ends cleanly.
  const data::in_memory<shape<1>, dense_targets<shape<1>>> first({std::numeric_limits<float>::quiet_NaN(), 1}, {1, 1});
  terminate_on_nan cb2{nullptr};
  auto h2 = fit(m, mean_squared_error{}, opt, first.batch(1), epochs{2}, cb2);
  CHECK(h2.epochs() == 1);
  CHECK(std::isnan(h2["loss"][0]));
}

TEST_CASE("progress_bar: Keras' formats, one line per epoch when not a terminal") {
  CHECK(detail::per_step(0.0123) == "12ms/step");
  CHECK(detail::per_step(2.4) == "2s/step");
  CHECK(detail::per_step(0.00025) == "250us/step");
  CHECK(detail::eta_text(42.7) == "42s");
  CHECK(detail::eta_text(125) == "2:05");
  CHECK(detail::eta_text(3725) == "1:02:05");
  CHECK(detail::progress_value(0.51234) == "0.5123");
  CHECK(detail::progress_value(0.00012) == "1.2000e-04");

  auto m = make_model<xor_net>(7);
  adam opt;
  const auto ds = make_xor().batch(2);
  std::ostringstream out;
  fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, ds, epochs{2}, accuracy{}, validation_data(ds),
      progress_bar{out});
  const std::string text = out.str();
  CHECK(std::count(text.begin(), text.end(), '\n') == 2);
  CHECK(text.find('\r') == std::string::npos);
  CHECK(text.rfind("Epoch 1/2 - 2/2 - 0s - ", 0) == 0);
  CHECK(text.find("/step - loss: ") != std::string::npos);
  CHECK(text.find(" - accuracy: ") != std::string::npos);
  CHECK(text.find(" - val_loss: ") != std::string::npos);
  CHECK(text.find("\nEpoch 2/2 - 2/2 - ") != std::string::npos);
  CHECK(text.find("seconds") == std::string::npos);
  CHECK(text.find("learning_rate") == std::string::npos);

  std::ostringstream tty;
  progress_bar live{tty, true};
  live.interval = 0;  // redraw every step
  fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, ds, epochs{1}, accuracy{}, live);
  const std::string t = tty.str();
  CHECK(t.rfind("Epoch 1/1\n\r1/2 ", 0) == 0);  // step 1 of 2, then the bar
  CHECK(t.find("\u2501") != std::string::npos);
  CHECK(t.find("\r2/2 ") != std::string::npos);
  CHECK(t.find(" - accuracy: ") != std::string::npos);
  CHECK(t.back() == '\n');
}

TEST_CASE("fit: validation with a larger batch than training (the arena grows) leaves training unchanged") {
  const auto train = make_xor().batch(1);
  auto run = [&](bool validate) {
    auto m = make_model<xor_net>(5);
    adam opt{0.01};
    if (validate)
      fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, train, epochs{3}, validation_data(make_xor().batch(4)));
    else
      fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, train, epochs{3});
    return std::vector<float>(m.parameters().begin(), m.parameters().end());
  };
  CHECK(run(true) == run(false));
}

TEST_CASE("docs/training.md: the example runs (schedules, options and every callback together)") {
  const fs::path dir = temp_dir("doc");
  using net = sequential<input<4>, dense<3>>;
  auto model = make_model<net>(1);
  const auto loss = sparse_categorical_crossentropy{.from_logits = true};
  std::vector<float> x(32 * 4);
  std::vector<std::int32_t> y(32);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(i % 7) / 7;
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = std::int32_t(i % 3);
  const data::in_memory<shape<4>, sparse_labels> d(x, y);
  const auto train = d.batch(8);
  const auto test = d.batch(32);
  adam base{warmup{0.0, 500, cosine_decay{1e-3, 10'000, /*alpha=*/0.1}}};
  static_assert(std::is_same_v<decltype(base), adam<warmup<cosine_decay>>>);
  with_options opt{base, {.global_clipnorm = 1.0, .weight_decay = 0.004, .use_ema = true}};
  early_stopping stop{.monitor = "val_loss", .patience = 3, .restore_best_weights = true};
  reduce_lr_on_plateau plateau{.monitor = "val_loss", .factor = 0.5, .patience = 2};
  model_checkpoint best{.filepath = (dir / "best-{epoch:02d}-{val_loss:.4f}.ctnn").string(), .save_best_only = true};
  csv_logger csv{.filename = (dir / "training.csv").string()};
  std::ostringstream out;
  auto hist = fit(model, loss, opt, train, epochs{3}, sparse_categorical_accuracy{}, validation_data(test), plateau, stop,
                  best, csv, terminate_on_nan{}, progress_bar{out});
  CHECK(hist.epochs() == 3);
  CHECK(model.optimizer_iterations() == 12);
  CHECK(hist["learning_rate"][0] == doctest::Approx(4 * 1e-3 / 500));  // warmup: 4 updates of 500
  CHECK_FALSE(best.saved.empty());
  CHECK(fs::exists(dir / "training.csv"));
  fs::remove_all(dir);
}

// tensorboard: the event files decoded here, independently of the writer (a bitwise CRC-32C, a
// protobuf reader of the fields Event, Summary.Value and HistogramProto use).
#ifndef CTNN_TEST_TRAIN_DIR
#define CTNN_TEST_TRAIN_DIR "tests/train"
#endif
namespace {
std::uint32_t bitwise_crc32c(const unsigned char* p, std::size_t n) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
  }
  return ~c;
}
std::uint32_t masked(std::uint32_t c) { return ((c >> 15) | (c << 17)) + 0xA282EAD8u; }

struct pb_field {
  unsigned number = 0, wire = 0;
  std::uint64_t integer = 0;  // varint, fixed64 and fixed32 bits
  std::string bytes;
};
std::vector<pb_field> pb_fields(const std::string& s) {
  std::vector<pb_field> out;
  std::size_t i = 0;
  auto varint = [&] {
    std::uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      REQUIRE(i < s.size());
      const auto b = static_cast<unsigned char>(s[i++]);
      v |= std::uint64_t(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
  };
  while (i < s.size()) {
    pb_field f;
    const std::uint64_t key = varint();
    f.number = unsigned(key >> 3);
    f.wire = unsigned(key & 7);
    if (f.wire == 0) f.integer = varint();
    else if (f.wire == 1 || f.wire == 5) {
      const std::size_t n = f.wire == 1 ? 8 : 4;
      REQUIRE(i + n <= s.size());
      for (std::size_t k = 0; k < n; ++k) f.integer |= std::uint64_t(static_cast<unsigned char>(s[i + k])) << (8 * k);
      i += n;
    } else {
      REQUIRE(f.wire == 2);
      const std::size_t n = std::size_t(varint());
      REQUIRE(i + n <= s.size());
      f.bytes = s.substr(i, n);
      i += n;
    }
    out.push_back(std::move(f));
  }
  return out;
}
double as_double(std::uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}
float as_float(std::uint64_t bits) {
  const auto u = std::uint32_t(bits);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct tb_event {
  double wall_time = 0;
  std::int64_t step = 0;
  std::string file_version;
  std::map<std::string, float> scalars;
  std::map<std::string, std::vector<double>> histograms;  // num, min, max, sum of the buckets
};
// Every record of an event file, its framing and both CRCs checked.
std::vector<tb_event> read_events(const fs::path& p) {
  const std::string s = slurp(p);
  std::vector<tb_event> events;
  std::size_t i = 0;
  auto u32 = [&](std::size_t at) {
    std::uint32_t v;
    std::memcpy(&v, s.data() + at, 4);
    return v;
  };
  while (i < s.size()) {
    REQUIRE(i + 12 <= s.size());
    std::uint64_t len;
    std::memcpy(&len, s.data() + i, 8);
    CHECK(u32(i + 8) == masked(bitwise_crc32c(reinterpret_cast<const unsigned char*>(s.data() + i), 8)));
    REQUIRE(i + 12 + len + 4 <= s.size());
    const std::string data = s.substr(i + 12, std::size_t(len));
    CHECK(u32(i + 12 + std::size_t(len)) == masked(bitwise_crc32c(reinterpret_cast<const unsigned char*>(data.data()), data.size())));
    i += 12 + std::size_t(len) + 4;
    tb_event e;
    for (auto& f : pb_fields(data)) {
      if (f.number == 1) e.wall_time = as_double(f.integer);
      else if (f.number == 2) e.step = std::int64_t(f.integer);
      else if (f.number == 3) e.file_version = f.bytes;
      else if (f.number == 5)
        for (auto& v : pb_fields(f.bytes)) {
          REQUIRE(v.number == 1);
          std::string tag;
          std::optional<float> simple;
          std::vector<double> histo;
          for (auto& x : pb_fields(v.bytes)) {
            if (x.number == 1) tag = x.bytes;
            else if (x.number == 2) simple = as_float(x.integer);
            else if (x.number == 5) {
              double num = 0, lo = 0, hi = 0, total = 0;
              for (auto& h : pb_fields(x.bytes)) {
                if (h.number == 1) lo = as_double(h.integer);
                else if (h.number == 2) hi = as_double(h.integer);
                else if (h.number == 3) num = as_double(h.integer);
                else if (h.number == 7)
                  for (std::size_t k = 0; k + 8 <= h.bytes.size(); k += 8) {
                    std::uint64_t b;
                    std::memcpy(&b, h.bytes.data() + k, 8);
                    total += as_double(b);
                  }
              }
              histo = {num, lo, hi, total};
            }
          }
          if (simple) e.scalars[tag] = *simple;
          if (!histo.empty()) e.histograms[tag] = histo;
        }
    }
    events.push_back(std::move(e));
  }
  return events;
}
std::vector<fs::path> event_files(const fs::path& dir) {
  std::vector<fs::path> r;
  for (auto& e : fs::directory_iterator(dir)) r.push_back(e.path());
  std::sort(r.begin(), r.end());
  return r;
}
}  // namespace

TEST_CASE("tensorboard: CRC-32C and its mask as TFRecord frames use them") {
  const std::string v = "123456789";  // the check value of CRC-32C (RFC 3720)
  CHECK(detail::tfevents::crc32c(v) == 0xE3069283u);
  CHECK(bitwise_crc32c(reinterpret_cast<const unsigned char*>(v.data()), v.size()) == 0xE3069283u);
  CHECK(detail::tfevents::masked_crc32c(v) == masked(0xE3069283u));
}

TEST_CASE("tensorboard: Keras' layout, tags and steps, decoded from the files") {
  const fs::path dir = temp_dir("tb");
  auto m = make_model<xor_net>(2);
  sgd opt{0.1};
  tensorboard tb{.log_dir = dir, .update_freq = 2, .histogram_freq = 2};
  auto h = fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, make_xor().batch(2), epochs{3},
               sparse_categorical_accuracy{}, validation_data(make_xor().batch(4)), tb);
  const auto train = event_files(dir / "train"), val = event_files(dir / "validation");
  REQUIRE(train.size() == 1);
  REQUIRE(val.size() == 1);
  const std::string name = train[0].filename().string();
  CHECK(name.rfind("events.out.tfevents.", 0) == 0);
  CHECK(name.find("." + std::to_string(::getpid()) + ".") != std::string::npos);
  CHECK(name.substr(name.size() - 3) == ".v2");

  const auto te = read_events(train[0]), ve = read_events(val[0]);
  REQUIRE(!te.empty());
  CHECK(te[0].file_version == "brain.Event:2");
  CHECK(te[0].wall_time > 1.6e9);
  CHECK(ve[0].file_version == "brain.Event:2");
  // Epochs: steps 0, 1, 2; batches (2 a epoch, 6 in all): steps 2, 4, 6.
  std::vector<std::int64_t> epoch_steps, batch_steps, histogram_steps;
  for (auto& e : te) {
    if (e.scalars.count("epoch_loss")) {
      epoch_steps.push_back(e.step);
      const auto k = std::size_t(e.step);
      CHECK(e.scalars.at("epoch_loss") == float(h["loss"][k]));
      CHECK(e.scalars.at("epoch_sparse_categorical_accuracy") == float(h["sparse_categorical_accuracy"][k]));
      CHECK(e.scalars.at("epoch_learning_rate") == float(h["learning_rate"][k]));
      CHECK(e.scalars.at("epoch_input_share") == float(h["input_share"][k]));
      CHECK(e.scalars.count("epoch_val_loss") == 0);
    }
    if (e.scalars.count("batch_loss")) {
      batch_steps.push_back(e.step);
      CHECK(e.scalars.count("batch_sparse_categorical_accuracy") == 1);
      CHECK(e.scalars.at("batch_learning_rate") == doctest::Approx(0.1));
      CHECK(e.scalars.at("batch_input_share") >= 0);
      CHECK(e.scalars.at("batch_input_share") <= 1);
      // The epoch's last batch: the running loss is the epoch's loss.
      if (e.step % 2 == 0) CHECK(e.scalars.at("batch_loss") == float(h["loss"][std::size_t(e.step / 2 - 1)]));
    }
    if (!e.histograms.empty()) {
      histogram_steps.push_back(e.step);
      REQUIRE(e.histograms.count("layer_0/kernel/histogram") == 1);
      const auto& k = e.histograms.at("layer_0/kernel/histogram");
      CHECK(k[0] == 16);  // 2 x 8
      CHECK(k[3] == 16);  // every value in a bucket
      CHECK(k[1] < k[2]);
      CHECK(e.histograms.count("layer_1/bias/histogram") == 1);
    }
  }
  CHECK(epoch_steps == std::vector<std::int64_t>{0, 1, 2});
  CHECK(batch_steps == std::vector<std::int64_t>{2, 4, 6});
  CHECK(histogram_steps == std::vector<std::int64_t>{0, 2});  // every 2nd epoch, from the first
  std::vector<std::int64_t> val_steps;
  for (auto& e : ve)
    if (e.scalars.count("epoch_loss")) {
      val_steps.push_back(e.step);
      CHECK(e.scalars.at("epoch_loss") == float(h["val_loss"][std::size_t(e.step)]));
      CHECK(e.scalars.at("epoch_sparse_categorical_accuracy") == float(h["val_sparse_categorical_accuracy"][std::size_t(e.step)]));
    }
  CHECK(val_steps == std::vector<std::int64_t>{0, 1, 2});

  // A second fit on the same log_dir adds a file; without validation data, no validation file.
  tensorboard again{.log_dir = dir};
  fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, make_xor().batch(2), epochs{1}, again);
  CHECK(event_files(dir / "train").size() == 2);
  CHECK(event_files(dir / "validation").size() == 1);
  CHECK(again.train.path != tb.train.path);
  const auto second = read_events(again.train.path);
  REQUIRE(second.size() == 2);  // the version, epoch 0 (update_freq 0: no batch summaries)
  CHECK(second[1].step == 0);
  CHECK(second[1].scalars.count("batch_loss") == 0);
  fs::remove_all(dir);
}

TEST_CASE("tensorboard: the tensorboard package's EventAccumulator reads the files (skipped when it is not installed)") {
  const fs::path dir = temp_dir("tb-reader");
  auto m = make_model<xor_net>(2);
  sgd opt{0.1};
  tensorboard tb{.log_dir = dir, .update_freq = 2, .histogram_freq = 2};
  auto h = fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, make_xor().batch(2), epochs{3},
               sparse_categorical_accuracy{}, validation_data(make_xor().batch(4)), tb);
  const fs::path out = dir / "read.txt";
  const int rc = std::system(("python3 " CTNN_TEST_TRAIN_DIR "/read_tfevents.py " + (dir / "validation").string() + " > " +
                              out.string())
                                 .c_str());
  if (rc != 0 && WIFEXITED(rc) && (WEXITSTATUS(rc) == 3 || WEXITSTATUS(rc) == 127)) {
    MESSAGE("CTNN_SKIP: python3 with tensorboard is not available (pip install tensorboard)");
    fs::remove_all(dir);
    return;
  }
  REQUIRE(rc == 0);
  std::istringstream lines(slurp(out));
  std::string tag;
  std::int64_t step = 0;
  double value = 0;
  std::size_t val_losses = 0;
  while (lines >> tag >> step >> value)
    if (tag == "epoch_loss") {
      CHECK(float(value) == float(h["val_loss"][std::size_t(step)]));
      ++val_losses;
    }
  CHECK(val_losses == 3);
  REQUIRE(std::system(("python3 " CTNN_TEST_TRAIN_DIR "/read_tfevents.py " + (dir / "train").string() + " > " + out.string())
                          .c_str()) == 0);
  const std::string text = slurp(out);
  for (const char* line : {"epoch_learning_rate 2 0.10000000149011612", "batch_loss 6 ", "layer_0/kernel/histogram 0 16 ",
                           "layer_0/kernel/histogram 2 16 "})
    CHECK_MESSAGE(text.find(line) != std::string::npos, line);
  fs::remove_all(dir);
}

TEST_CASE("tensorboard: only rank 0 writes, a log_dir under a regular file is an io_error") {
  const fs::path dir = temp_dir("tb-role");
  auto m = make_model<xor_net>(1);
  sgd opt{0.1};
  fake_ctx<decltype(m), decltype(opt)> ctx{m, opt};
  ctx.role = process_role{1, 2};
  tensorboard worker{.log_dir = dir / "logs"};
  drive(worker, ctx, {1.0, 0.5});
  worker.on_train_end(ctx);
  CHECK_FALSE(fs::exists(dir / "logs"));
  ctx.role = process_role{0, 2};
  tensorboard chief{.log_dir = dir / "logs"};
  drive(chief, ctx, {1.0, 0.5});
  CHECK(event_files(dir / "logs" / "train").size() == 1);
  CHECK(read_events(chief.train.path).size() == 3);
  std::ofstream(dir / "file") << "a regular file";
  tensorboard under{.log_dir = dir / "file" / "logs"};
  CHECK_THROWS_AS(under.on_train_begin(ctx), io_error);
  try {
    under.on_train_begin(ctx);
  } catch (const io_error& e) {
    CHECK(std::string(e.what()).rfind("tensorboard: ", 0) == 0);
  }
  fs::remove_all(dir);
}

// What fit says while it trains: epoch_logger's compact and verbose lines,
// early_stopping's reason, progress_bar's verdict in words.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>

#include <sstream>
#include <string>
#include <vector>

using namespace ctnn;

namespace {
using tiny = sequential<input<2>, dense<2>>;
data::in_memory<shape<2>, sparse_labels> four() {
  return {std::vector<float>{0, 1, 1, 0, 1, 1, 0, 0}, std::vector<std::int32_t>{0, 1, 1, 0}};
}
// A callback adding 12 values to the epoch's logs.
struct many {
  template <class Ctx>
  void on_epoch_end(Ctx& ctx) {
    for (int i = 0; i < 12; ++i) ctx.epoch_logs.set("extra_value_" + std::to_string(i), 0.5);
  }
};
// A callback logging "score": 1.0, then worse every epoch.
struct script {
  template <class Ctx>
  void on_epoch_end(Ctx& ctx) {
    ctx.epoch_logs.set("score", 1.0 + double(ctx.epoch));
  }
};
std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}
}  // namespace

TEST_CASE("epoch_logger: durations never read 0.00s, Keras' short keys") {
  CHECK(detail::duration_text(0.0) == "<1ms");
  CHECK(detail::duration_text(0.0004) == "<1ms");
  CHECK(detail::duration_text(0.0123) == "12ms");
  CHECK(detail::duration_text(1.234) == "1.2s");
  CHECK(detail::duration_text(42.4) == "42s");
  CHECK(detail::short_key("sparse_categorical_accuracy") == "acc");
  CHECK(detail::short_key("val_sparse_categorical_accuracy") == "val_acc");
  CHECK(detail::short_key("val_mean_absolute_error") == "val_mae");
  CHECK(detail::short_key("loss") == "loss");
}

TEST_CASE("epoch_logger: the compact line fits 80 columns, abbreviated, verbose has every key") {
  auto m = make_model<tiny>(1);
  sgd opt;
  const auto d = four().batch(2);
  std::ostringstream brief, full;
  fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, d, epochs{2}, sparse_categorical_accuracy{},
      accuracy{}, validation_data(d), epoch_logger{brief}, epoch_logger{full, /*verbose=*/true});
  const auto lines = lines_of(brief.str());
  REQUIRE(lines.size() >= 2);
  CHECK(lines[0].rfind("epoch 1/2  ", 0) == 0);
  for (const auto& l : lines) CHECK(l.size() <= 80);
  const std::string b = brief.str();
  CHECK(b.find("  acc: ") != std::string::npos);
  CHECK(b.find("  loss: ") != std::string::npos);
  CHECK(b.find("val_acc: ") != std::string::npos);
  CHECK(b.find("sparse_categorical_accuracy") == std::string::npos);
  CHECK(b.find("learning_rate") == std::string::npos);
  CHECK(b.find("0.00s") == std::string::npos);
  CHECK(b.find("not input-bound") == std::string::npos);  // said only when it is input-bound
  const std::string f = full.str();
  CHECK(f.find("val_sparse_categorical_accuracy: ") != std::string::npos);
  CHECK(f.find("learning_rate: 0.01") != std::string::npos);
  CHECK(f.find(" - data: ") != std::string::npos);
  CHECK(f.find(" - loss: ") != std::string::npos);
  CHECK(f.find(" of step time is spent waiting for data") != std::string::npos);
  CHECK(f.find("0.00s") == std::string::npos);
}

TEST_CASE("epoch_logger: the demo's line (4 values, 2-digit epochs) fits 80 columns on one line") {
  struct demo_ctx {
    std::size_t epoch = 14, epochs = 15;
    logs epoch_logs;
  } ctx;
  for (auto [k, v] : {std::pair{"loss", 0.1575}, {"sparse_categorical_accuracy", 0.9409}, {"val_loss", 0.3240},
                      {"val_sparse_categorical_accuracy", 0.8974}, {"learning_rate", 0.000123}, {"seconds", 13.2},
                      {"data_seconds", 0.4}, {"compute_seconds", 12.1}, {"input_share", 0.2}, {"input_bound", 2.0}})
    ctx.epoch_logs.set(k, v);
  std::ostringstream out;
  epoch_logger{out}.on_epoch_end(ctx);
  CHECK(out.str() == "epoch 15/15  13s  loss: 0.1575  acc: 0.9409  val_loss: 0.3240  val_acc: 0.8974\n"
                     "   highly input-bound\n");
  ctx.epoch_logs.set("input_share", 0.01);
  std::ostringstream quiet;
  epoch_logger{quiet}.on_epoch_end(ctx);
  CHECK(quiet.str() == "epoch 15/15  13s  loss: 0.1575  acc: 0.9409  val_loss: 0.3240  val_acc: 0.8974\n");
}

TEST_CASE("epoch_logger: a line with more values than fit continues on indented lines") {
  auto m = make_model<tiny>(1);
  sgd opt;
  std::ostringstream out;
  epoch_logger log{out};
  log.columns = 60;
  fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, four().batch(2), epochs{1}, many{}, log);
  const auto lines = lines_of(out.str());
  REQUIRE(lines.size() > 1);
  for (const auto& l : lines) CHECK(l.size() <= 60);
  for (std::size_t i = 1; i < lines.size(); ++i) CHECK(lines[i].rfind("   ", 0) == 0);
  CHECK(out.str().find("extra_value_11: 0.5000") != std::string::npos);
}

TEST_CASE("early_stopping: says when and why it stopped, through fit, quiet with verbose = 0") {
  auto m = make_model<tiny>(1);
  sgd opt;
  std::ostringstream out;
  early_stopping es{.monitor = "score", .patience = 2, .baseline = 0.5};
  es.out = &out;
  auto h = fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, four().batch(2), epochs{10}, script{}, es);
  // Keras' baseline rule: epoch 1's 1.0 is the best but does not beat 0.5, so the wait goes on.
  CHECK(h.epochs() == 2);
  CHECK(es.stopped_epoch == 1);
  CHECK(es.best_epoch == 0);
  CHECK(out.str() ==
        "Epoch 2: early stopping: score did not improve for 2 epochs (patience 2); the best was 1 at epoch 1, "
        "which never beat the baseline 0.5\n");
  std::ostringstream quiet;
  early_stopping q{.monitor = "score", .patience = 0};
  q.out = &quiet;
  q.verbose = 0;
  fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, four().batch(2), epochs{10}, script{}, q);
  CHECK(q.stopped_epoch == 1);
  CHECK(quiet.str().empty());
}

TEST_CASE("progress_bar: the epoch's end says the input verdict in words, not as a number") {
  auto m = make_model<tiny>(1);
  sgd opt;
  std::ostringstream out;
  fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, four().batch(2), epochs{1}, progress_bar{out});
  const std::string s = out.str();
  CHECK(s.find("input_bound") == std::string::npos);
  const bool words = s.find(" - not input-bound") != std::string::npos ||
                     s.find(" - moderately input-bound") != std::string::npos ||
                     s.find(" - highly input-bound") != std::string::npos;
  CHECK(words);
}

TEST_CASE("fit warns when the first batch's output is all zeros") {
  // All-zero inputs and zero biases: every output is 0.
  data::in_memory<shape<2>, sparse_labels> zeros(std::vector<float>(8, 0.0f), std::vector<std::int32_t>{0, 1, 1, 0});
  auto m = make_model<tiny>(1);
  sgd opt;
  std::ostringstream captured;
  auto* old = std::clog.rdbuf(captured.rdbuf());
  fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, zeros.batch(2), epochs{2});
  std::clog.rdbuf(old);
  CHECK(captured.str().find("the network's output for the first batch is all zeros") != std::string::npos);
  CHECK(captured.str().find("he_uniform") != std::string::npos);
  // Said once, not per batch or epoch.
  CHECK(captured.str().find("all zeros", captured.str().find("all zeros") + 1) == std::string::npos);

  std::ostringstream quiet;
  old = std::clog.rdbuf(quiet.rdbuf());
  auto m2 = make_model<tiny>(1);
  fit(m2, sparse_categorical_crossentropy{.from_logits = true}, opt, four().batch(2), epochs{1});
  std::clog.rdbuf(old);
  CHECK(quiet.str().empty());
}

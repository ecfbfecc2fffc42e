// distributed/communicator.hpp and distributed/data_parallel.hpp without MPI: distributed::none
// changes nothing, and the hook's calls (broadcast before the first step, one all-reduce of the
// whole gradient region in phase 4, before the regularizers and the optimizer) seen through a
// communicator that records them. The MPI runs are tests/distributed/mpi/*.cpp.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/distributed/communicator.hpp>
#include <ctnn/distributed/data_parallel.hpp>
#include <ctnn/train/process_role.hpp>

// <ctnn/ctnn.hpp> never includes <mpi.h> (only ctnn/distributed/mpi.hpp does).
#if defined(MPI_VERSION) || defined(OMPI_MPI_H) || defined(MPI_INCLUDED)
#error "ctnn/ctnn.hpp included mpi.h"
#endif

#include <algorithm>
#include <barrier>
#include <cmath>
#include <thread>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

using namespace ctnn;

namespace {
using net = sequential<input<4>, dense<8, ctnn::tanh>, dense<3>>;
using l2_net = sequential<input<4>, dense<8, ctnn::tanh, l2<0.01f>>, dense<3>>;
data::in_memory<shape<4>, sparse_labels> toy_data() {
  std::vector<float> x(48 * 4);
  std::vector<std::int32_t> y(48);
  rng g(5);
  for (auto& v : x) v = float(g.uniform(-1, 1));
  for (std::size_t i = 0; i < 48; ++i) y[i] = std::int32_t(i % 3);
  return {x, y};
}
template <class M>
std::vector<float> params(const M& m) {
  return {m.parameters().begin(), m.parameters().end()};
}
const sparse_categorical_crossentropy xent{.from_logits = true};

// Rank 1 of 2 in a pretend job: a broadcast writes "rank 0's" values (root_value; text: peer_text),
// a float all-reduce records its span and replaces the gradients by reduced_value. A double
// all-reduce of 4 values is data_parallel's agreement: rank 0's slots are filled as rank 0 would
// (at the same point, failed at its agreement number peer_fails_at, or peer_skew agreements off);
// other double spans (the logs) are left as they are (rank 0 sent the same).
struct recording_comm {
  float root_value = 0.5f, reduced_value = 0.0f;
  std::vector<std::pair<const void*, std::size_t>>* reduced = nullptr;
  int* broadcasts = nullptr;
  int my_rank = 1;
  int peer_fails_at = -1, peer_skew = 0;
  const char* peer_text = "rank 0's exception";
  std::vector<double>* my_agreements = nullptr;  // this rank's own slots, failed flag and position
  int rank() const { return my_rank; }
  int size() const { return 2; }
  template <class T>
  void broadcast(std::span<T> s, int root) const {
    ++*broadcasts;
    if constexpr (std::is_same_v<T, float>) std::fill(s.begin(), s.end(), root_value);
    if constexpr (std::is_same_v<T, char>)
      if (root != my_rank) std::copy_n(peer_text, std::strlen(peer_text) + 1, s.begin());
  }
  template <class T>
  void all_reduce_average(std::span<T> s) const {
    if constexpr (std::is_same_v<T, float>) {
      reduced->emplace_back(s.data(), s.size());
      std::fill(s.begin(), s.end(), T(reduced_value));
    } else if (s.size() == 4) {
      const std::size_t me = std::size_t(my_rank), peer = 1 - me;
      if (my_agreements) my_agreements->insert(my_agreements->end(), {s[2 * me], s[2 * me + 1]});
      const int count = my_agreements ? int(my_agreements->size() / 2) - 1 : 0;
      s[2 * peer] = count == peer_fails_at ? 1.0 : 0.0;
      s[2 * peer + 1] = s[2 * me + 1] + 8.0 * peer_skew;
      for (auto& v : s) v /= 2;
    }
  }
  void barrier() const {}
};
static_assert(distributed::Communicator<recording_comm>);

// What a recording_comm saw in one fit: the float all-reduces, the agreements, the broadcasts.
struct record {
  std::vector<std::pair<const void*, std::size_t>> reduced;
  std::vector<double> agreements;
  int broadcasts = 0;
  // A communicator writing into this record (agreements recorded when asked).
  recording_comm comm(bool with_agreements = true) {
    recording_comm c{0.5f, 0.0f, &reduced, &broadcasts};
    if (with_agreements) c.my_agreements = &agreements;
    return c;
  }
};

struct throws_at_step_2 {
  template <class Ctx>
  void on_batch_end(Ctx& ctx) {
    if (ctx.step == 1) throw std::runtime_error("a callback failed");
  }
};
}  // namespace

TEST_CASE("distributed::none: rank 0 of 1, collectives leave the data as it is") {
  distributed::none c;
  static_assert(distributed::none::rank() == 0 && distributed::none::size() == 1);
  std::vector<float> v{1.f, 2.f, 3.f};
  c.all_reduce_average(std::span<float>(v));
  c.broadcast(std::span<float>(v), 0);
  c.barrier();
  CHECK(v == std::vector<float>{1.f, 2.f, 3.f});
  CHECK_THROWS_WITH_AS(c.broadcast(std::span<float>(v), 1),
                       "broadcast: root 1 is not a rank of distributed::none (size 1)", std::invalid_argument);
}

TEST_CASE("data_parallel<none> in fit: the same weights, bit for bit, as fit without it") {
  auto a = make_model<net>(3), b = make_model<net>(3);
  adam oa{0.01}, ob{0.01};
  fit(a, xent, oa, toy_data().batch(8), epochs{2});
  distributed::data_parallel<distributed::none> dp;
  const history h = fit(b, xent, ob, toy_data().batch(8), epochs{2}, dp);
  CHECK(params(a) == params(b));
  CHECK(dp.reductions() == 0);  // size 1: nothing to reduce
  CHECK(h["allreduce_seconds"][0] == 0.0);
}

TEST_CASE("data_parallel: rank 0's variables before the first step, one all-reduce of the whole gradient region per step") {
  record rec;
  auto m = make_model<net>(3);
  sgd opt{0.1};
  distributed::data_parallel<recording_comm> dp{rec.comm(false)};
  fit(m, xent, opt, toy_data().batch(8), epochs{1}, dp);
  // parameters, states, masks, slots, counts (int64), learning-rate scale (double)
  CHECK(rec.broadcasts == 6);
  REQUIRE(rec.reduced.size() == 6);  // 48 samples / 8
  CHECK(dp.reductions() == 6);
  for (const auto& [p, n] : rec.reduced) {
    CHECK(p == static_cast<const void*>(m.gradients().data()));
    CHECK(n == m.gradients().size());
  }
  // the broadcast weights (0.5) were never moved: the all-reduce (here: zeros) ran before the update
  const auto w = params(m);
  CHECK(std::all_of(w.begin(), w.end(), [](float v) { return v == 0.5f; }));
}

TEST_CASE("data_parallel: the regularizers' gradients are added after the all-reduce, not averaged away") {
  record rec;
  auto m = make_model<l2_net>(3);
  sgd opt{0.1};
  distributed::data_parallel<recording_comm> dp{rec.comm(false)};
  fit(m, xent, opt, toy_data().batch(48), epochs{1}, dp);
  REQUIRE(rec.reduced.size() == 1);
  // one step: the first layer's kernel moved by the l2 gradient only (w - 0.1 * 2 * 0.01 * w), the rest stayed
  const auto k = m.layer_parameters<0>();
  CHECK(k[0] == doctest::Approx(0.5f * (1 - 0.1f * 2 * 0.01f)).epsilon(1e-6));
  const auto out = m.layer_parameters<1>();
  CHECK(out[0] == 0.5f);
}

TEST_CASE("data_parallel: an agreement before the broadcast, before every gradient all-reduce, at every epoch's end and at the end") {
  record rec;
  auto m = make_model<net>(3);
  sgd opt{0.1};
  recording_comm c = rec.comm();
  distributed::data_parallel<recording_comm> dp{c};
  const history h = fit(m, xent, opt, toy_data().batch(8), epochs{2}, dp);
  // begin, 6 steps, epoch end, 6 steps, epoch end, end: positions 8 * sequence + point
  const std::vector<int> points{1, 2, 2, 2, 2, 2, 2, 3, 2, 2, 2, 2, 2, 2, 3, 4};
  REQUIRE(rec.agreements.size() == 2 * points.size());
  CHECK(dp.agreements() == points.size());
  for (std::size_t i = 0; i < points.size(); ++i) {
    CHECK(rec.agreements[2 * i] == 0.0);  // not failed
    CHECK(rec.agreements[2 * i + 1] == double(8 * i + std::size_t(points[i])));
  }
  CHECK(std::isfinite(h["loss"][1]));  // the logs' reduction (here: both ranks alike) keeps them
}

TEST_CASE("data_parallel: another rank's failure makes this rank throw, naming the rank and its error") {
  record rec;
  auto m = make_model<net>(3);
  sgd opt{0.1};
  recording_comm c = rec.comm();
  c.peer_fails_at = 3;  // at this rank's third step's agreement
  c.peer_text = "fit: the loss became NaN at epoch 1, step 3";
  distributed::data_parallel<recording_comm> dp{c};
  CHECK_THROWS_WITH_AS(fit(m, xent, opt, toy_data().batch(8), epochs{2}, dp),
                       "data_parallel: rank 0 failed: fit: the loss became NaN at epoch 1, step 3 (rank 1 stopped at "
                       "a step's gradient all-reduce)",
                       distributed_error);
  CHECK(dp.reductions() == 2);  // two steps, then the failure: no third all-reduce
  CHECK(rec.broadcasts == 6 + 1);   // the variables, then rank 0's message
}

TEST_CASE("data_parallel: this rank's failure is told to the others in the agreement they wait in, then rethrown") {
  record rec;
  auto m = make_model<net>(3);
  sgd opt{0.1};
  recording_comm c = rec.comm();
  throws_at_step_2 bad;
  distributed::data_parallel<recording_comm> dp{c};
  CHECK_THROWS_WITH_AS(fit(m, xent, opt, toy_data().batch(8), epochs{1}, dp, bad), "a callback failed", std::runtime_error);
  // begin, 2 steps, then the failure: failed = 1
  REQUIRE(rec.agreements.size() == 2 * 4);
  CHECK(rec.agreements[6] == 1.0);
  CHECK(rec.broadcasts == 6 + 1);  // the variables, then this rank's message (it fails first)
}

TEST_CASE("data_parallel: ranks at different points (a rank with fewer batches) throw out of step instead of hanging") {
  record rec;
  auto m = make_model<net>(3);
  sgd opt{0.1};
  recording_comm c = rec.comm();
  c.peer_skew = 1;
  distributed::data_parallel<recording_comm> dp{c};
  CHECK_THROWS_WITH_AS(fit(m, xent, opt, toy_data().batch(8), epochs{1}, dp),
                       "data_parallel: the ranks are out of step: rank 1 at the start of training (agreement 1), rank 0 "
                       "at the start of training (agreement 2); every rank must run the same number of steps and "
                       "epochs (equal shards; callbacks that stop training alike)",
                       distributed_error);
}

TEST_CASE("data_parallel: on rank 1 the callbacks write no file and print nothing, on rank 0 they do") {
  namespace fs = std::filesystem;
  for (const int rank : {1, 0}) {
    const fs::path dir = fs::temp_directory_path() / ("ctnn_dp_rank" + std::to_string(rank) + "_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    record rec;
    auto m = make_model<net>(3);
    sgd opt{0.1};
    recording_comm c = rec.comm(false);
    c.my_rank = rank;
    distributed::data_parallel<recording_comm> dp{c};
    std::ostringstream bar_out, log_out, stop_out;
    progress_bar bar{bar_out};
    epoch_logger line{log_out};
    csv_logger csv{(dir / "log.csv").string()};
    model_checkpoint ckpt{(dir / "w{epoch}.ctnn").string()};
    early_stopping stop{.monitor = "loss", .min_delta = 100, .patience = 0, .out = &stop_out};
    tensorboard tb{.log_dir = dir / "logs", .update_freq = 1};
    fit(m, xent, opt, toy_data().batch(8), epochs{2}, dp, bar, line, csv, ckpt, stop, tb);
    CHECK(stop.stopped_epoch == 1);  // decided on every rank
    const auto files = std::distance(fs::directory_iterator(dir), fs::directory_iterator{});
    if (rank == 1) {
      CHECK(files == 0);
      CHECK(bar_out.str().empty());
      CHECK(log_out.str().empty());
      CHECK(stop_out.str().empty());
    } else {
      CHECK(files == 4);  // log.csv, w1.ctnn, w2.ctnn, logs/ (tensorboard)
      CHECK(!bar_out.str().empty());
      CHECK(!log_out.str().empty());
      CHECK(!stop_out.str().empty());
    }
    fs::remove_all(dir);
  }
}

TEST_CASE("process_role: rank 0 of 1 unless data_parallel says otherwise, and only the chief writes") {
  static_assert(process_role{}.rank == 0 && process_role{}.size == 1);
  CHECK(process_role{}.chief());
  CHECK(!process_role{1, 2}.chief());
  struct with_role {
    process_role role;
  };
  struct without_role {};
  CHECK(ctnn::detail::writes_output(with_role{{0, 2}}));
  CHECK(!ctnn::detail::writes_output(with_role{{1, 2}}));
  CHECK(ctnn::detail::writes_output(without_role{}));  // a context of the user's own: it writes
  distributed::data_parallel<distributed::none> dp;
  CHECK(dp.process_role().chief());
  record rec;
  recording_comm c = rec.comm(false);
  distributed::data_parallel<recording_comm> dp1{c};
  CHECK(dp1.process_role().rank == 1);
  CHECK(dp1.process_role().size == 2);
}

// ---- sync_batch_norm (batch_normalization<..., Synchronized = true>) ----

namespace {
using bn_net = sequential<input<4>, dense<6>, batch_norm, dense<3>>;
using sync_bn_net = sequential<input<4>, dense<6>, sync_batch_norm, dense<3>>;

// Two replicas as two threads: average() waits for the other and takes the mean of both.
struct two_thread_replicas {
  std::barrier<> sync{2};
  std::vector<double> slot[2];
  void average(int me, double* v, std::size_t n) {
    slot[me].assign(v, v + n);
    sync.arrive_and_wait();
    for (std::size_t i = 0; i < n; ++i) v[i] = (slot[0][i] + slot[1][i]) / 2;
    sync.arrive_and_wait();  // both have read before either writes again
  }
};
}  // namespace

TEST_CASE("sync_batch_norm kernels: two replicas with half a batch each compute the whole batch's statistics and gradients") {
  constexpr std::size_t C = 5, rows = 24, half = rows / 2;
  std::vector<float> x(rows * C), dy(rows * C), gamma(C), beta(C);
  rng g(17);
  for (auto& v : x) v = float(g.uniform(-2, 3));
  for (auto& v : dy) v = float(g.uniform(-1, 1));
  for (std::size_t c = 0; c < C; ++c) {
    gamma[c] = float(0.5 + 0.2 * double(c));
    beta[c] = float(0.1 * double(c));
  }
  // the whole batch, one replica: the ordinary kernels
  std::vector<float> mm(C, 0.3f), mv(C, 1.0f), y(rows * C), mean(C), inv(C), dx(rows * C), dg(C), db(C);
  kernels::cpu::batch_norm_forward<C>(x.data(), y.data(), gamma.data(), beta.data(), mm.data(), mv.data(),
                                      mean.data(), inv.data(), rows, 0.9, 1e-3, true);
  kernels::cpu::batch_norm_backward<C>(x.data(), dy.data(), dx.data(), gamma.data(), mean.data(), inv.data(),
                                       dg.data(), db.data(), rows, true);
  // two replicas, rows [0, 12) and [12, 24)
  two_thread_replicas rep;
  std::vector<float> rmm[2], rmv[2], ry(rows * C), rmean[2], rinv[2], rdx(rows * C), rdg[2], rdb[2];
  auto replica = [&](int r) {
    rmm[r].assign(C, 0.3f);
    rmv[r].assign(C, 1.0f);
    rmean[r].resize(C), rinv[r].resize(C), rdg[r].resize(C), rdb[r].resize(C);
    const std::size_t at = std::size_t(r) * half * C;
    auto avg = [&](double* v, std::size_t n) { rep.average(r, v, n); };
    kernels::cpu::batch_norm_forward_cross_replica<C>(x.data() + at, ry.data() + at, gamma.data(), beta.data(),
                                                      rmm[r].data(), rmv[r].data(), rmean[r].data(), rinv[r].data(),
                                                      half, 0.9, 1e-3, avg);
    kernels::cpu::batch_norm_backward_cross_replica<C>(x.data() + at, dy.data() + at, rdx.data() + at, gamma.data(),
                                                       rmean[r].data(), rinv[r].data(), rdg[r].data(), rdb[r].data(),
                                                       half, avg);
  };
  std::thread other(replica, 1);
  replica(0);
  other.join();
  for (int r = 0; r < 2; ++r)
    for (std::size_t c = 0; c < C; ++c) {
      CHECK(rmean[r][c] == doctest::Approx(mean[c]).epsilon(1e-6));
      CHECK(rinv[r][c] == doctest::Approx(inv[c]).epsilon(1e-5));
      CHECK(rmm[r][c] == doctest::Approx(mm[c]).epsilon(1e-6));
      CHECK(rmv[r][c] == doctest::Approx(mv[c]).epsilon(1e-5));
    }
  for (std::size_t c = 0; c < C; ++c) {  // each replica's dgamma, dbeta: its own rows' sums
    CHECK(rdg[0][c] + rdg[1][c] == doctest::Approx(dg[c]).epsilon(1e-5));
    CHECK(rdb[0][c] + rdb[1][c] == doctest::Approx(db[c]).epsilon(1e-5));
  }
  double ydiff = 0, dxdiff = 0, dxmax = 0;
  for (std::size_t i = 0; i < rows * C; ++i) {
    ydiff = std::max(ydiff, double(std::abs(ry[i] - y[i])));
    dxdiff = std::max(dxdiff, double(std::abs(rdx[i] - dx[i])));
    dxmax = std::max(dxmax, double(std::abs(dx[i])));
  }
  CHECK(ydiff < 1e-5);
  CHECK(dxdiff < 1e-5 * dxmax);
  // per-replica statistics (batch_norm's) differ: the halves are not alike
  std::vector<float> hm(C, 0.3f), hv(C, 1.0f), hy(half * C), hmean(C), hinv(C);
  kernels::cpu::batch_norm_forward<C>(x.data(), hy.data(), gamma.data(), beta.data(), hm.data(), hv.data(),
                                      hmean.data(), hinv.data(), half, 0.9, 1e-3, true);
  double hdiff = 0;
  for (std::size_t c = 0; c < C; ++c) hdiff = std::max(hdiff, double(std::abs(hmean[c] - mean[c])));
  CHECK(hdiff > 1e-3);
}

TEST_CASE("sync_batch_norm: batch_norm outside data-parallel training, bit for bit, and its name") {
  CHECK(sync_batch_norm::name() == "sync_batch_norm");
  CHECK(batch_normalization<0.9, 1e-3, true>::name() == "batch_normalization<0.9, 0.001, true>");
  CHECK(sync_bn_net::parameter_count == bn_net::parameter_count);
  auto a = make_model<bn_net>(3);
  auto b = make_model<sync_bn_net>(3);
  REQUIRE(params(a) == params(b));
  adam oa{0.01}, ob{0.01};
  distributed::data_parallel<distributed::none> dp;
  fit(a, xent, oa, toy_data().batch(8), epochs{2});
  fit(b, xent, ob, toy_data().batch(8), epochs{2}, dp);
  CHECK(params(a) == params(b));
  const std::vector<float> sa(a.state().begin(), a.state().end()), sb(b.state().begin(), b.state().end());
  CHECK(sa == sb);
}

TEST_CASE("data_parallel: sync_batch_norm agrees before each of its all-reduces, and the model forgets the replicas after fit") {
  record rec;
  auto m = make_model<sync_bn_net>(3);
  sgd opt{0.1};
  {
    recording_comm c = rec.comm();
    distributed::data_parallel<recording_comm> dp{c};
    fit(m, xent, opt, toy_data().batch(16), epochs{1}, dp);
    // begin; per step: the layer's forward (5), its backward (5), the gradients (2); epoch end; end
    const std::vector<int> points{1, 5, 5, 2, 5, 5, 2, 5, 5, 2, 3, 4};
    REQUIRE(rec.agreements.size() == 2 * points.size());
    for (std::size_t i = 0; i < points.size(); ++i) CHECK(rec.agreements[2 * i + 1] == double(8 * i + std::size_t(points[i])));
  }
  // dp is gone: a fit without it must not reach it (ASan would see the stale pointer)
  fit(m, xent, opt, toy_data().batch(16), epochs{1});
  CHECK(std::isfinite(m.parameters()[0]));
}

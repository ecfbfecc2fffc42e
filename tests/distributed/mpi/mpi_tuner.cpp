// The tuner's distributed search (Keras Tuner's chief/worker mode) through mpirun -np 2
// (tests/CMakeLists.txt): rank 0 is the oracle and the only writer of the JSON state and hands
// out a trial whenever a rank is free. Random search on 2 ranks proposes and scores the same
// trials as on one process, each rank training some; Hyperband's rounds finish with as many trials
// as on one process, every continued trial starting from a completed one; a corrupt project
// makes rank 0 throw its io_error and rank 1 "tuner: rank 0 failed: ...". The killed-rank
// re-queue is tests/distributed/mpi_tuner/requeue.sh.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/distributed/mpi.hpp>
#include <ctnn/tuning/hyperband.hpp>
#include <ctnn/tuning/tuner.hpp>

#include <sstream>

#include "distributed/mpi_tuner/common.hpp"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <set>
#include <string>
#include <thread>

using namespace ctnn;
using namespace mpi_tuner_test;

namespace {
std::string what_of(auto&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}
// The trials trained on all ranks together.
std::size_t runs_on_all(distributed::mpi& comm, const tiny_tuner& t) {
  double n = double(t.trials_run());
  comm.all_reduce_average(std::span<double>(&n, 1));
  return std::size_t(std::lround(n * comm.size()));
}
}  // namespace

TEST_CASE("mpi tuner: random search on 2 ranks proposes and scores the trials one process does, each rank training its share") {
  distributed::mpi comm;
  REQUIRE(comm.size() == 2);
  const auto base = shared_dir(comm, "random");
  std::vector<tn::trial> ref;
  if (comm.rank() == 0) {  // the one-process search, on rank 0 alone
    tiny_tuner one(space(), std::make_unique<tn::random_search>(5), options(base / "one"));
    one.search(loss, train_data(), val_data(), 2, sparse_categorical_accuracy{});
    ref = one.trials();
  }
  comm.barrier();
  auto two_options = options(base / "two");
  std::ostringstream shown;
  two_options.progress = &shown;
  tiny_tuner two(comm, space(), std::make_unique<tn::random_search>(5), two_options);
  CHECK(two.rank() == comm.rank());
  CHECK(two.processes() == 2);
  two.search(loss, train_data(), val_data(), 2, sparse_categorical_accuracy{});
  if (comm.rank() == 1) CHECK(shown.str().empty());  // rank 0 shows every trial, rank 1's too
  else
    for (int n = 1; n <= 5; ++n) {
      CHECK(shown.str().find("Search: Running Trial #" + std::to_string(n) + "\n") != std::string::npos);
      CHECK(shown.str().find("Trial " + std::to_string(n) + " Complete [") != std::string::npos);
    }
  // rank 1 starts with trial 0, rank 0 with trial 1; then whichever is free takes the next
  CHECK(two.trials_run() >= 1);
  CHECK(runs_on_all(comm, two) == 5);
  REQUIRE(two.trials().size() == 5);  // every rank holds the final state
  for (auto& t : two.trials()) CHECK(t.status == tn::trial_status::completed);
  if (comm.rank() == 0) {
    REQUIRE(ref.size() == 5);
    for (std::size_t i = 0; i < 5; ++i) {
      CAPTURE(i);
      CHECK(two.trials()[i].hp == ref[i].hp);
      REQUIRE(two.trials()[i].score);
      CHECK(std::abs(*two.trials()[i].score - *ref[i].score) <= 1e-6);
      CHECK(two.trials()[i].metrics.at("val_loss").size() == 2);
    }
    // what rank 0 wrote is what a one-process tuner resumes: nothing left to run
    tiny_tuner again(space(), std::make_unique<tn::random_search>(5), options(base / "two"));
    REQUIRE(again.trials().size() == 5);
    CHECK(again.trials()[3].score == two.trials()[3].score);
    again.search(loss, train_data(), val_data(), 2, sparse_categorical_accuracy{});
    CHECK(again.trials_run() == 0);
    // every trial's best checkpoint exists (written by the rank that trained it)
    for (auto& t : two.trials()) CHECK(std::filesystem::exists(base / "two" / "p" / ("trial_" + t.id) / "checkpoint.ctnn"));
  }
  // the best model loads on every rank
  two.with_best_model([&](auto& m, const tn::trial& t) {
    CHECK(t.id == two.best_trials(1)[0].id);
    CHECK(m.parameters().size() > 0);
  });
  comm.barrier();
  if (comm.rank() == 0) std::filesystem::remove_all(base);
}

TEST_CASE("mpi tuner: Hyperband on 2 ranks runs the brackets and rounds one process does, promoting completed trials only") {
  // max_epochs 3, factor 3: bracket 1 trains 3 trials for 1 epoch, then continues the best for 3;
  // bracket 0 trains 2 for 3. The third trial runs beside the second of the next round: the oracle
  // must wait for it (oracle::ready) before promoting, not open bracket 0 early.
  distributed::mpi comm;
  const auto base = shared_dir(comm, "hyperband");
  auto oracle = [] { return std::make_unique<tn::hyperband>(3, 3); };
  auto plan = [](const tiny_tuner& t) {
    std::string s;
    for (auto& x : t.trials())
      s += std::to_string(x.hp.get<std::int64_t>("tuner/bracket")) + "/" + std::to_string(x.hp.get<std::int64_t>("tuner/round")) +
           (x.hp.has("tuner/trial_id") ? "<" + x.hp.get<std::string>("tuner/trial_id") : std::string{}) + " ";
    return s;
  };
  std::string one_plan(64, '\0');
  if (comm.rank() == 0) {
    tiny_tuner one(space(), oracle(), options(base / "one"));
    one.search(loss, train_data(), val_data(), 3, sparse_categorical_accuracy{});
    one_plan = plan(one);
    one_plan.resize(64, '\0');
  }
  comm.broadcast(std::span<char>(one_plan.data(), one_plan.size()), 0);
  one_plan = one_plan.c_str();
  tiny_tuner two(comm, space(), oracle(), options(base / "two"));
  two.search(loss, train_data(), val_data(), 3, sparse_categorical_accuracy{});
  CHECK(one_plan == "1/0 1/0 1/0 1/1<0002 0/0 0/0 ");
  CHECK(plan(two).substr(0, 24) == one_plan.substr(0, 24));  // which trial bracket 1 continues depends on the scores
  CHECK(plan(two).size() == one_plan.size());
  CHECK(two.trials_run() >= 1);
  CHECK(runs_on_all(comm, two) == 6);
  std::set<std::string> completed;
  for (auto& t : two.trials()) {
    CAPTURE(t.id);
    CHECK(t.status == tn::trial_status::completed);
    if (t.hp.has("tuner/trial_id")) CHECK(completed.count(t.hp.get<std::string>("tuner/trial_id")) == 1);
    completed.insert(t.id);
  }
  comm.barrier();
  if (comm.rank() == 0) std::filesystem::remove_all(base);
}

// Sleeps after every batch on rank 0 only: its trials take far longer than rank 1's, and rank 0
// answers rank 1 between its batches.
struct slow_on_rank0 {
  int rank;
  template <class Ctx>
  void on_batch_end(Ctx&) const {
    if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
};

TEST_CASE("mpi tuner: a free rank takes the next trial at once instead of waiting for a round") {
  // Rank 0's one trial takes 0.6-1.2 s; rank 1's take milliseconds, so rank 1 trains the other four
  // (in rounds of one trial per rank, rank 0 would have trained three).
  distributed::mpi comm;
  const auto base = shared_dir(comm, "dynamic");
  tiny_tuner two(comm, space(), std::make_unique<tn::random_search>(5), options(base));
  two.search(loss, train_data(), val_data(), 2, sparse_categorical_accuracy{}, slow_on_rank0{comm.rank()});
  CHECK(two.trials_run() == (comm.rank() == 0 ? 1u : 4u));
  REQUIRE(two.trials().size() == 5);
  for (auto& t : two.trials()) CHECK(t.status == tn::trial_status::completed);
  comm.barrier();
  if (comm.rank() == 0) std::filesystem::remove_all(base);
}

TEST_CASE("mpi tuner: without point-to-point messages the search runs in rounds of one trial per rank") {
  distributed::mpi comm;
  const auto base = shared_dir(comm, "rounds");
  tn::workers w = tn::workers_of(comm);
  REQUIRE(w.send);
  w.send = nullptr;  // as a communicator with collectives only
  w.receive = nullptr;
  tiny_tuner two(space(), std::make_unique<tn::random_search>(5), options(base), w);
  two.search(loss, train_data(), val_data(), 2, sparse_categorical_accuracy{}, slow_on_rank0{comm.rank()});
  // rounds {0, 1}, {2, 3}, {4}: rank 0 trains 0, 2 and 4 although its trials are the slow ones
  CHECK(two.trials_run() == (comm.rank() == 0 ? 3u : 2u));
  REQUIRE(two.trials().size() == 5);
  for (auto& t : two.trials()) CHECK(t.status == tn::trial_status::completed);
  comm.barrier();
  if (comm.rank() == 0) std::filesystem::remove_all(base);
}

TEST_CASE("mpi tuner: rank 0 failing to write its state mid-search stops every rank with its message") {
  distributed::mpi comm;
  const auto base = shared_dir(comm, "unwritable");
  tiny_tuner two(comm, space(), std::make_unique<tn::random_search>(5), options(base));
  if (comm.rank() == 0) {  // oracle.json can no longer be replaced: a directory stands in its place
    std::filesystem::remove(base / "p" / "oracle.json");
    std::filesystem::create_directories(base / "p" / "oracle.json" / "x");
  }
  comm.barrier();
  const std::string what = what_of([&] { two.search(loss, train_data(), val_data(), 2, sparse_categorical_accuracy{}); });
  CAPTURE(what);
  CHECK(what.find("oracle.json") != std::string::npos);
  if (comm.rank() == 1) CHECK(what.rfind("tuner: rank 0 failed: ", 0) == 0);
  comm.barrier();
  if (comm.rank() == 0) std::filesystem::remove_all(base);
}

TEST_CASE("mpi tuner: a corrupt project makes rank 0 throw its io_error and rank 1 name rank 0's failure") {
  distributed::mpi comm;
  const auto base = shared_dir(comm, "corrupt");
  if (comm.rank() == 0) {
    std::filesystem::create_directories(base / "p");
    io::write_file_atomically(base / "p" / "oracle.json", "{ not json");
  }
  comm.barrier();
  const std::string what =
      what_of([&] { tiny_tuner t(comm, space(), std::make_unique<tn::random_search>(5), options(base)); });
  CHECK(what.find("oracle.json") != std::string::npos);
  CHECK(what.find("not valid JSON") != std::string::npos);
  if (comm.rank() == 1) CHECK(what.rfind("tuner: rank 0 failed: ", 0) == 0);
  comm.barrier();
  if (comm.rank() == 0) std::filesystem::remove_all(base);
}

int main(int argc, char** argv) {
  distributed::mpi_session session(argc, argv);
  doctest::Context ctx(argc, argv);
  const int failures = ctx.run();
  int all = failures != 0;
  MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return all;
}

// ctnn/distributed/mpi.hpp through mpirun -np 2 (tests/CMakeLists.txt): the communicator's
// collectives and errors, and data-parallel fit: 2 ranks x batch 32 reach the weights of
// 1 process x batch 64 on the same data order (within float rounding, after 8 Adam steps),
// with every rank holding bit-identical weights and optimizer slots after every step; rank 0's
// checkpoint resumed alike on 2 ranks and on 1 process.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/distributed/mpi.hpp>
#include <ctnn/train/optimizer_state_file.hpp>

#include <algorithm>
#include <filesystem>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

using namespace ctnn;

namespace {
using net = sequential<input<8>, dense<16, ctnn::tanh>, dense<4>>;
const sparse_categorical_crossentropy xent{.from_logits = true};
constexpr std::size_t samples = 256, global_batch = 64;

struct toy {
  std::vector<float> x;
  std::vector<int> y;
};
toy toy_data() {
  toy t;
  rng g(11);
  for (std::size_t i = 0; i < samples; ++i) {
    float s = 0;
    for (std::size_t j = 0; j < 8; ++j) {
      const float v = float(g.uniform(-1, 1));
      t.x.push_back(v);
      s += v * float(j % 3);
    }
    t.y.push_back(int(i % 2) * 2 + (s > 0 ? 1 : 0));
  }
  return t;
}
std::vector<float> copy(std::span<const float> s) { return {s.begin(), s.end()}; }

// After every step: rank 0's parameters and slots, broadcast, must equal this rank's bit for bit.
struct identical_on_every_rank {
  distributed::mpi comm;
  int steps = 0, differing_steps = 0;
  template <class Ctx>
  void on_batch_end(Ctx& ctx) {
    ++steps;
    auto mine = copy(ctx.model.parameters());
    auto slots = copy(ctx.model.optimizer_slots());
    auto root = mine, root_slots = slots;
    comm.broadcast(std::span<float>(root), 0);
    comm.broadcast(std::span<float>(root_slots), 0);
    if (std::memcmp(root.data(), mine.data(), mine.size() * sizeof(float)) != 0 ||
        std::memcmp(root_slots.data(), slots.data(), slots.size() * sizeof(float)) != 0)
      ++differing_steps;
  }
};

double max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(double(a[i]) - double(b[i])));
  return d;
}
}  // namespace

TEST_CASE("mpi: rank and size, broadcast from any root, all_reduce_average = sum / size") {
  distributed::mpi comm;
  REQUIRE(comm.size() == 2);
  CHECK((comm.rank() == 0 || comm.rank() == 1));
  std::vector<float> v{float(comm.rank() * 10), float(comm.rank() * 10 + 1)};
  comm.broadcast(std::span<float>(v), 1);
  CHECK(v == std::vector<float>{10.f, 11.f});
  std::vector<std::uint8_t> bytes{std::uint8_t(comm.rank() + 1), 7};
  comm.broadcast(std::span<std::uint8_t>(bytes), 0);
  CHECK(bytes == std::vector<std::uint8_t>{1, 7});
  std::vector<float> f{float(comm.rank() + 1), 3.f * float(comm.rank())};
  comm.all_reduce_average(std::span<float>(f));
  CHECK(f == std::vector<float>{1.5f, 1.5f});
  std::vector<double> d{double(comm.rank()), 1e300};
  comm.all_reduce_average(std::span<double>(d));
  CHECK(d == std::vector<double>{0.5, 1e300});
  comm.barrier();
  distributed::data_parallel<distributed::mpi> dp{comm};
  CHECK(dp.size() == 2);
}

TEST_CASE("mpi: a bad root and a failed MPI call are exceptions naming what failed") {
  distributed::mpi comm;
  std::vector<float> v(3);
  CHECK_THROWS_WITH_AS(comm.broadcast(std::span<float>(v), 2),
                       "broadcast: root 2 is not a rank of this communicator (size 2)", std::invalid_argument);
  try {
    distributed::mpi bad{MPI_COMM_NULL};
    FAIL("distributed::mpi{MPI_COMM_NULL} did not throw");
  } catch (const distributed_error& e) {
    const std::string what = e.what();
    CHECK(what.rfind("MPI_Comm_set_errhandler: ", 0) == 0);
    CHECK(what.size() > std::string("MPI_Comm_set_errhandler: ").size());
  }
}

TEST_CASE("data-parallel fit: 2 ranks x batch 32 == 1 process x batch 64, bit-identical ranks after every step") {
  distributed::mpi comm;
  REQUIRE(comm.size() == 2);
  const toy t = toy_data();
  const auto all = data::from_tensors<shape<8>>(t.x, t.y);

  // one process, the global batch: every rank computes it alone
  auto ref = make_model<net>(42);
  const auto initial = copy(ref.parameters());
  adam ref_opt{0.01};
  fit(ref, xent, ref_opt, all.batch(global_batch), epochs{2});

  // this rank's half of every global batch; rank 1 starts from other weights, which the
  // broadcast before the first step replaces with rank 0's
  auto m = make_model<net>(42 + std::uint64_t(comm.rank()));
  adam opt{0.01};
  distributed::data_parallel<distributed::mpi> dp{comm};
  identical_on_every_rank check{comm};
  const auto shard = all.shard(std::size_t(comm.size()), std::size_t(comm.rank()));
  const history h = fit(m, xent, opt, shard.batch(global_batch / 2), epochs{2}, dp, check);

  CHECK(check.steps == 8);
  CHECK(check.differing_steps == 0);
  CHECK(dp.reductions() == 8);
  CHECK(h["allreduce_seconds"][1] >= 0.0);
  CHECK(m.optimizer_iterations() == 8);
  const auto got = copy(m.parameters()), want = copy(ref.parameters());
  const double diff = max_difference(got, want), moved = max_difference(want, initial);
  std::printf("rank %d: max |2x32 - 1x64| = %.3g (the weights moved up to %.3g)\n", comm.rank(), diff, moved);
  CHECK(moved > 1e-2);
  CHECK(diff <= 1e-5);

  // without the all-reduce a rank follows its own half: far from the 1 x 64 weights
  auto alone = make_model<net>(42);
  adam alone_opt{0.01};
  fit(alone, xent, alone_opt, shard.batch(global_batch / 2), epochs{2});
  CHECK(max_difference(copy(alone.parameters()), want) > 1e-3);
}

TEST_CASE("data-parallel fit with overlap: gradients reduced in per-layer buckets during backward, 2 x 32 == 1 x 64, bit-identical ranks") {
  distributed::mpi comm;
  REQUIRE(comm.size() == 2);
  const toy t = toy_data();
  const auto all = data::from_tensors<shape<8>>(t.x, t.y);
  auto ref = make_model<net>(42);
  adam ref_opt{0.01};
  fit(ref, xent, ref_opt, all.batch(global_batch), epochs{2});

  auto m = make_model<net>(42 + std::uint64_t(comm.rank()));
  adam opt{0.01};
  // 256 bytes: the last layer's 68 gradients (272 bytes) are one bucket, started before the first
  // layer's backward runs; the first layer's 144 (576 bytes) the second
  distributed::data_parallel<distributed::mpi> dp{comm, {.bucket_bytes = 256}};
  identical_on_every_rank check{comm};
  const auto shard = all.shard(std::size_t(comm.size()), std::size_t(comm.rank()));
  fit(m, xent, opt, shard.batch(global_batch / 2), epochs{2}, dp, check);
  CHECK(dp.buckets() == 2 * 8);
  CHECK(dp.reductions() == 8);
  CHECK(check.differing_steps == 0);
  const double diff = max_difference(copy(m.parameters()), copy(ref.parameters()));
  std::printf("rank %d: overlap, max |2x32 - 1x64| = %.3g\n", comm.rank(), diff);
  CHECK(diff <= 1e-5);

  // the default (64 KiB) holds this small model in one all-reduce after backward
  distributed::data_parallel<distributed::mpi> whole{comm};
  auto m2 = make_model<net>(42);
  adam opt2{0.01};
  fit(m2, xent, opt2, shard.batch(global_batch / 2), epochs{1}, whole);
  CHECK(whole.buckets() == 0);
  CHECK(whole.reductions() == 4);
}

TEST_CASE("data-parallel resume: rank 0's checkpoint of a 2-rank job resumes alike on 1 process and on 2 ranks") {
  distributed::mpi comm;
  REQUIRE(comm.size() == 2);
  const toy t = toy_data();
  const auto all = data::from_tensors<shape<8>>(t.x, t.y);
  const auto shard = all.shard(std::size_t(comm.size()), std::size_t(comm.rank()));

  // one file name for the job: rank 0's process id, broadcast
  std::vector<float> tag{comm.rank() == 0 ? float(::getpid() % 1000000) : 0.0f};
  comm.broadcast(std::span<float>(tag), 0);
  const auto path = std::filesystem::temp_directory_path() /
                    ("ctnn_mpi_resume_" + std::to_string(long(tag[0])) + ".ctnn");

  // a 2-rank job writes its checkpoint (rank 0 only) after one epoch
  auto first = make_model<net>(7);
  adam first_opt{0.01};
  distributed::data_parallel<distributed::mpi> dp1{comm};
  fit(first, xent, first_opt, shard.batch(global_batch / 2), epochs{1}, dp1,
      model_checkpoint{.filepath = path.string()});
  comm.barrier();  // rank 0 has renamed the file into place
  REQUIRE(std::filesystem::exists(path));
  const auto saved = copy(first.parameters());

  // resumed on 1 process (every rank alone, the global batch)
  auto one = make_model<net>(99);
  io::load_weights(one, path);
  CHECK(max_difference(copy(one.parameters()), saved) == 0.0);
  adam one_opt{0.01};
  fit(one, xent, one_opt, all.batch(global_batch), epochs{1});

  // resumed on 2 ranks: only rank 0 reads the file; the broadcast at train begin gives rank 1 its weights
  auto two = make_model<net>(99 + std::uint64_t(comm.rank()));
  if (comm.rank() == 0) io::load_weights(two, path);
  adam two_opt{0.01};
  distributed::data_parallel<distributed::mpi> dp2{comm};
  fit(two, xent, two_opt, shard.batch(global_batch / 2), epochs{1}, dp2);

  const auto a = copy(one.parameters()), b = copy(two.parameters());
  std::printf("rank %d: resumed max |2x32 - 1x64| = %.3g (moved %.3g from the checkpoint)\n", comm.rank(),
              max_difference(a, b), max_difference(a, saved));
  CHECK(max_difference(a, saved) > 1e-3);
  CHECK(max_difference(a, b) <= 1e-5);
  comm.barrier();
  if (comm.rank() == 0) std::filesystem::remove(path);
}

TEST_CASE("data-parallel resume with the optimizer state: rank 0's model_checkpoint writes weights and Adam's state, rank 0 loads both, the job ends as an uninterrupted one") {
  distributed::mpi comm;
  const toy t = toy_data();
  const auto shard = data::from_tensors<shape<8>>(t.x, t.y).shard(std::size_t(comm.size()), std::size_t(comm.rank()));
  std::vector<float> tag{comm.rank() == 0 ? float(::getpid() % 1000000) : 0.0f};
  comm.broadcast(std::span<float>(tag), 0);
  const auto base = std::filesystem::temp_directory_path() / ("ctnn_mpi_optstate_" + std::to_string(long(tag[0])));

  // uninterrupted: 2 epochs on 2 ranks
  auto whole = make_model<net>(7);
  adam whole_opt{0.01};
  distributed::data_parallel<distributed::mpi> dp0{comm};
  fit(whole, xent, whole_opt, shard.batch(global_batch / 2), epochs{2}, dp0);

  // 1 epoch; model_checkpoint on rank 0 saves the weights and the optimizer state (".ctnn.opt")
  auto first = make_model<net>(7);
  adam first_opt{0.01};
  distributed::data_parallel<distributed::mpi> dp1{comm};
  model_checkpoint ckpt{.filepath = base.string() + ".ctnn", .save_optimizer_state = true};
  fit(first, xent, first_opt, shard.batch(global_batch / 2), epochs{1}, dp1, ckpt);
  CHECK(ckpt.saved.size() == (comm.rank() == 0 ? 1u : 0u));
  comm.barrier();

  // resumed: rank 0 alone reads both files; rank 1 starts from other weights and no optimizer state
  auto two = make_model<net>(99 + std::uint64_t(comm.rank()));
  adam two_opt{0.01};
  if (comm.rank() == 0) {
    io::load_weights(two, base.string() + ".ctnn");
    io::load_optimizer_state(two, two_opt, base.string() + ".ctnn.opt");
  }
  distributed::data_parallel<distributed::mpi> dp2{comm};
  fit(two, xent, two_opt, shard.batch(global_batch / 2), epochs{1}, dp2);
  const auto a = copy(whole.parameters()), b = copy(two.parameters());
  std::printf("rank %d: resumed with the optimizer state, max |resumed - uninterrupted| = %.3g\n", comm.rank(),
              max_difference(a, b));
  CHECK(max_difference(a, b) <= 1e-6);
  CHECK(two.optimizer_state().iterations == whole.optimizer_state().iterations);
  comm.barrier();
  if (comm.rank() == 0) {
    std::filesystem::remove(base.string() + ".ctnn");
    std::filesystem::remove(base.string() + ".ctnn.opt");
  }
}

namespace {
template <class Net>
struct bn_run {
  std::vector<float> parameters, state;
};
// 2 ranks x batch 32 of Net (this rank's) and 1 process x batch 64 (the reference), 2 epochs of SGD
// (not Adam: the bias of the dense layer before batch norm has a zero gradient up to rounding, which
// Adam scales up to full steps)
template <class Net>
std::pair<bn_run<Net>, bn_run<Net>> two_by_32_and_one_by_64(distributed::mpi& comm) {
  const toy t = toy_data();
  const auto all = data::from_tensors<shape<8>>(t.x, t.y);
  auto ref = make_model<Net>(5);
  sgd ref_opt{0.1};
  fit(ref, xent, ref_opt, all.batch(global_batch), epochs{2});
  auto m = make_model<Net>(5);
  sgd opt{0.1};
  distributed::data_parallel<distributed::mpi> dp{comm};
  const auto shard = all.shard(std::size_t(comm.size()), std::size_t(comm.rank()));
  fit(m, xent, opt, shard.batch(global_batch / 2), epochs{2}, dp);
  return {{copy(m.parameters()), copy(m.state())}, {copy(ref.parameters()), copy(ref.state())}};
}
}  // namespace

TEST_CASE("sync_batch_norm: 2 ranks x batch 32 == 1 process x batch 64 (weights and moving statistics), batch_norm's per-replica statistics do not") {
  distributed::mpi comm;
  REQUIRE(comm.size() == 2);
  using sync_net = sequential<input<8>, dense<16>, sync_batch_norm, ctnn::tanh, dense<4>>;
  using plain_net = sequential<input<8>, dense<16>, batch_norm, ctnn::tanh, dense<4>>;
  const auto [got, want] = two_by_32_and_one_by_64<sync_net>(comm);
  const double dw = max_difference(got.parameters, want.parameters), ds = max_difference(got.state, want.state);
  std::printf("rank %d: sync_batch_norm max |2x32 - 1x64| = %.3g (weights), %.3g (moving statistics)\n", comm.rank(),
              dw, ds);
  CHECK(dw <= 1e-5);
  CHECK(ds <= 1e-5);
  const auto [pgot, pwant] = two_by_32_and_one_by_64<plain_net>(comm);
  const double pw = max_difference(pgot.parameters, pwant.parameters), ps = max_difference(pgot.state, pwant.state);
  std::printf("rank %d: batch_norm (per replica) max |2x32 - 1x64| = %.3g (weights), %.3g (moving statistics)\n",
              comm.rank(), pw, ps);
  CHECK(pw > 1e-4);
  // every rank holds the same moving statistics with sync_batch_norm (rank 0's, broadcast, compared)
  auto root = got.state;
  comm.broadcast(std::span<float>(root), 0);
  CHECK(max_difference(root, got.state) == 0.0);
}

int main(int argc, char** argv) {
  distributed::mpi_session session(argc, argv);
  doctest::Context context(argc, argv);
  return context.run();
}

// Data-parallel training on MPI (issue 26's figures): the training step of the Fashion-MNIST MLP
// (784-256-128-10, Adam, global batch 64 / 256) and CNN (bench_cnn's, global batch 64) with
// data_parallel<mpi> as fit runs it (an agreement, then the gradients all-reduced in buckets of
// 64 KiB or more, started during backward), each rank on global batch / ranks of synthetic data. Arguments: the global batch,
// the threads per process. Counters: samples/s of the whole job (global batch per step), the
// share of the step in the all-reduce (agreement included), the gradient bytes per step.
// distributed/all_reduce: one all-reduce of 4 KiB .. 16 MiB alone (latency and bandwidth).
// Every rank runs the same fixed iteration count (the collectives must match); rank 0 reports.
//   1 process x 2 threads:   build/bench/bench/bench_distributed --benchmark_filter='threads:2'
//   2 processes x 1 thread:  mpirun -np 2 --bind-to core build/bench/bench/bench_distributed \
//                              --benchmark_filter='threads:1'
// bench/distributed.sh runs both, alternating.
#include <benchmark/benchmark.h>

#include <ctnn/ctnn.hpp>

#include "bench_nets.hpp"
#include <ctnn/distributed/mpi.hpp>

#include <chrono>
#include <cstdint>
#include <string_view>
#include <tuple>
#include <vector>

namespace {

using ctnn_bench::cnn;
using ctnn_bench::mlp;

template <class Net>
void step(benchmark::State& st) {
  ctnn::distributed::mpi comm;
  const std::size_t global = std::size_t(st.range(0)), batch = global / std::size_t(comm.size());
  ctnn::kernels::cpu::set_threads(std::size_t(st.range(1)));
  auto m = ctnn::make_model<Net>(1);
  ctnn::adam opt{1e-3};
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};
  ctnn::rng g(2 + std::uint64_t(comm.rank()));
  std::vector<float> x(batch * 784);
  std::vector<std::int32_t> y(batch);
  for (auto& v : x) v = float(g.uniform());
  for (auto& v : y) v = std::int32_t(g.below(10));
  ctnn::distributed::data_parallel<ctnn::distributed::mpi> dp{comm};
  ctnn::train_step run{m, loss, opt, std::tie(dp)};
  m.reserve(batch, opt.slots_per_parameter());
  struct {
    decltype(m)& model;
  } ctx{m};
  dp.on_train_begin(ctx);  // as fit does: the broadcast, and the model's gradient buckets (overlap)
  comm.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  std::size_t i = 0;
  for (auto _ : st) {
    const ctnn::step_result r = run.run(x.data(), y.data(), batch, 0, i++);
    benchmark::DoNotOptimize(r.loss_sum);
  }
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  dp.on_train_end(ctx);
  ctnn::logs l;
  dp.log_epoch(l);
  st.counters["samples/s"] = benchmark::Counter(double(global), benchmark::Counter::kIsIterationInvariantRate);
  st.counters["allreduce_share"] = l["allreduce_seconds"] / total;
  st.counters["gradient_bytes"] = double(m.gradients().size() * sizeof(float));
  st.counters["processes"] = double(comm.size());
  st.counters["buckets_per_step"] = double(dp.buckets()) / double(st.iterations());
  ctnn::kernels::cpu::set_threads(1);
}

// One MPI_Allreduce (sum, in place) of n floats, as data_parallel's blocking path runs it (without
// the agreement): the cost the paper scaling in docs/performance.md starts from. Argument: bytes.
void all_reduce(benchmark::State& st) {
  ctnn::distributed::mpi comm;
  std::vector<float> v(std::size_t(st.range(0)) / sizeof(float), 1.0f);
  comm.barrier();
  for (auto _ : st) {
    comm.all_reduce_average(std::span<float>(v));
    benchmark::DoNotOptimize(v.data());
  }
  st.counters["bytes/s"] = benchmark::Counter(double(st.range(0)), benchmark::Counter::kIsIterationInvariantRate);
  st.counters["processes"] = double(comm.size());
}

// Prints nothing: the display and file reporter of the ranks other than 0.
class quiet_reporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace

BENCHMARK(step<mlp>)->Name("distributed/mlp_step")->ArgNames({"batch", "threads"})->Args({64, 1})->Args({64, 2})
    ->Args({256, 1})->Args({256, 2})->Iterations(300)->UseRealTime();
BENCHMARK(step<cnn>)->Name("distributed/cnn_step")->ArgNames({"batch", "threads"})->Args({64, 1})->Args({64, 2})
    ->Iterations(40)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(all_reduce)->Name("distributed/all_reduce")->ArgName("bytes")->Arg(4 << 10)->Arg(64 << 10)->Arg(1 << 20)
    ->Arg(16 << 20)->Iterations(50)->UseRealTime()->Unit(benchmark::kMicrosecond);

int main(int argc, char** argv) {
  ctnn::distributed::mpi_session session(argc, argv);
  bool file_out = false;  // --benchmark_out=FILE: rank 0 writes it, the others must not
  for (int i = 1; i < argc; ++i) file_out |= std::string_view(argv[i]).starts_with("--benchmark_out=");
  benchmark::Initialize(&argc, argv);
  if (ctnn::distributed::mpi{}.rank() == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    quiet_reporter display, file;
    if (file_out) benchmark::RunSpecifiedBenchmarks(&display, &file);
    else benchmark::RunSpecifiedBenchmarks(&display);
  }
  benchmark::Shutdown();
  return 0;
}

// tests/quantization/test_quantized_dense_block.cpp — quantized_dense_block: a stripped block-sparse model
// (sparse_dense_block) quantized by quantize_full_integer / quantize_dynamic. Its outputs equal the
// dense int8 model of the same kept weights (quantized_dense, itself checked against an independent
// scalar int8 pipeline) bit for bit; sizes are compile-time constants; weights files and their
// load-time checks; a block-pruned, stripped, trained model end to end.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/io/weights.hpp>
#include <ctnn/layers/quantized_dense_block.hpp>
#include <ctnn/pruning.hpp>
#include <ctnn/quantization/convert.hpp>
#include <ctnn/quantization/qat.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <type_traits>
#include <vector>

using namespace ctnn;

namespace {
// 1x16 blocks (a quarter kept), then 4x4 blocks (an eighth kept), then dense
using block_net = sequential<input<40>, sparse_dense_block<40, 32, 320, 1, 16, relu>, dropout<0.1f>,
                             sparse_dense_block<32, 16, 64, 4, 4, relu>, dense<5>>;
using dense_net = sequential<input<40>, dense<32, relu>, dropout<0.1f>, dense<16, relu>, dense<5>>;

using fi = quantization::full_integer;
template <bool In8, bool Out8>
using io8 = quantization::int8_io<In8, Out8>;
// int8 between all the layers (quantization::int8_io), also across the dropout (the identity at
// inference: quantization::int8_pass)
static_assert(std::is_same_v<quantized_t<block_net>,
                             sequential<input<40>, quantized_dense_block<40, 32, 320, 1, 16, relu, fi, io8<false, true>>,
                                        quantization::int8_pass<dropout<0.1f>>,
                                        quantized_dense_block<32, 16, 64, 4, 4, relu, fi, io8<true, true>>,
                                        quantized_dense<16, 5, identity, fi, io8<true, false>>>>);
using qb1 = quantized_dense_block<40, 32, 320, 1, 16, relu>::bind<shape<40>, float, cpu<>>;
using qb2 = quantized_dense_block<32, 16, 64, 4, 4, relu>::bind<shape<32>, float, cpu<>>;
// 20 blocks of 1x16 in 2 block columns: at most (20 + 3 * 2) / 4 = 6 groups of 4 rows; 4 blocks of 4x4: 4 groups
static_assert(qb1::G == 6 && qb2::G == 4);
// 4 C G int8 weights, the index (starts, then 4 inputs per group for 1x16, 1 for 4x4), 20 N + 32: the
// values; in the state block the kernel starts on the next 64-byte boundary (732 -> 768, 380 -> 384)
constexpr std::size_t value_bytes(const auto& buffers) { return layer_role_value_bytes<precision::float32>(buffers, role::state); }
static_assert(value_bytes(qb1::buffers) == 6 * 64 + (3 * 4 + 24 * 2) + 20 * 32 + 32);
static_assert(value_bytes(qb2::buffers) == 4 * 16 + (5 * 4 + 4 * 2) + 20 * 16 + 32);
static_assert(qb1::kernel_offset == 768 && qb1::state_bytes == 768 + 6 * 64);
static_assert(qb2::kernel_offset == 384 && qb2::state_bytes == 384 + 4 * 16);
static_assert(quantized_t<block_net>::state_bytes == value_bytes(qb1::buffers) + value_bytes(qb2::buffers) +
                                                         value_bytes(quantized_dense<16, 5>::bind<shape<16>, float, cpu<>>::buffers));

std::vector<float> inputs(std::size_t n, std::uint64_t seed) {
  rng g(seed);
  std::vector<float> x(n * 40);
  for (auto& v : x) v = float(g.uniform(-1.5, 1.5));
  return x;
}
// block -> block -> dense -> dense, int8 between all four (the last layer's 10 inputs padded to 12)
using chain_net = sequential<input<40>, sparse_dense_block<40, 32, 320, 1, 16, relu>,
                             sparse_dense_block<32, 16, 64, 4, 4, relu>, dense<10, relu>, dense<5>>;
using chain_q = quantized_t<chain_net>;
using chain_f = quantization::float_between_t<chain_q>;
static_assert(std::is_same_v<chain_q, sequential<input<40>, quantized_dense_block<40, 32, 320, 1, 16, relu, fi, io8<false, true>>,
                                                 quantized_dense_block<32, 16, 64, 4, 4, relu, fi, io8<true, true>>,
                                                 quantized_dense<16, 10, relu, fi, io8<true, true>>,
                                                 quantized_dense<10, 5, identity, fi, io8<true, false>>>>);
// the memory plan: the int8 activations 1 byte a value, the last layer's float (each block 64-byte aligned)
static_assert(chain_q::plan<>::bytes(role::activation, 64) == 64 * (32 + 16 + 10) + 64 * 5 * 4);
static_assert(chain_f::plan<>::bytes(role::activation, 64) == 64 * (32 + 16 + 10 + 5) * 4);
static_assert(chain_q::plan<>::bytes(role::activation, 7) == 256 + 128 + 128 + 192);  // 224, 112, 70, 140 aligned
static_assert(chain_q::memory_plan(64).activations < chain_f::memory_plan(64).activations);
static_assert(chain_q::state_bytes == chain_f::state_bytes);

// m's variables copied into a model of Net on backend B (the same buffers: Net is m's network
// with other int8_io, or m's own on another architecture).
template <class Net, class B, class M>
model<Net, precision::float32, B> copy_into(const M& m) {
  model<Net, precision::float32, B> out(m.seed());
  std::vector<variable_ref> src;
  m.for_each_variable([&](const variable_ref& v) { src.push_back(v); });
  std::size_t k = 0;
  out.for_each_variable([&](const variable_ref& v) {
    REQUIRE(k < src.size());
    REQUIRE(src[k].name == v.name);
    REQUIRE(src[k].extent * src[k].element_bytes == v.extent * v.element_bytes);
    std::memcpy(v.data, src[k++].data, v.extent * v.element_bytes);
  });
  return out;
}

// The dense model of the block model's weights (0 outside the kept blocks).
model<dense_net> dense_twin(const model<block_net>& b) {
  auto d = make_model<dense_net>(1);
  std::vector<variable_ref> src, dst;
  b.for_each_variable([&](const variable_ref& v) { src.push_back(v); });
  d.for_each_variable([&](const variable_ref& v) { dst.push_back(v); });
  using L = model<block_net>::layers;
  auto copy = [&](std::size_t layer, const std::vector<float>& w) {
    std::memcpy(quantization::detail::data_of<float>(dst, layer, "kernel"), w.data(), w.size() * sizeof(float));
    const auto& from = quantization::detail::find_var(src, layer, "bias");
    std::memcpy(quantization::detail::data_of<float>(dst, layer, "bias"), from.data, from.extent * sizeof(float));
  };
  copy(0, quantization::detail::float_kernel<std::tuple_element_t<0, L>>(src, 0));
  copy(2, quantization::detail::float_kernel<std::tuple_element_t<2, L>>(src, 2));
  copy(3, quantization::detail::float_kernel<std::tuple_element_t<3, L>>(src, 3));
  return d;
}
}  // namespace

TEST_CASE("quantized_dense_block: outputs equal quantized_dense on the same kept weights, bit for bit") {
  auto b = make_model<block_net>(5);
  auto d = dense_twin(b);
  const auto cal = inputs(200, 1), x = inputs(64, 2);
  CHECK(b.predict(x.data(), 64).size() == 64 * 5);
  {
    // the float models agree (the same kept weights) up to the order of the float sums
    const auto pb = b.predict(x.data(), 8), pd = d.predict(x.data(), 8);
    for (std::size_t i = 0; i < pb.size(); ++i) CHECK(pb[i] == doctest::Approx(pd[i]).epsilon(1e-5));
  }
  auto fb = quantize_full_integer(b, cal.data(), 200);
  auto fd = quantize_full_integer(d, cal.data(), 200);
  auto db = quantize_dynamic(b);
  auto dd = quantize_dynamic(d);
  std::vector<float> wild = x;  // a quarter of the values beyond the calibrated range: saturation counted alike
  for (std::size_t i = 0; i < wild.size(); i += 4) wild[i] *= 3;
  for (std::size_t n : {1, 7, 64}) {
    INFO("batch " << n);
    CHECK(fb.predict(x.data(), n) == fd.predict(x.data(), n));
    CHECK(fb.predict(wild.data(), n) == fd.predict(wild.data(), n));
    CHECK(db.predict(wild.data(), n) == dd.predict(wild.data(), n));
  }
  const auto sb = quantization::saturation(fb), sd = quantization::saturation(fd);
  REQUIRE(sb.size() == 3);
  REQUIRE(sd.size() == 3);
  CHECK(sb[0].name == "quantized_dense_block<40, 32, 320, 1, 16, relu, full_integer>");
  CHECK(sb[0].inputs > 0);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(sb[i].inputs == sd[i].inputs);
    CHECK(sb[i].outputs == sd[i].outputs);
  }
}

// quantized_t keeps int8 tensors between adjacent full-integer layers; quantize(dequantize(q)) is
// the identity on int8 values (test_int8.cpp), so the outputs and the saturation counts equal the
// model with float tensors between its layers exactly, on each int8 path (vnni, vnni256, avx2, scalar).
TEST_CASE("int8 between layers: the chained model equals the float-between model bit for bit on every int8 path") {
  auto b = make_model<chain_net>(9);
  const auto cal = inputs(200, 1);
  auto x = inputs(64, 3);
  for (std::size_t i = 0; i < x.size(); i += 5) x[i] *= 3;  // beyond the calibrated range: saturation
  const auto q = quantize_full_integer(b, cal.data(), 200);
  int ran = 0;
  const auto check = [&]<class Arch>(Arch, const char* name) {
    auto c = copy_into<chain_q, cpu<Arch>>(q);
    auto f = copy_into<chain_f, cpu<Arch>>(q);
    for (std::size_t n : {1, 7, 64}) {
      INFO(name << ", batch " << n);
      quantization::reset_saturation(c);
      quantization::reset_saturation(f);
      CHECK(c.predict(x.data(), 64, n) == f.predict(x.data(), 64, n));
      const auto sc = quantization::saturation(c), sf = quantization::saturation(f);
      REQUIRE(sc.size() == 4);
      REQUIRE(sf.size() == 4);
      for (std::size_t l = 0; l < 4; ++l) {
        CHECK(sc[l].inputs == sf[l].inputs);
        CHECK(sc[l].outputs == sf[l].outputs);
      }
      CHECK(sc[0].inputs > 0);
      CHECK(sc[1].inputs + sc[2].inputs + sc[3].inputs == 0);
    }
    ++ran;
  };
  using i8 = kernels::cpu::int8::int8_path;
  if constexpr (xsimd::avx512bw::supported())
    if (kernels::cpu::arch_available<xsimd::avx512bw>()) {
      CHECK(kernels::cpu::int8::int8_path_of<xsimd::avx512bw>() != i8::scalar);
      check(xsimd::avx512bw{}, "avx512bw (vnni where the CPU has it)");
    }
  if constexpr (xsimd::avx2::supported())
    if (kernels::cpu::arch_available<xsimd::avx2>()) {
      namespace k8 = kernels::cpu::int8;  // (vnni256 where the build encodes it and the CPU runs it)
      CHECK(k8::int8_path_of<xsimd::avx2>() == (k8::vnni256_compiled && k8::cpu_has_vnni256() ? i8::vnni256 : i8::avx2));
      check(xsimd::avx2{}, "avx2 (vnni256 where the build and the CPU have it)");
    }
  CHECK(kernels::cpu::int8::int8_path_of<xsimd::sse2>() == i8::scalar);
  check(xsimd::sse2{}, "sse2 (scalar)");
  MESSAGE("int8 chain checked on " << ran << " architectures");
  // the weights file is the same: one saved from either loads into the other
  const auto dir = std::filesystem::temp_directory_path() / "ctnn_test_int8_chain";
  std::filesystem::create_directories(dir);
  io::save_weights(q, dir / "chain.weights");
  auto f = make_model<chain_f>(1);
  io::load_weights(f, dir / "chain.weights");
  CHECK(f.predict(x.data(), 64) == copy_into<chain_f, cpu<>>(q).predict(x.data(), 64));
  // a file whose layer 2 input parameters are not layer 1's output ones: refused by the chained
  // model (its layer 2 reads layer 1's int8 values as they are), loaded by the float-between one
  auto c = copy_into<chain_q, cpu<>>(q);
  float out1 = 0;
  std::int32_t zp1 = 0;
  c.for_each_variable([&](const variable_ref& v) {
    if (v.layer == 0 && v.name == "output_scale") std::memcpy(&out1, v.data, 4);
    if (v.layer == 0 && v.name == "output_zero_point") std::memcpy(&zp1, v.data, 4);
    if (v.layer == 1 && v.name == "input_zero_point") {
      const std::int32_t z = zp1 + 1;
      std::memcpy(v.data, &z, 4);
    }
  });
  io::save_weights(c, dir / "bad.weights");
  CHECK_THROWS_WITH_AS(io::load_weights(c, dir / "bad.weights"),
                       doctest::Contains(("layer 2 state 'input_zero_point' is " + std::to_string(zp1 + 1) +
                                          " but this layer reads layer 1's int8 output, whose output_zero_point is " +
                                          std::to_string(zp1))
                                             .c_str()),
                       io::weights_error);
  io::load_weights(f, dir / "bad.weights");
  c.for_each_variable([&](const variable_ref& v) {
    if (v.layer == 1 && v.name == "input_zero_point") std::memcpy(v.data, &zp1, 4);
    if (v.layer == 1 && v.name == "input_scale") {
      const float s = out1 * 1.5f;
      std::memcpy(v.data, &s, 4);
    }
  });
  io::save_weights(c, dir / "bad.weights");
  CHECK_THROWS_WITH_AS(io::load_weights(c, dir / "bad.weights"),
                       doctest::Contains("layer 2 state 'input_scale' is"), io::weights_error);
  std::filesystem::remove_all(dir);
}

TEST_CASE("quantized_dense_block: the weights file carries the groups and the index, checked at load") {
  auto b = make_model<block_net>(6);
  const auto cal = inputs(100, 3), x = inputs(20, 4);
  auto q = quantize_full_integer(b, cal.data(), 100);
  const auto dir = std::filesystem::temp_directory_path() / "ctnn_test_quantized_block";
  std::filesystem::create_directories(dir);
  io::save_weights(q, dir / "q.weights");
  auto back = make_model<quantized_t<block_net>>(9);
  CHECK(back.predict(x.data(), 20) != q.predict(x.data(), 20));
  io::load_weights(back, dir / "q.weights");
  CHECK(back.predict(x.data(), 20) == q.predict(x.data(), 20));
  std::vector<std::string> names;
  back.for_each_variable([&](const variable_ref& v) {
    if (v.layer == 0) names.emplace_back(v.name);
  });
  CHECK(names == std::vector<std::string>{"bias", "kernel_scale", "kernel_sum", "input_scale", "input_zero_point",
                                          "output_scale", "output_zero_point", "output_multiplier", "output_shift",
                                          "saturated", "index", "kernel"});
  // ctnn-inspect's reader (read_weights_file, without the network type): the index as uint8, the groups as int8
  const io::weights_file f = io::read_weights_file(dir / "q.weights");
  REQUIRE(f.tensors.size() == 12 + 12 + 11);
  CHECK(f.tensors[10].name == "index");
  CHECK(f.tensors[10].dtype_name() == "uint8");
  CHECK(f.tensors[10].elements == qb1::index::bytes);
  CHECK(f.tensors[11].name == "kernel");
  CHECK(f.tensors[11].dtype_name() == "int8");
  CHECK(f.tensors[11].shape() == "[6x64]");
  auto corrupt = [&](std::size_t layer, const char* name, std::size_t at, auto value) {
    std::vector<std::byte> keep;
    q.for_each_variable([&](const variable_ref& v) {
      if (v.layer != layer || v.name != name) return;
      keep.assign(v.data, v.data + v.extent * v.element_bytes);
      std::memcpy(v.data + at * sizeof(value), &value, sizeof(value));
    });
    io::save_weights(q, dir / "bad.weights");
    q.for_each_variable([&](const variable_ref& v) {
      if (v.layer == layer && v.name == name) std::memcpy(v.data, keep.data(), keep.size());
    });
    return dir / "bad.weights";
  };
  using ix1 = qb1::index;
  // an input past K (layer 1, 4 inputs per group), a group input not a multiple of 4 (layer 3); a fresh
  // layer's blocks are spread evenly: here every kept block of layer 1 is in block column 1, of layer 3 in 3
  CHECK_THROWS_WITH_AS(io::load_weights(back, corrupt(0, "index", ix1::offset<1> / 2, std::uint16_t(40))),
                       doctest::Contains("layer 1 state 'index': input 0 (group 0, block column 1) is 40, but the "
                                         "layer has 40 inputs"),
                       io::weights_error);
  CHECK_THROWS_WITH_AS(io::load_weights(back, corrupt(2, "index", qb2::index::offset<1> / 2, std::uint16_t(2))),
                       doctest::Contains("layer 3 state 'index': input 0 (group 0, block column 3) is 2, but the layer "
                                         "has 32 inputs (and a group starts at a multiple of 4)"),
                       io::weights_error);
  CHECK_THROWS_WITH_AS(io::load_weights(back, corrupt(0, "index", 2, std::uint32_t(7))),
                       doctest::Contains("layer 1 state 'index': block column 1 ends at group 7, past the 6 groups stored"),
                       io::weights_error);
  // a weight of -128, a kernel_sum that does not match
  CHECK_THROWS_WITH_AS(io::load_weights(back, corrupt(0, "kernel", 65, std::int8_t(-128))),
                       doctest::Contains("layer 1 state 'kernel': the weight of group 1, unit 0 of its block column "
                                         "(index 65) is -128"),
                       io::weights_error);
  std::int32_t sum3 = 0;
  q.for_each_variable([&](const variable_ref& v) {
    if (v.layer == 2 && v.name == "kernel_sum") std::memcpy(&sum3, v.data + 3 * 4, 4);
  });
  CHECK_THROWS_WITH_AS(io::load_weights(back, corrupt(2, "kernel_sum", 3, sum3 + 1)),
                       doctest::Contains(("layer 3 state 'kernel': kernel_sum[3] is " + std::to_string(sum3 + 1) +
                                          " but unit 3's weights sum to " + std::to_string(sum3))
                                             .c_str()),
                       io::weights_error);
  // the loaded model kept its values through the refusals
  CHECK(back.predict(x.data(), 20) == q.predict(x.data(), 20));
  std::filesystem::remove_all(dir);
}

TEST_CASE("block-pruned, stripped, then quantized: the int8 model predicts as the float one") {
  // two classes: is the sum of the first 8 inputs positive? block<1, 16>, 75 % of the blocks pruned
  using S = constant_sparsity<0.75>;
  using pruned = sequential<input<32>, prune_low_magnitude<dense<32, relu>, S, block<1, 16>>, dense<2>>;
  std::vector<float> x(512 * 32);
  std::vector<std::int32_t> y(512);
  rng g(3);
  for (auto& v : x) v = float(g.uniform(-1, 1));
  for (std::size_t i = 0; i < y.size(); ++i) {
    float s = 0;
    for (std::size_t k = 0; k < 8; ++k) s += x[i * 32 + k];
    y[i] = s > 0;
  }
  auto m = make_model<pruned>(4);
  adam opt{0.01};
  fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt,
      data::in_memory<shape<32>, sparse_labels>(x, y).batch(32), epochs{6}, update_pruning_step{});
  auto s = strip_pruning<layout::block<1, 16>>(m);
  auto q = quantize_full_integer(s, x.data(), 256);
  static_assert(std::is_same_v<decltype(q)::network,
                               sequential<input<32>, quantized_dense_block<32, 32, 256, 1, 16, relu, fi, io8<false, true>>,
                                          quantized_dense<32, 2, identity, fi, io8<true, false>>>>);
  // the int8 kernel: 16 kept blocks of 1x16 in 2 block columns, at most 5 groups of 64 bytes (the float
  // dense kernel: 4096 bytes)
  static_assert(quantized_dense_block<32, 32, 256, 1, 16, relu>::bind<shape<32>, float, cpu<>>::G == 5);
  const auto pf = s.predict(x.data(), 512), pq = q.predict(x.data(), 512);
  std::size_t agree = 0, right_f = 0, right_q = 0;
  for (std::size_t i = 0; i < 512; ++i) {
    const bool cf = pf[2 * i + 1] > pf[2 * i], cq = pq[2 * i + 1] > pq[2 * i];
    agree += cf == cq;
    right_f += cf == bool(y[i]);
    right_q += cq == bool(y[i]);
  }
  MESSAGE("float accuracy " << right_f / 5.12 << " %, int8 " << right_q / 5.12 << " %, agreement " << agree / 5.12
                            << " %");
  CHECK(right_f > 384);  // 75 %: measured 80.7 % (6 epochs)
  CHECK(agree >= 500);
  CHECK(right_q + 8 >= right_f);
}

TEST_CASE("a layer stripped with layout::undecoded<block<R, C>> quantizes as the decoded one: the same types, "
          "the same int8 outputs") {
  // the undecoded layers (no decoded buffers) have the block layers' variables: quantize_full_integer,
  // quantize_dynamic and convert_qat read the same values and index, and make the same int8 network
  using undecoded_net = sequential<input<40>, undecoded<sparse_dense_block<40, 32, 320, 1, 16, relu>>, dropout<0.1f>,
                                   undecoded<sparse_dense_block<32, 16, 64, 4, 4, relu>>, dense<5>>;
  static_assert(std::is_same_v<quantized_t<undecoded_net>, quantized_t<block_net>>);
  static_assert(std::is_same_v<quantized_t<undecoded_net, quantization::dynamic_range>,
                               quantized_t<block_net, quantization::dynamic_range>>);
  static_assert(undecoded_net::memory_plan(16).derived == 0);
  const auto b = make_model<block_net>(7);
  const auto u = copy_into<undecoded_net, cpu<>>(b);
  const auto cal = inputs(200, 5), x = inputs(64, 6);
  auto fb = quantize_full_integer(b, cal.data(), 200), fu = quantize_full_integer(u, cal.data(), 200);
  auto db = quantize_dynamic(b), du = quantize_dynamic(u);
  static_assert(std::is_same_v<decltype(fb), decltype(fu)> && std::is_same_v<decltype(db), decltype(du)>);
  for (std::size_t n : {1, 5, 64}) {
    CHECK(fu.predict(x.data(), n) == fb.predict(x.data(), n));
    CHECK(du.predict(x.data(), n) == db.predict(x.data(), n));
  }
  // stripped by strip_pruning<layout::undecoded<layout::block<R, C>>> from a pruned model, then
  // convert_qat(q, stripped) with a QAT model's ranges: as the decoded strip
  using S = constant_sparsity<0.75>;
  using pruned = sequential<input<40>, prune_low_magnitude<dense<32, relu>, S, block<4, 16>>, dense<5>>;
  auto m = make_model<pruned>(3);
  std::vector<float> y(64 * 5);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = float(i % 5 == i / 5 % 5);
  sgd opt{0.05};
  fit(m, mean_squared_error{}, opt, data::in_memory<shape<40>, dense_targets<shape<5>>>(x, y).batch(16), epochs{1},
      update_pruning_step{});
  const auto sd = strip_pruning<layout::block<4, 16>>(m);
  const auto su = strip_pruning<layout::undecoded<layout::block<4, 16>>>(m);
  static_assert(!std::is_same_v<decltype(sd)::network, decltype(su)::network>);  // undecoded<sparse_dense_block<...>>
  auto qd = quantize_full_integer(sd, cal.data(), 200), qu = quantize_full_integer(su, cal.data(), 200);
  static_assert(std::is_same_v<decltype(qd), decltype(qu)>);
  for (std::size_t n : {1, 64}) CHECK(qu.predict(x.data(), n) == qd.predict(x.data(), n));
  using plain = sequential<input<40>, dense<32, relu>, dense<5>>;
  const auto q = quantize_model(strip_pruning_to<plain>(m));
  auto cd = convert_qat(q, sd), cu = convert_qat(q, su);
  static_assert(std::is_same_v<decltype(cd), decltype(cu)>);
  for (std::size_t n : {1, 64}) CHECK(cu.predict(x.data(), n) == cd.predict(x.data(), n));
}

TEST_CASE("quantized_dense_block: backward is refused") {
  auto q = make_model<quantized_t<block_net>>(1);
  using L = std::tuple_element_t<0, decltype(q)::layers>;
  CHECK_THROWS_WITH_AS(L::backward({}, nullptr, nullptr, nullptr, nullptr, {}),
                       doctest::Contains("an int8 layer runs inference only"), std::logic_error);
}

TEST_CASE("pruning-preserving QAT: preserve_sparsity keeps the zeros, convert_qat(q, stripped) equals convert_qat(q)") {
  using S = constant_sparsity<0.75>;
  using pruned = sequential<input<32>, prune_low_magnitude<dense<32, relu>, S, block<4, 16>>, dense<2>>;
  using plain = sequential<input<32>, dense<32, relu>, dense<2>>;
  std::vector<float> x(256 * 32);
  std::vector<std::int32_t> y(256);
  rng g(8);
  for (auto& v : x) v = float(g.uniform(-1, 1));
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = x[i * 32] + x[i * 32 + 1] > 0;
  const auto data = data::in_memory<shape<32>, sparse_labels>(x, y).batch(32);
  const sparse_categorical_crossentropy loss{.from_logits = true};
  auto m = make_model<pruned>(4);
  adam opt{0.01};
  fit(m, loss, opt, data, epochs{2}, update_pruning_step{});
  // the pruned weights (0 outside the kept blocks) into the plain network, then QAT keeping the zeros
  auto d = strip_pruning_to<plain>(m);
  auto q = quantize_model(d);
  adam fine{0.001};
  fit(q, loss, fine, data, epochs{2}, preserve_sparsity{});
  std::size_t zeros = 0;
  q.for_each_variable([&](const variable_ref& v) {
    if (v.layer != 0 || v.name != "kernel") return;
    for (std::size_t i = 0; i < v.extent; ++i) zeros += reinterpret_cast<const float*>(v.data)[i] == 0.0f;
  });
  CHECK(zeros >= 32 * 32 * 3 / 4);
  // the QAT weights back into the pruned model (its masks stay), stripped to 4x16 blocks, with q's ranges
  copy_variables(q, m);
  auto s = strip_pruning<layout::block<4, 16>>(m);
  auto i8 = convert_qat(q, s);
  static_assert(std::is_same_v<decltype(i8)::network,
                               sequential<input<32>, quantized_dense_block<32, 32, 256, 4, 16, relu, fi, io8<false, true>>,
                                          quantized_dense<32, 2, identity, fi, io8<true, false>>>>);
  auto dense_i8 = convert_qat(q);
  for (std::size_t n : {1, 5, 64}) CHECK(i8.predict(x.data(), n) == dense_i8.predict(x.data(), n));
  CHECK_THROWS_WITH_AS(convert_qat(q, make_model<sequential<input<32>, dense<2>>>(1)),
                       "convert_qat: the float model has 1 quantizable layers but the QAT model 2 qat_dense / "
                       "qat_conv2d layers",
                       std::invalid_argument);
}

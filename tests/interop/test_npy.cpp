// npy.hpp: .npy import/export of inputs, outputs and every variable through xtensor's xnpy.
#include <doctest/doctest.h>

#include <ctnn/layers/batch_norm.hpp>
#include <ctnn/layers/dense.hpp>
#include <ctnn/layers/reshape.hpp>
#include <ctnn/layers/sparse_dense_csc.hpp>
#include <ctnn/npy.hpp>
#include <ctnn/xtensor.hpp>  // predict and variable<L, "name"> on xtensor

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <unistd.h>

using namespace ctnn;
namespace fs = std::filesystem;

namespace {
using net = sequential<input<2, 2>, flatten, dense<5, ctnn::relu>, batch_normalization<>, dense<3>>;

struct temp_dir {
  fs::path path = fs::temp_directory_path() / ("ctnn_npy_" + std::to_string(::getpid()));
  temp_dir() { fs::create_directories(path); }
  ~temp_dir() { fs::remove_all(path); }
};

std::string message_of(auto&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}

xt::xtensor<float, 3> inputs(std::size_t n) {
  xt::xtensor<float, 3> x = xt::xtensor<float, 3>::from_shape({n, 2, 2});
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = std::cos(float(i) * 0.3f);
  return x;
}

std::vector<float> values(auto s) { return std::vector<float>(s.begin(), s.end()); }

// A .npy file as NumPy's format.py writes one: magic, version, header length (2 bytes
// for 1.0, 4 for 2.0 and 3.0), the dictionary padded with spaces and a newline so
// that the values start at a multiple of 64, then the values.
std::string npy_file(int major, const std::string& dict, const std::string& values) {
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  std::string header = dict;
  header.append(64 - (8 + len_bytes + dict.size() + 1) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += char(major);
  out += char(0);
  for (std::size_t k = 0; k < len_bytes; ++k) out += char((header.size() >> (8 * k)) & 0xff);
  return out + header + values;
}

template <class T>
std::string raw(std::initializer_list<T> v) {
  std::string s(v.size() * sizeof(T), '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

void write(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }
}  // namespace

TEST_CASE("save_npy / load_npy / load_inputs_npy round trip, leaving no temporary") {
  temp_dir d;
  const auto x = inputs(5);
  save_npy(d.path / "x.npy", x);
  CHECK(load_npy<float, 3>(d.path / "x.npy") == x);
  using M = model<net>;
  const auto in = load_inputs_npy<M>(d.path / "x.npy");
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(in)>, xt::xtensor<float, 3>>);
  CHECK(in == x);
  // outputs: predict's result saved and read back bit for bit
  auto m = make_model<net>(3);
  const auto y = ctnn::predict(m, in);
  save_npy(d.path / "y.npy", y);
  CHECK(load_npy<float, 2>(d.path / "y.npy") == y);
  // only the two files: no temporary left beside them
  CHECK(std::distance(fs::directory_iterator(d.path), fs::directory_iterator{}) == 2);
}

TEST_CASE("load_npy: a wrong dtype, rank or shape, a truncated or foreign file is a clear error") {
  temp_dir d;
  const fs::path p = d.path / "x.npy";
  save_npy(p, xt::xtensor<double, 3>(xt::cast<double>(inputs(2))));
  CHECK(message_of([&] { load_npy<float, 3>(p); }) ==
        "load_npy: " + p.string() + ": holds float64 ('<f8') values, float32 ('<f4') are wanted");
  save_npy(p, inputs(2));
  CHECK(message_of([&] { load_npy<float, 2>(p); }) == "load_npy: " + p.string() + ": has shape (2, 2, 2), rank 2 is wanted");
  save_npy(p, xt::xtensor<float, 2>(xt::zeros<float>({4, 3})));
  CHECK(message_of([&] { load_inputs_npy<model<net>>(p); }) ==
        "load_inputs_npy: the input has shape (4, 3); this network takes (n, 2, 2)");
  save_npy(p, inputs(2));
  {
    const std::string bytes = io::read_file(p, "test");
    std::ofstream(p, std::ios::binary) << bytes.substr(0, bytes.size() - 5);
  }
  CHECK(message_of([&] { load_npy<float, 3>(p); }) ==
        "load_npy: " + p.string() + ": truncated: the header announces more values than the file holds");
  {
    // a corrupt header announcing 2^61 values (16 EiB) is refused before anything is allocated for it
    save_npy(p, inputs(2));
    std::string bytes = io::read_file(p, "test");
    const std::string from = "'shape': (2, 2, 2), ";
    const std::string to = "'shape': (2305843009213693952,), ";
    const auto at = bytes.find(from);
    REQUIRE(at != std::string::npos);
    bytes.replace(at, from.size(), to);
    // keep the header length: take the extra characters out of the space padding
    const auto pad = bytes.find("   ", at);
    REQUIRE(pad != std::string::npos);
    bytes.erase(pad, to.size() - from.size());
    std::ofstream(p, std::ios::binary) << bytes;
  }
  CHECK(message_of([&] { load_npy<float, 1>(p); }) ==
        "load_npy: " + p.string() + ": truncated: the header announces more values than the file holds");
  std::ofstream(p, std::ios::binary) << "hello, this is not numpy";
  CHECK(message_of([&] { load_npy<float, 3>(p); }).starts_with("load_npy: " + p.string() + ": not a valid .npy file ("));
  CHECK(message_of([&] { load_npy<float, 3>(d.path / "missing.npy"); }) ==
        "load_npy: " + (d.path / "missing.npy").string() + ": no such file");
}

TEST_CASE("save_variables_npy / load_variables_npy carry every variable, state included") {
  temp_dir d;
  auto a = make_model<net>(1);
  // give batch_norm's moving statistics values that differ from their initial ones
  auto mean = variable<2, "moving_mean">(a);
  for (std::size_t i = 0; i < mean.size(); ++i) mean(i) = 0.25f * float(i);
  save_variables_npy(a, d.path);
  for (const char* f : {"layer1_kernel", "layer1_bias", "layer2_gamma", "layer2_beta", "layer2_moving_mean",
                        "layer2_moving_variance", "layer3_kernel", "layer3_bias"})
    CHECK(fs::exists(d.path / (std::string(f) + ".npy")));
  CHECK(load_npy<float, 2>(d.path / "layer1_kernel.npy") == variable<1, "kernel">(a));
  auto b = make_model<net>(2);
  REQUIRE(values(b.parameters()) != values(a.parameters()));
  load_variables_npy(b, d.path);
  CHECK(values(b.parameters()) == values(a.parameters()));
  CHECK(values(b.state()) == values(a.state()));
  const auto x = inputs(4);
  CHECK(ctnn::predict(b, x) == ctnn::predict(a, x));
}

TEST_CASE("load_variables_npy names the first mismatching file and changes nothing") {
  temp_dir d;
  auto a = make_model<net>(1);
  save_variables_npy(a, d.path);
  save_npy(d.path / "layer3_kernel.npy", xt::xtensor<float, 2>(xt::zeros<float>({3, 5})));
  auto b = make_model<net>(2);
  const auto before = values(b.parameters());
  CHECK(message_of([&] { load_variables_npy(b, d.path); }) ==
        "load_variables_npy: " + (d.path / "layer3_kernel.npy").string() +
            ": has shape (3, 5) but layer 3's 'kernel' is (5, 3)");
  CHECK(values(b.parameters()) == before);
  save_npy(d.path / "layer3_kernel.npy", xt::xtensor<double, 2>(xt::zeros<double>({5, 3})));
  CHECK(message_of([&] { load_variables_npy(b, d.path); }) ==
        "load_variables_npy: " + (d.path / "layer3_kernel.npy").string() +
            ": holds float64 ('<f8') values, float32 ('<f4') are wanted");
  fs::remove(d.path / "layer2_beta.npy");
  CHECK(message_of([&] { load_variables_npy(b, d.path); }) ==
        "load_variables_npy: " + (d.path / "layer2_beta.npy").string() + ": no such file");
  CHECK(values(b.parameters()) == before);
}

TEST_CASE("load_variables_npy checks a sparse layout's index as load_weights does, and changes nothing") {
  // A hand-edited index file must not reach the kernels: column 0 starting at value 2 (csc),
  // and an input row past the 20 inputs, each refused naming the file and the entry.
  using sparse_net = sequential<input<20>, sparse_dense_csc<20, 5, 25, ctnn::relu>, dense<3>>;
  temp_dir d;
  auto a = make_model<sparse_net>(1);
  save_variables_npy(a, d.path);
  const fs::path index = d.path / "layer0_index.npy";
  REQUIRE(fs::exists(index));
  // the layer's decoded weights (role::derived, in the plan: docs/pruning.md) are never written
  static_assert(sparse_net::memory_plan(1).derived == (2 * 20 * 5 * 4 + 63) / 64 * 64);  // 64-byte aligned
  std::set<std::string> files;
  for (const auto& f : fs::directory_iterator(d.path)) files.insert(f.path().filename().string());
  CHECK(files == std::set<std::string>{"layer0_values.npy", "layer0_index.npy", "layer0_bias.npy", "layer1_kernel.npy",
                                       "layer1_bias.npy"});
  std::string good;
  {
    std::ifstream in(index, std::ios::binary);
    good.assign(std::istreambuf_iterator<char>(in), {});
  }
  // version 1.0: a 2-byte header length after the 8 bytes of magic and version
  const std::size_t data_at = 10 + std::size_t(std::uint8_t(good[8])) + 256 * std::size_t(std::uint8_t(good[9]));
  auto b = make_model<sparse_net>(2);
  const auto before = values(b.parameters());
  std::vector<float> x(4 * 20, 0.5f);
  const auto predicted = b.predict(x.data(), 4);
  auto edited = [&](std::size_t at, auto value) {
    std::string bad = good;
    std::memcpy(bad.data() + data_at + at, &value, sizeof value);
    write(index, bad);
  };
  edited(0, std::uint32_t(2));  // starts[0]
  CHECK(message_of([&] { load_variables_npy(b, d.path); }) ==
        "load_variables_npy: " + index.string() + ": layer 0's 'index': column 0 starts at value 2, not 0");
  edited(4 * (5 + 1) + 2 * 1, std::uint16_t(20));  // input row of value 1 (column 0)
  CHECK(message_of([&] { load_variables_npy(b, d.path); }) ==
        "load_variables_npy: " + index.string() + ": layer 0's 'index': value 1 (column 0) has input row 20, but the layer has 20 inputs");
  CHECK(values(b.parameters()) == before);
  CHECK(b.predict(x.data(), 4) == predicted);
  write(index, good);
  load_variables_npy(b, d.path);
  CHECK(b.predict(x.data(), 4) == a.predict(x.data(), 4));
}

TEST_CASE("NumPy reads the variables ctnn writes (skipped without python3 and numpy)") {
  if (std::system("python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
    MESSAGE("CTNN_SKIP: python3 with numpy is not available");
    return;
  }
  temp_dir d;
  auto a = make_model<net>(1);
  save_variables_npy(a, d.path);
  const auto k = variable<3, "kernel">(a);
  const std::string cmd = "python3 -c \"import numpy as np; k = np.load('" + (d.path / "layer3_kernel.npy").string() +
                          "'); assert k.dtype == np.float32 and k.shape == (5, 3), k.shape; print(repr(float(k[4, 2])))\" > " +
                          (d.path / "out.txt").string();
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::ifstream in(d.path / "out.txt");
  double v = 0;
  in >> v;
  CHECK(float(v) == k(4, 2));
}

TEST_CASE("load_npy reads every dtype it accepts, format versions 1.0, 2.0 and 3.0") {
  temp_dir d;
  const fs::path p = d.path / "t.npy";
  // each type through save_npy and back, with the descr NumPy gives it
  auto round_trip = [&]<class T>(const std::string& descr) {
    const xt::xtensor<T, 2> x{{T(0), T(1), T(2)}, {T(3), T(1), T(0)}};
    save_npy(p, x);
    CHECK(io::read_file(p, "test").find("'descr': '" + descr + "'") != std::string::npos);
    CHECK(load_npy<T, 2>(p) == x);
  };
  round_trip.operator()<float>("<f4");
  round_trip.operator()<double>("<f8");
  round_trip.operator()<std::int8_t>("|i1");
  round_trip.operator()<std::int16_t>("<i2");
  round_trip.operator()<std::int32_t>("<i4");
  round_trip.operator()<std::int64_t>("<i8");
  round_trip.operator()<std::uint8_t>("|u1");
  round_trip.operator()<std::uint16_t>("<u2");
  round_trip.operator()<std::uint32_t>("<u4");
  round_trip.operator()<std::uint64_t>("<u8");
  round_trip.operator()<bool>("|b1");
  // format versions 2.0 and 3.0 (a 4-byte header length), keys in any order, a
  // Python 2 long, '<u1' for NumPy's '|u1'
  write(p, npy_file(2, "{'shape': (2L, 1L), 'fortran_order': False, 'descr': '<f4'}", raw({1.5f, -2.f})));
  CHECK(load_npy<float, 2>(p) == xt::xtensor<float, 2>{{1.5f}, {-2.f}});
  write(p, npy_file(3, "{\"descr\": \"<u1\", \"fortran_order\": False, \"shape\": (3,)}", raw<std::uint8_t>({7, 8, 9})));
  CHECK(load_npy<std::uint8_t, 1>(p) == xt::xtensor<std::uint8_t, 1>{7, 8, 9});
  // ctnn's float16_t is NumPy's float16 ('<f2', IEEE binary16); bfloat16 has no NumPy dtype
  write(p, npy_file(1, "{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }", raw<std::uint16_t>({0x3c00, 0xc100})));
  const auto h = load_npy<float16_t, 1>(p);
  CHECK(float(h(0)) == 1.f);
  CHECK(float(h(1)) == -2.5f);
  CHECK(message_of([&] { load_npy<bfloat16_t, 1>(p); }) ==
        "load_npy: " + p.string() + ": bfloat16 values have no NumPy dtype");
  // a 0-d array holds one value; a zero-sized one none
  write(p, npy_file(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (), }", raw({42})));
  CHECK(load_npy<std::int32_t, 0>(p)() == 42);
  write(p, npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }", ""));
  CHECK(load_npy<float, 2>(p).shape()[1] == 3);
}

TEST_CASE("load_npy reads Fortran-order files into C order, save_npy writes any layout in C order") {
  temp_dir d;
  const fs::path p = d.path / "f.npy";
  // the (2, 3) array [[0, 1, 2], [3, 4, 5]] in Fortran order: column by column
  write(p, npy_file(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", raw({0.f, 3.f, 1.f, 4.f, 2.f, 5.f})));
  CHECK(load_npy<float, 2>(p) == xt::xtensor<float, 2>{{0, 1, 2}, {3, 4, 5}});
  // rank 3: value (i, j, k) = 100 i + 10 j + k stored with i varying fastest
  std::vector<double> fortran;
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 3; ++j)
      for (int i = 0; i < 2; ++i) fortran.push_back(100 * i + 10 * j + k);
  write(p, npy_file(1, "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3, 4), }",
                    std::string(reinterpret_cast<const char*>(fortran.data()), fortran.size() * sizeof(double))));
  const auto f3 = load_npy<double, 3>(p);
  bool all = true;
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j)
      for (std::size_t k = 0; k < 4; ++k) all = all && f3(i, j, k) == double(100 * i + 10 * j + k);
  CHECK(all);
  // a Fortran-order 1-D file is the same as a C-order one
  write(p, npy_file(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (3,), }", raw({1.f, 2.f, 3.f})));
  CHECK(load_npy<float, 1>(p) == xt::xtensor<float, 1>{1, 2, 3});
  // column-major tensors and strided views are written in C order
  xt::xtensor<float, 2, xt::layout_type::column_major> cm{{0, 1, 2}, {3, 4, 5}};
  save_npy(p, cm);
  CHECK(io::read_file(p, "test").find("'fortran_order': False") != std::string::npos);
  CHECK(load_npy<float, 2>(p) == xt::xtensor<float, 2>{{0, 1, 2}, {3, 4, 5}});
  std::vector<float> buffer{0, 1, 2, 3, 4, 5};
  const auto transposed = xt::adapt(buffer.data(), 6, xt::no_ownership(), std::array<std::size_t, 2>{3, 2},
                                    std::array<std::size_t, 2>{1, 3});  // (3, 2), strides (1, 3): the transpose
  save_npy(p, transposed);
  CHECK(load_npy<float, 2>(p) == xt::xtensor<float, 2>{{0, 3}, {1, 4}, {2, 5}});
  // the inputs of a model, from a Fortran-order file
  const auto x = inputs(3);
  std::vector<float> xf;
  for (std::size_t k = 0; k < 2; ++k)
    for (std::size_t j = 0; j < 2; ++j)
      for (std::size_t i = 0; i < 3; ++i) xf.push_back(x(i, j, k));
  write(p, npy_file(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (3, 2, 2), }",
                    std::string(reinterpret_cast<const char*>(xf.data()), xf.size() * sizeof(float))));
  CHECK(load_inputs_npy<model<net>>(p) == x);
}

TEST_CASE("load_npy refuses hostile headers before allocating for them") {
  temp_dir d;
  const fs::path p = d.path / "h.npy";
  const std::string pre = "load_npy: " + p.string() + ": ";
  auto refused = [&](const std::string& bytes) {
    write(p, bytes);
    return message_of([&] { load_npy<float, 1>(p); });
  };
  const std::string magic = "\x93NUMPY";
  // tests/fuzz/corpus/npy/regress_v2_header_4GiB: xtensor's reader allocated the 4 GiB it announces
  CHECK(refused(magic + std::string("\x02\x00\xff\xff\xff\xff{", 7)) ==
        pre + "not a valid .npy file (the header length 4294967295 is more than the 1048576 bytes ctnn reads)");
  CHECK(refused(magic + std::string("\x01\x00\x00\x10{'descr'", 12)) ==
        pre + "not a valid .npy file (the header length 4096 is more than the 8 bytes after it)");
  // regress_empty_header: an empty header was read at header.back()
  CHECK(refused(magic + std::string("\x01\x00\x00\x00", 4)) == pre + "not a valid .npy file (the header is empty)");
  // regress_len_byte_0x80: xtensor sign-extended a length byte >= 0x80 (here 182 = 0xb6) and
  // read past the header; NumPy writes such headers for a long shape
  {
    std::string shape = "(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2)";
    const std::string file = npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }", raw({3.f, 4.f}));
    REQUIRE(static_cast<unsigned char>(file[8]) == 0xb6);
    write(p, file);
    const auto r = [&]<std::size_t... I>(std::index_sequence<I...>) {
      return load_npy<float, sizeof...(I)>(p);
    }(std::make_index_sequence<29>{});
    CHECK(r.size() == 2);
    CHECK(r.data()[1] == 4.f);
  }
  CHECK(refused(magic + std::string("\x04\x00", 2) + "....") ==
        pre + "not a valid .npy file (format version 4.0; ctnn reads 1.0, 2.0 and 3.0)");
  CHECK(refused(magic + std::string("\x01", 1)) ==
        pre + "not a valid .npy file (7 bytes, too short for the magic string and version)");
  const auto f4 = raw({1.f, 2.f});
  CHECK(refused(npy_file(1, "{'descr': '<f4', 'shape': (2,), }", f4)) ==
        pre + "not a valid .npy file (the header has no 'fortran_order')");
  CHECK(refused(npy_file(1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", f4)) ==
        pre + "not a valid .npy file (the key 'descr' appears twice)");
  CHECK(refused(npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", f4)) ==
        pre + "not a valid .npy file (unknown key 'x')");
  CHECK(refused(npy_file(1, "{'\x1b[2Jkey': 1}", f4)) == pre + "not a valid .npy file (unknown key '?[2Jkey')");
  CHECK(refused(npy_file(1, "{'descr': '" + std::string(50, 'x') + "', 'fortran_order': False, 'shape': (2,)}", f4)) ==
        pre + "holds '" + std::string(40, 'x') + "...' values; ctnn reads bool, integer and floating-point numbers");
  CHECK(refused(npy_file(1, "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}", f4)) ==
        pre + "not a valid .npy file ('fortran_order' is not True or False)");
  CHECK(refused(npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2)}", f4)) ==
        pre + "not a valid .npy file ('shape' is (2), a number, not a tuple)");
  CHECK(refused(npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}", f4)) ==
        pre + "not a valid .npy file ('shape' holds '-', not a size)");
  CHECK(refused(npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", f4)) ==
        pre + "not a valid .npy file (a size in 'shape' does not fit in 63 bits)");
  CHECK(refused(npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk", f4)) ==
        pre + "not a valid .npy file (the header goes on after its dictionary with 'j')");
  CHECK(refused(npy_file(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}", f4)) ==
        pre + "not a valid .npy file (a structured dtype (a list of fields); ctnn reads numbers)");
  CHECK(refused(npy_file(1, "{'descr': '<U2', 'fortran_order': False, 'shape': (2,)}", f4)) ==
        pre + "holds '<U2' values; ctnn reads bool, integer and floating-point numbers");
  CHECK(refused(npy_file(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,)}", f4)) ==
        pre + "holds float32 big-endian ('>f4') values, float32 ('<f4') are wanted");
  // the values: 2^62 x 2^62 of them, more than the file, fewer than the file
  CHECK(refused(npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4611686018427387904)}",
                         f4)) == pre + "truncated: the header announces more values than the file holds");
  CHECK(refused(npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}", f4)) ==
        pre + "truncated: the header announces more values than the file holds");
  CHECK(refused(npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", f4)) ==
        pre + "the file holds 8 bytes of values; its header announces 4 (shape (1,) of float32 ('<f4'))");
  // a bool byte other than 0 or 1 would be undefined behaviour once read as bool
  write(p, npy_file(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,)}", std::string("\x01\x00\x02", 3)));
  CHECK(message_of([&] { load_npy<bool, 1>(p); }) == pre + "byte 2 of the bool values is 2, neither 0 nor 1");
}

TEST_CASE("load_npy(path, npy_convert::allow) converts what NumPy and keras.datasets hand out, strict stays the default") {
  temp_dir d;
  const fs::path p = d.path / "c.npy";
  // uint8 images -> float32 (then load_inputs_npy for a model), int64 labels -> int32
  save_npy(p, xt::xtensor<std::uint8_t, 3>{{{0, 255}, {7, 128}}});
  CHECK(message_of([&] { load_npy<float, 3>(p); }) ==
        "load_npy: " + p.string() + ": holds uint8 ('|u1') values, float32 ('<f4') are wanted");
  CHECK(load_npy<float, 3>(p, npy_convert::allow) == xt::xtensor<float, 3>{{{0, 255}, {7, 128}}});
  CHECK(load_inputs_npy<model<net>>(p, npy_convert::allow) == xt::xtensor<float, 3>{{{0, 255}, {7, 128}}});
  save_npy(p, xt::xtensor<std::int64_t, 1>{3, 0, 9, -2});
  CHECK(load_npy<std::int32_t, 1>(p, npy_convert::allow) == xt::xtensor<std::int32_t, 1>{3, 0, 9, -2});
  CHECK(load_npy<double, 1>(p, npy_convert::allow) == xt::xtensor<double, 1>{3, 0, 9, -2});
  // float64 -> float32 (rounded), int8/int16/bool -> float, float16 -> float32, big-endian int16 -> int32
  save_npy(p, xt::xtensor<double, 2>{{0.1, -1e30}});
  CHECK(load_npy<float, 2>(p, npy_convert::allow) == xt::xtensor<float, 2>{{0.1f, -1e30f}});
  save_npy(p, xt::xtensor<std::int16_t, 1>{-300, 300});
  CHECK(load_npy<float, 1>(p, npy_convert::allow) == xt::xtensor<float, 1>{-300, 300});
  save_npy(p, xt::xtensor<bool, 1>{true, false});
  CHECK(load_npy<float, 1>(p, npy_convert::allow) == xt::xtensor<float, 1>{1, 0});
  write(p, npy_file(1, "{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }", raw<std::uint16_t>({0x3c00, 0xc100})));
  CHECK(load_npy<float, 1>(p, npy_convert::allow) == xt::xtensor<float, 1>{1.f, -2.5f});
  write(p, npy_file(1, "{'descr': '>i2', 'fortran_order': False, 'shape': (2,), }", std::string("\x01\x02\xff\xfe", 4)));
  CHECK(load_npy<std::int32_t, 1>(p, npy_convert::allow) == xt::xtensor<std::int32_t, 1>{0x0102, -2});
  // Fortran order, converted into C order
  write(p, npy_file(1, "{'descr': '|u1', 'fortran_order': True, 'shape': (2, 3), }", raw<std::uint8_t>({0, 3, 1, 4, 2, 5})));
  CHECK(load_npy<double, 2>(p, npy_convert::allow) == xt::xtensor<double, 2>{{0, 1, 2}, {3, 4, 5}});

  // what does not fit is an error naming the file and the index
  save_npy(p, xt::xtensor<double, 1>{1, 2, 1e300});
  CHECK(message_of([&] { load_npy<float, 1>(p, npy_convert::allow); }) ==
        "load_npy: " + p.string() + ": value 1e+300 at index 2 (C order) of its float64 ('<f8') values is out of the range of float32");
  save_npy(p, xt::xtensor<std::int64_t, 1>{1, std::int64_t(1) << 40});
  CHECK(message_of([&] { load_npy<std::int32_t, 1>(p, npy_convert::allow); }) ==
        "load_npy: " + p.string() + ": value 1099511627776 at index 1 (C order) of its int64 ('<i8') values is out of the range of int32");
  save_npy(p, xt::xtensor<std::int32_t, 1>{-1});
  CHECK(message_of([&] { load_npy<std::uint8_t, 1>(p, npy_convert::allow); }) ==
        "load_npy: " + p.string() + ": value -1 at index 0 (C order) of its int32 ('<i4') values is out of the range of uint8");
  save_npy(p, xt::xtensor<float, 2>{{1, 2}, {std::nanf(""), 0}});
  CHECK(message_of([&] { load_npy<std::int32_t, 2>(p, npy_convert::allow); }) ==
        "load_npy: " + p.string() + ": value nan at index 2 (C order) of its float32 ('<f4') values is not a number, so not an int32");
  save_npy(p, xt::xtensor<double, 1>{2.5});
  CHECK(message_of([&] { load_npy<std::int64_t, 1>(p, npy_convert::allow); }) ==
        "load_npy: " + p.string() + ": value 2.5 at index 0 (C order) of its float64 ('<f8') values is not a whole number, so not an int64");
  write(p, npy_file(1, "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", raw({1.f, 0.f})));
  CHECK(message_of([&] { load_npy<float, 1>(p, npy_convert::allow); }) ==
        "load_npy: " + p.string() + ": holds complex64 ('<c8') values; ctnn converts bool, integer, float16, float32 and "
        "float64 values");
}

// ctnn/data/element.hpp — the typed elements a pipeline carries.
//
// sample<S, K, T>: one example, S::size values of T and K::width targets
// (an int32 class for sparse_labels). batch_of<S, K, T>: `size` samples laid
// out row-major as the trainer wants them. The shape, target kind and value
// type are part of the type, so a pipeline's element is checked against the
// network's input at compile time. element_bytes(e) is the memory an element
// holds (the autotuner's memory budget counts it); write_element/read_element
// give the byte layout cache(path) stores (native-endian values).
#pragma once
#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/shape.hpp"
#include "../core/targets.hpp"

namespace ctnn::data {

template <Shape S, class K = sparse_labels, class T = float>
struct sample {
  using sample_shape = S;
  using target_kind = K;
  using value_type = T;
  using target_type = target_element_t<K, T>;
  std::vector<T> x = std::vector<T>(S::size);
  std::vector<target_type> y = std::vector<target_type>(K::width);
};

template <Shape S, class K = sparse_labels, class T = float>
struct batch_of {
  using sample_shape = S;
  using target_kind = K;
  using value_type = T;
  using target_type = target_element_t<K, T>;
  std::vector<T> x;              // size * S::size values
  std::vector<target_type> y;    // size * K::width values
  std::size_t size = 0;
};

template <class E>
inline constexpr bool is_sample_v = false;
template <class S, class K, class T>
inline constexpr bool is_sample_v<sample<S, K, T>> = true;
template <class E>
inline constexpr bool is_batch_v = false;
template <class S, class K, class T>
inline constexpr bool is_batch_v<batch_of<S, K, T>> = true;

template <class E>
concept Sample = is_sample_v<E>;
template <class E>
concept Batch = is_batch_v<E>;

template <class E>
std::size_t element_bytes(const E& e) {
  if constexpr (Sample<E> || Batch<E>)
    return sizeof(E) + e.x.size() * sizeof(typename E::value_type) + e.y.size() * sizeof(typename E::target_type);
  else
    return sizeof(E);
}

// "sample<28x28, sparse, 4-byte values>": what a cache file was written for.
template <class E>
std::string element_name() {
  using S = typename E::sample_shape;
  using K = typename E::target_kind;
  const std::string k = is_sparse_v<K>         ? std::string("sparse")
                        : is_step_labels_v<K> ? "labels " + std::to_string(K::width)
                                              : "dense " + std::to_string(K::width);
  return std::string(Sample<E> ? "sample<" : "batch_of<") + S::str() + ", " + k + ", " +
         std::to_string(sizeof(typename E::value_type)) + "-byte " +
         (std::is_floating_point_v<typename E::value_type> ? "float" : "int") + ">";
}

namespace detail {
template <class V>
void put_values(std::string& out, const std::vector<V>& v, std::size_t n) {
  out.append(reinterpret_cast<const char*>(v.data()), n * sizeof(V));
}
template <class V>
bool get_values(const char*& p, const char* end, std::vector<V>& v, std::size_t n) {
  if (n > std::size_t(end - p) / sizeof(V)) return false;  // no n * sizeof(V) that could wrap
  v.resize(n);
  std::memcpy(v.data(), p, n * sizeof(V));
  p += n * sizeof(V);
  return true;
}
}  // namespace detail

template <class E>
  requires Sample<E> || Batch<E>
void write_element(std::string& out, const E& e) {
  std::size_t n = 1;
  if constexpr (Batch<E>) {
    n = e.size;
    const auto s = std::uint64_t(n);
    out.append(reinterpret_cast<const char*>(&s), sizeof s);
  }
  detail::put_values(out, e.x, n * E::sample_shape::size);
  detail::put_values(out, e.y, n * E::target_kind::width);
}

// Reads one element at p (advancing it); false when the bytes run out first.
template <class E>
  requires Sample<E> || Batch<E>
bool read_element(const char*& p, const char* end, E& e) {
  std::size_t n = 1;
  if constexpr (Batch<E>) {
    std::uint64_t s = 0;
    if (std::size_t(end - p) < sizeof s) return false;
    std::memcpy(&s, p, sizeof s);
    p += sizeof s;
    if (s > std::size_t(end - p)) return false;  // cannot hold s samples
    n = e.size = std::size_t(s);
  }
  return detail::get_values(p, end, e.x, n * E::sample_shape::size) &&
         detail::get_values(p, end, e.y, n * E::target_kind::width);
}

}  // namespace ctnn::data

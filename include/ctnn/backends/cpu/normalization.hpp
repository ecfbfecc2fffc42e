// ctnn/backends/cpu/normalization.hpp — batch normalization and dropout on the CPU.
//
// The kernels behind ops<cpu<Arch>>'s has_layer_ops (core/backend_ops.hpp):
// batch_norm_forward / _backward over rows x C values (C channels, the last
// axis; per-channel sums in local arrays, so the loops over channels
// vectorize), dropout_forward (one uniform draw from the generator per value,
// in order) and dropout_backward (dy times the mask). T is the compute type
// (16-bit types compute in float: precision::arithmetic_t), S the moving
// statistics' type. The per-channel sums (the batch's mean and variance, dgamma, dbeta) run in
// chunks of batch_norm_chunk_rows(C) rows over the thread pool, each chunk's sums in row order and
// the chunks then added in chunk order; the element-wise passes (y, dx) over the pool by rows
// (batch_split.hpp): the same bits whatever the thread count.
// layers/batch_norm.hpp and layers/dropout.hpp have the formulas; docs/design.md ("The op set").
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "../../core/format.hpp"
#include "../../core/precision.hpp"
#include "../../core/rng.hpp"
#include "../../core/separate.hpp"
#include "batch_split.hpp"

namespace ctnn::kernels::cpu {

// Per-channel values of a channel count Cn: std::integral_constant<std::size_t, C> (a std::array,
// the loops over channels of known length) or std::size_t (run-time: on the heap).
namespace detail {
template <class A, class Cn>
class channel_values {
 public:
  explicit channel_values(Cn) noexcept {}
  A& operator[](std::size_t c) noexcept { return v_[c]; }
  const A& operator[](std::size_t c) const noexcept { return v_[c]; }

 private:
  std::array<A, Cn::value> v_{};
};
template <class A>
class channel_values<A, std::size_t> {
 public:
  explicit channel_values(std::size_t n) : v_(new A[n]()) {}
  A& operator[](std::size_t c) noexcept { return v_[c]; }
  const A& operator[](std::size_t c) const noexcept { return v_[c]; }

 private:
  std::unique_ptr<A[]> v_;
};
}  // namespace detail

// y = g (x - m) v + b per channel over rows x C values, split over the pool by rows.
template <class Cn, class T, class V>
void normalize_rows(Cn C, const T* x, T* y, const V& m, const V& v, const V& g, const V& b, std::size_t rows) {
  using A = std::remove_cvref_t<decltype(m[0])>;
  for_samples(rows, C, [&](std::size_t r0, std::size_t r1) {
    for (std::size_t i = r0; i < r1; ++i)
      for (std::size_t c = 0; c < C; ++c) y[i * C + c] = T(g[c] * (A(x[i * C + c]) - m[c]) * v[c] + b[c]);
  });
}

// The per-channel sums run in fixed chunks of rows (for_fixed_chunks): batch_norm_chunk_rows(C) rows,
// about 8 Ki values, a chunk; each chunk's sums in row order into the calling thread's scratch
// (batch_norm_scratch: not gemm/pack.hpp's simd::scratch, which would bring xsimd into <ctnn/network.hpp>),
// then the chunks added in chunk order: the bits depend on the rows and channels, not on the thread count.
inline constexpr std::size_t batch_norm_chunk_values = 8192;
constexpr std::size_t batch_norm_chunk_rows(std::size_t C) {
  return std::max<std::size_t>(1, batch_norm_chunk_values / std::max<std::size_t>(1, C));
}

// The chunks' sums: per thread (the calling one's), grown on demand, never shrunk.
template <class A>
A* batch_norm_scratch(std::size_t n) {
  thread_local std::vector<A> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

// The bodies below over a channel count Cn (channel_values): batch_norm_forward<C> and _backward<C>
// pass std::integral_constant, the run-time-C entries batch_norm_forward_n / _backward_n (the
// compiled part's one body for every channel count: ops<cpu> calls them in compiled mode) a size_t.
namespace detail {
// S sums a channel over rows: body(r0, r1, s) adds rows [r0, r1) into s[0 .. S) (channel_values, zero),
// chunk by chunk over the pool; returns the chunks' s[j][c] added in chunk order.
template <std::size_t S, class A, class Cn, class Body>
std::array<channel_values<A, Cn>, S> channel_sums(Cn C, std::size_t rows, Body&& body) {
  using V = channel_values<A, Cn>;
  auto zeros = [&]<std::size_t... J>(std::index_sequence<J...>) { return std::array<V, S>{((void)J, V(C))...}; };
  const std::size_t chunk = batch_norm_chunk_rows(C), chunks = (rows + chunk - 1) / chunk, SC = S * C;
  A* const part = batch_norm_scratch<A>(chunks * SC);
  for_fixed_chunks(rows, chunk, C, [&](std::size_t k, std::size_t r0, std::size_t r1) {
    std::array<V, S> s = zeros(std::make_index_sequence<S>{});
    body(r0, r1, s);
    A* const p = part + k * SC;
    for (std::size_t j = 0; j < S; ++j)
      for (std::size_t c = 0; c < C; ++c) p[j * C + c] = s[j][c];
  });
  std::array<V, S> out = zeros(std::make_index_sequence<S>{});
  for (std::size_t j = 0; j < S; ++j)
    for (std::size_t c = 0; c < C; ++c) {
      A t = chunks ? part[j * C + c] : A(0);
      for (std::size_t k = 1; k < chunks; ++k) t += part[k * SC + j * C + c];
      out[j][c] = t;
    }
  return out;
}

// batch_norm_forward's body (below).
template <class Cn, class T, class S>
void batch_norm_forward_c(Cn C, const T* x, T* y, const T* gamma, const T* beta, S* moving_mean, S* moving_var,
                          T* mean, T* inv, std::size_t rows, double momentum, double epsilon, bool training) {
  using A = precision::arithmetic_t<T>;
  using V = channel_values<A, Cn>;
  V m(C), v(C);
  if (training) {
    const auto sum = channel_sums<1, A>(C, rows, [&](std::size_t r0, std::size_t r1, std::array<V, 1>& s) {
      for (std::size_t i = r0; i < r1; ++i)
        for (std::size_t c = 0; c < C; ++c) s[0][c] += A(x[i * C + c]);
    });
    V mu(C);
    for (std::size_t c = 0; c < C; ++c) mu[c] = sum[0][c] / A(rows);
    const auto sq = channel_sums<1, A>(C, rows, [&](std::size_t r0, std::size_t r1, std::array<V, 1>& s) {
      for (std::size_t i = r0; i < r1; ++i)
        for (std::size_t c = 0; c < C; ++c) {
          const A d = A(x[i * C + c]) - mu[c];
          s[0][c] += d * d;
        }
    });
    for (std::size_t c = 0; c < C; ++c) {
      const A var = sq[0][c] / A(rows);
      moving_mean[c] = S(A(moving_mean[c]) * A(momentum) + mu[c] * (A(1) - A(momentum)));
      moving_var[c] = S(A(moving_var[c]) * A(momentum) + var * (A(1) - A(momentum)));
      m[c] = mu[c];
      v[c] = A(1) / std::sqrt(var + A(epsilon));
    }
  } else {
    for (std::size_t c = 0; c < C; ++c) {
      m[c] = A(moving_mean[c]);
      v[c] = A(1) / std::sqrt(A(moving_var[c]) + A(epsilon));
    }
  }
  V g(C), b(C);
  for (std::size_t c = 0; c < C; ++c) {
    mean[c] = T(m[c]);
    inv[c] = T(v[c]);
    g[c] = A(gamma[c]);
    b[c] = A(beta[c]);
  }
  normalize_rows(C, x, y, m, v, g, b, rows);
}

// batch_norm_backward's body (below).
template <class Cn, class T>
void batch_norm_backward_c(Cn C, const T* x, const T* dy, T* dx, const T* gamma, const T* mean, const T* inv,
                           T* dgamma, T* dbeta, std::size_t rows, bool training) {
  using A = precision::arithmetic_t<T>;
  using V = channel_values<A, Cn>;
  V m(C), v(C);
  for (std::size_t c = 0; c < C; ++c) {
    m[c] = A(mean[c]);
    v[c] = A(inv[c]);
  }
  // sum dy, sum dy xhat
  const auto sums = channel_sums<2, A>(C, rows, [&](std::size_t r0, std::size_t r1, std::array<V, 2>& s) {
    for (std::size_t i = r0; i < r1; ++i)
      for (std::size_t c = 0; c < C; ++c) {
        const A xhat = (A(x[i * C + c]) - m[c]) * v[c];
        s[0][c] += A(dy[i * C + c]);
        s[1][c] += A(dy[i * C + c]) * xhat;
      }
  });
  const V& db = sums[0];
  const V& dg = sums[1];
  for (std::size_t c = 0; c < C; ++c) {
    dgamma[c] = T(dg[c]);
    dbeta[c] = T(db[c]);
  }
  if (!dx) return;
  V k(C);
  if (!training) {
    for (std::size_t c = 0; c < C; ++c) k[c] = A(gamma[c]) * v[c];
    for_samples(rows, C, [&](std::size_t r0, std::size_t r1) {
      for (std::size_t i = r0; i < r1; ++i)
        for (std::size_t c = 0; c < C; ++c) dx[i * C + c] = T(k[c] * A(dy[i * C + c]));
    });
    return;
  }
  const A mm = A(rows);
  for (std::size_t c = 0; c < C; ++c) k[c] = A(gamma[c]) * v[c] / mm;
  for_samples(rows, C, [&](std::size_t r0, std::size_t r1) {
    for (std::size_t i = r0; i < r1; ++i)
      for (std::size_t c = 0; c < C; ++c) {
        const A xhat = (A(x[i * C + c]) - m[c]) * v[c];
        dx[i * C + c] = T(k[c] * (mm * A(dy[i * C + c]) - db[c] - xhat * dg[c]));
      }
  });
}
}  // namespace detail

// Training (batch statistics, biased variance; the moving statistics updated) or inference
// (the moving statistics): mean and inv = 1 / sqrt(var + epsilon) cached, y = gamma (x - mean) inv + beta.
template <std::size_t C, class T, class S>
void batch_norm_forward(const T* x, T* y, const T* gamma, const T* beta, S* moving_mean, S* moving_var, T* mean,
                        T* inv, std::size_t rows, double momentum, double epsilon, bool training) {
  detail::batch_norm_forward_c(std::integral_constant<std::size_t, C>{}, x, y, gamma, beta, moving_mean, moving_var,
                               mean, inv, rows, momentum, epsilon, training);
}

// dgamma = sum dy xhat, dbeta = sum dy (overwritten); dx (when not null) through the batch statistics
// in training, dx = gamma inv / M (M dy - dbeta - xhat dgamma), else dx = gamma inv dy.
template <std::size_t C, class T>
void batch_norm_backward(const T* x, const T* dy, T* dx, const T* gamma, const T* mean, const T* inv, T* dgamma,
                         T* dbeta, std::size_t rows, bool training) {
  detail::batch_norm_backward_c(std::integral_constant<std::size_t, C>{}, x, dy, dx, gamma, mean, inv, dgamma, dbeta,
                                rows, training);
}

// The same over a run-time channel count C, the same operations in the same order (the same bits):
// one entry for every channel count (the common counts 16 to 256 run the compile-time body:
// with_common_count, core/separate.hpp), which the compiled part holds for float (compiled_kernels.hpp's
// CTNN_DETAIL_NORMALIZATION_INSTANCES; ops<cpu<Arch>> calls them in compiled mode). Arch names the
// architecture the caller's flags enable, so a program built for another one fails to link instead of
// running the object's code.
template <class Arch, class T, class S>
void batch_norm_forward_n(std::size_t C, const T* x, T* y, const T* gamma, const T* beta, S* moving_mean,
                          S* moving_var, T* mean, T* inv, std::size_t rows, double momentum, double epsilon,
                          bool training) {
  ::ctnn::detail::with_common_count(C, [&](auto c) {
    detail::batch_norm_forward_c(c, x, y, gamma, beta, moving_mean, moving_var, mean, inv, rows, momentum, epsilon,
                                 training);
  });
}
template <class Arch, class T>
void batch_norm_backward_n(std::size_t C, const T* x, const T* dy, T* dx, const T* gamma, const T* mean,
                           const T* inv, T* dgamma, T* dbeta, std::size_t rows, bool training) {
  ::ctnn::detail::with_common_count(
      C, [&](auto c) { detail::batch_norm_backward_c(c, x, dy, dx, gamma, mean, inv, dgamma, dbeta, rows, training); });
}

// Synchronized (cross-replica) batch normalization in training, host memory: the statistics of
// the batch of every replica together. average(double*, n) replaces n values by their mean over
// the replicas. Forward: one average of {sum(x - K), sum((x - K)^2), rows} per channel, in double,
// shifted by K = the moving mean (the same on every replica), then the global mean and biased
// variance as batch_norm_forward's; the moving statistics updated with them on every replica.
template <std::size_t C, class T, class S, class Average>
void batch_norm_forward_cross_replica(const T* x, T* y, const T* gamma, const T* beta, S* moving_mean, S* moving_var,
                                      T* mean, T* inv, std::size_t rows, double momentum, double epsilon,
                                      Average&& average) {
  using A = precision::arithmetic_t<T>;
  std::array<double, 2 * C + 1> s{};
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t c = 0; c < C; ++c) {
      const double d = double(A(x[i * C + c])) - double(moving_mean[c]);
      s[c] += d;
      s[C + c] += d * d;
    }
  s[2 * C] = double(rows);
  average(s.data(), s.size());
  std::array<A, C> m, v, g, b;
  for (std::size_t c = 0; c < C; ++c) {
    const double shift = s[c] / s[2 * C];
    const double var = std::max(0.0, s[C + c] / s[2 * C] - shift * shift);
    const double mu = double(moving_mean[c]) + shift;
    moving_mean[c] = S(double(moving_mean[c]) * momentum + mu * (1 - momentum));
    moving_var[c] = S(double(moving_var[c]) * momentum + var * (1 - momentum));
    m[c] = A(mu);
    v[c] = A(1 / std::sqrt(var + epsilon));
    mean[c] = T(m[c]);
    inv[c] = T(v[c]);
    g[c] = A(gamma[c]);
    b[c] = A(beta[c]);
  }
  normalize_rows(std::integral_constant<std::size_t, C>{}, x, y, m, v, g, b, rows);
}

// Its backward: dgamma, dbeta this replica's sums (data_parallel averages them with the other
// gradients); dx through the global statistics, with the sums of dy and dy xhat averaged over the
// replicas: dx = gamma inv (dy - mean(dy) - xhat mean(dy xhat)), the means over every replica's rows.
template <std::size_t C, class T, class Average>
void batch_norm_backward_cross_replica(const T* x, const T* dy, T* dx, const T* gamma, const T* mean, const T* inv,
                                       T* dgamma, T* dbeta, std::size_t rows, Average&& average) {
  using A = precision::arithmetic_t<T>;
  std::array<double, 2 * C + 1> s{};
  std::array<A, C> m, v;
  for (std::size_t c = 0; c < C; ++c) {
    m[c] = A(mean[c]);
    v[c] = A(inv[c]);
  }
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t c = 0; c < C; ++c) {
      const A xhat = (A(x[i * C + c]) - m[c]) * v[c];
      s[c] += double(A(dy[i * C + c]));
      s[C + c] += double(A(dy[i * C + c]) * xhat);
    }
  for (std::size_t c = 0; c < C; ++c) {
    dbeta[c] = T(A(s[c]));
    dgamma[c] = T(A(s[C + c]));
  }
  s[2 * C] = double(rows);
  average(s.data(), s.size());  // every replica joins, whether or not it needs dx
  if (!dx) return;
  std::array<A, C> k, mdy, mdyx;
  for (std::size_t c = 0; c < C; ++c) {
    k[c] = A(gamma[c]) * v[c];
    mdy[c] = A(s[c] / s[2 * C]);
    mdyx[c] = A(s[C + c] / s[2 * C]);
  }
  for_samples(rows, C, [&](std::size_t r0, std::size_t r1) {
    for (std::size_t i = r0; i < r1; ++i)
      for (std::size_t c = 0; c < C; ++c) {
        const A xhat = (A(x[i * C + c]) - m[c]) * v[c];
        dx[i * C + c] = T(k[c] * (A(dy[i * C + c]) - mdy[c] - xhat * mdyx[c]));
      }
  });
}

// A rate outside [0, 1) throws std::invalid_argument ("the dropout rate must be in [0, 1), got r").
// (The message is built once, in the compiled part: core/separate.hpp.)
[[noreturn, gnu::cold, gnu::noinline]] CTNN_DECL void throw_dropout_rate_range(double rate)
#if CTNN_DEFINITIONS
{
  throw std::invalid_argument("the dropout rate must be in [0, 1), got " + ctnn::detail::format_number(rate));
}
#else
;
#endif
inline void check_dropout_rate(double rate) {
  if (!(rate >= 0 && rate < 1)) throw_dropout_rate_range(rate);
}

// Each of n values gets one uniform draw u from gen, in order: mask = 1 / (1 - rate) when
// u >= rate, else 0; y = x * mask.
template <class T>
void dropout_forward(const T* x, T* y, T* mask, std::size_t n, double rate, rng& gen) {
  check_dropout_rate(rate);
  using A = precision::arithmetic_t<T>;
  const A scale = A(1) / (A(1) - A(rate));
  // the mask's two values indexed by the draw, not a branch: kept or not is a coin toss at rate 0.5,
  // and a mispredicted branch a value took 6 ns (8,192 values in 50 us, one thread)
  const A values[2] = {A(0), scale};
  for (std::size_t i = 0; i < n; ++i) {
    const A m = values[gen.uniform() >= rate];
    mask[i] = T(m);
    y[i] = T(A(x[i]) * m);
  }
}

// dx = dy * mask
template <class T>
void dropout_backward(const T* mask, const T* dy, T* dx, std::size_t n) {
  using A = precision::arithmetic_t<T>;
  for (std::size_t i = 0; i < n; ++i) dx[i] = T(A(dy[i]) * A(mask[i]));
}

// Layer normalization over the last axis: each of rows rows of C values normalised by its own
// mean and biased variance, y = gamma (x - mean) inv + beta, inv = 1 / sqrt(var + eps); mean[r]
// and inv[r] cached for the backward pass. Backward: dgamma, dbeta (assigned, sums over the rows)
// and, when dx is not null, dx = inv (g - mean(g) - xhat mean(g xhat)), g = gamma dy.
template <std::size_t C, class T>
void layer_norm_forward(const T* x, T* y, const T* gamma, const T* beta, T* mean, T* inv, std::size_t rows,
                        double eps) {
  using A = precision::arithmetic_t<T>;
  for_samples(rows, C, [&](std::size_t r0, std::size_t r1) {
    for (std::size_t i = r0; i < r1; ++i) {
      const T* xr = x + i * C;
      double m = 0, v = 0;
      for (std::size_t c = 0; c < C; ++c) m += double(A(xr[c]));
      m /= double(C);
      for (std::size_t c = 0; c < C; ++c) v += (double(A(xr[c])) - m) * (double(A(xr[c])) - m);
      const double k = 1.0 / std::sqrt(v / double(C) + eps);
      mean[i] = T(A(m));
      inv[i] = T(A(k));
      for (std::size_t c = 0; c < C; ++c)
        y[i * C + c] = T(A(double(A(gamma[c])) * (double(A(xr[c])) - m) * k + double(A(beta[c]))));
    }
  });
}
template <std::size_t C, class T>
void layer_norm_backward(const T* x, const T* dy, T* dx, const T* gamma, const T* mean, const T* inv, T* dgamma,
                         T* dbeta, std::size_t rows) {
  using A = precision::arithmetic_t<T>;
  std::array<double, C> dg{}, db{};
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t c = 0; c < C; ++c) {
      const double xhat = (double(A(x[i * C + c])) - double(A(mean[i]))) * double(A(inv[i]));
      db[c] += double(A(dy[i * C + c]));
      dg[c] += double(A(dy[i * C + c])) * xhat;
    }
  for (std::size_t c = 0; c < C; ++c) {
    dgamma[c] = T(A(dg[c]));
    dbeta[c] = T(A(db[c]));
  }
  if (!dx) return;
  for_samples(rows, C, [&](std::size_t r0, std::size_t r1) {
    for (std::size_t i = r0; i < r1; ++i) {
      const double m = double(A(mean[i])), k = double(A(inv[i]));
      double sg = 0, sgx = 0;
      for (std::size_t c = 0; c < C; ++c) {
        const double g = double(A(gamma[c])) * double(A(dy[i * C + c])), xhat = (double(A(x[i * C + c])) - m) * k;
        sg += g;
        sgx += g * xhat;
      }
      sg /= double(C);
      sgx /= double(C);
      for (std::size_t c = 0; c < C; ++c) {
        const double g = double(A(gamma[c])) * double(A(dy[i * C + c])), xhat = (double(A(x[i * C + c])) - m) * k;
        dx[i * C + c] = T(A(k * (g - sg - xhat * sgx)));
      }
    }
  });
}

}  // namespace ctnn::kernels::cpu

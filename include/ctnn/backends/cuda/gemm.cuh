// ctnn/cuda/gemm.cuh — column-major GEMMs through cuBLASLt, with fused epilogues.
//
// lt_matmul<T>(ta, tb, M, N, K, A, lda, B, ldb, D, ldd, bias, epi) computes
//   D[M, N] = op(A)[M, K] * op(B)[K, N]  (+ bias[M] per row of D; relu)
// column-major (cuBLAS convention), op = transpose when ta / tb. T is the
// storage type of A, B, D and the bias (float, __half, __nv_bfloat16);
// the compute type is always CUBLAS_COMPUTE_32F (strict float32: no TF32,
// so the float path matches the CPU within 1e-5 relative; half and bfloat16
// inputs run on Tensor Cores with float32 accumulation). The layout
// descriptors and the heuristic's algorithm are cached per shape, type,
// epilogue and pointer alignment (one map per host thread). When cuBLASLt
// offers no algorithm with the fused epilogue (an alignment it does not
// support, or a bias that is not 16-byte aligned), the plain GEMM runs and
// bias_act_kernel adds the bias and relu; when it has no algorithm at all,
// naive_gemm (one thread per output, float32 accumulation) runs instead.
// With unfused_ok = false neither second pass runs: lt_matmul returns false
// having queued nothing (dense_forward then runs gemm_epilogue.cuh's kernel).
// Everything is queued on cuda_context::get().compute().
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>

#include "context.cuh"
#include "error.cuh"
#include "types.cuh"

namespace ctnn {

enum class lt_epilogue { none, bias, relu_bias };

namespace cuda_detail {

template <class T>
__global__ void bias_act_kernel(T* y, const T* b, std::size_t rows, std::size_t cols, bool relu) {
  const std::size_t n = rows * cols;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    float v = load(y[i]) + (b ? load(b[i % cols]) : 0.0f);
    if (relu) v = v > 0.0f ? v : 0.0f;
    y[i] = store<T>(v);
  }
}

// The last resort when cuBLASLt has no algorithm for a shape, type and
// alignment: one thread per element of D, float32 accumulation in k order.
template <class T>
__global__ void naive_gemm(bool ta, bool tb, int M, int N, int K, const T* A, int lda, const T* B, int ldb, T* D,
                           int ldd) {
  for (std::size_t e = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; e < std::size_t(M) * N;
       e += std::size_t(gridDim.x) * blockDim.x) {
    const int r = int(e % M), c = int(e / M);
    float acc = 0;
    for (int k = 0; k < K; ++k) {
      const float a = load(ta ? A[std::size_t(r) * lda + k] : A[std::size_t(k) * lda + r]);
      const float b = load(tb ? B[std::size_t(k) * ldb + c] : B[std::size_t(c) * ldb + k]);
      acc += a * b;
    }
    D[std::size_t(c) * ldd + r] = store<T>(acc);
  }
}

inline unsigned grid_for(std::size_t n, unsigned block = 256) {
  const std::size_t g = (n + block - 1) / block;
  return unsigned(g < 65535 * 16 ? (g ? g : 1) : 65535 * 16);
}

inline std::uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t al = 256;
  while (al > 1 && a % al) al /= 2;
  return al;
}

struct lt_plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool fused = false;  // the epilogue runs inside the GEMM
  bool naive = false;  // no cuBLASLt algorithm: naive_gemm
  lt_plan() = default;
  lt_plan(const lt_plan&) = delete;
  lt_plan& operator=(const lt_plan&) = delete;
  ~lt_plan() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

using lt_key = std::tuple<int, bool, bool, int, int, int, int, int, int, int, std::uint32_t, std::uint32_t,
                          std::uint32_t, std::uint32_t>;

// Builds the descriptors for one key; false when cuBLASLt has no algorithm.
inline bool make_plan(lt_plan& p, cudaDataType_t t, bool ta, bool tb, int M, int N, int K, int lda, int ldb, int ldd,
                      lt_epilogue e, std::uint32_t al_a, std::uint32_t al_b, std::uint32_t al_d) {
  cuda_context& ctx = cuda_context::get();
  CTNN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  CTNN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
  CTNN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
  if (e != lt_epilogue::none) {
    const cublasLtEpilogue_t ep = e == lt_epilogue::bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_RELU_BIAS;
    CTNN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
  }
  // stored shapes: op(A) is M x K, so A is M x K (lda >= M) or K x M when transposed
  CTNN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, t, ta ? K : M, ta ? M : K, lda));
  CTNN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, t, tb ? N : K, tb ? K : N, ldb));
  CTNN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.d, t, M, N, ldd));
  cublasLtMatmulPreference_t pref = nullptr;
  CTNN_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const std::size_t ws = cuda_context::workspace_bytes;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_d, sizeof al_d);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_d, sizeof al_d);
  cublasLtMatmulHeuristicResult_t h{};
  int found = 0;
  const cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(ctx.lt(), p.op, p.a, p.b, p.d, p.d, pref, 1, &h, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (s != CUBLAS_STATUS_SUCCESS || found == 0) return false;
  p.algo = h.algo;
  p.fused = e != lt_epilogue::none;
  return true;
}

}  // namespace cuda_detail

template <cuda_storage T>
bool lt_matmul(bool ta, bool tb, int M, int N, int K, const T* A, int lda, const T* B, int ldb, T* D, int ldd,
               const T* bias, lt_epilogue e, bool unfused_ok = true) {
  using namespace cuda_detail;
  if (M == 0 || N == 0) return true;
  if (K == 0) throw cuda_error("ctnn cuda: lt_matmul: the inner dimension K is 0");
  cuda_context& ctx = cuda_context::get();
  if (e != lt_epilogue::none && !bias) e = lt_epilogue::none;
  const std::uint32_t al_a = alignment_of(A), al_b = alignment_of(B), al_d = alignment_of(D),
                      al_bias = e == lt_epilogue::none ? 0 : alignment_of(bias);
  // a bias that is not 16-byte aligned (a half bias after an odd-sized kernel) is never given to the epilogue
  const bool try_fused = e != lt_epilogue::none && al_bias >= 16;
  thread_local std::map<lt_key, lt_plan> plans;
  const lt_key key{int(storage<T>::data_type), ta, tb, M, N, K, lda, ldb, ldd, int(e), al_a, al_b, al_d, al_bias};
  auto it = plans.find(key);
  if (it == plans.end()) {
    it = plans.try_emplace(key).first;
    lt_plan& p = it->second;
    if (!try_fused || !make_plan(p, storage<T>::data_type, ta, tb, M, N, K, lda, ldb, ldd, e, al_a, al_b, al_d)) {
      // no fused algorithm: the plain GEMM (and bias_act_kernel after it)
      p.~lt_plan();
      new (&p) lt_plan();
      if (!make_plan(p, storage<T>::data_type, ta, tb, M, N, K, lda, ldb, ldd, lt_epilogue::none, al_a, al_b, al_d))
        p.naive = true;
    }
  }
  lt_plan& p = it->second;
  if (e != lt_epilogue::none && !p.fused && !unfused_ok) return false;
  if (p.naive) {
    naive_gemm<T><<<grid_for(std::size_t(M) * N), 256, 0, ctx.compute()>>>(ta, tb, M, N, K, A, lda, B, ldb, D, ldd);
    CTNN_CUDA_CHECK(cudaGetLastError());
    if (e != lt_epilogue::none) {
      bias_act_kernel<T><<<grid_for(std::size_t(M) * N), 256, 0, ctx.compute()>>>(D, bias, std::size_t(N),
                                                                                   std::size_t(M), e == lt_epilogue::relu_bias);
      CTNN_CUDA_CHECK(cudaGetLastError());
    }
    return true;
  }
  if (p.fused)
    CTNN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  const float alpha = 1.0f, beta = 0.0f;
  CTNN_CUBLAS_CHECK(cublasLtMatmul(ctx.lt(), p.op, &alpha, A, p.a, B, p.b, &beta, D, p.d, D, p.d, &p.algo,
                                   ctx.workspace(), cuda_context::workspace_bytes, ctx.compute()));
  if (e != lt_epilogue::none && !p.fused) {
    // D is M x N column-major with ldd == M here (the ops' only use): rows of N, bias per element of a column
    bias_act_kernel<T><<<grid_for(std::size_t(M) * N), 256, 0, ctx.compute()>>>(D, bias, std::size_t(N),
                                                                                 std::size_t(M), e == lt_epilogue::relu_bias);
    CTNN_CUDA_CHECK(cudaGetLastError());
  }
  return true;
}

}  // namespace ctnn

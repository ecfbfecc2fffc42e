// ctnn/cuda/types.cuh — the storage types of the CUDA kernels.
//
// Every CUDA op is templated on its storage type T: float, __half or
// __nv_bfloat16, or the host's names of the same bits, float16_t and
// bfloat16_t (core/half.hpp: what the generic model's plan binds the layers
// with under the 16-bit policies). Arithmetic is float32 whatever T is:
// load() widens a stored value to float, store<T>() rounds a float to T
// (round to nearest even), and storage<T>::data_type names T for cuBLASLt
// (CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF). cuda_storage<T> is the concept the ops require.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <library_types.h>

#include <type_traits>

#include "../../core/half.hpp"

namespace ctnn {

template <class T>
struct storage;
template <>
struct storage<float> {
  static constexpr cudaDataType_t data_type = CUDA_R_32F;
  static constexpr const char* name = "float";
};
template <>
struct storage<__half> {
  static constexpr cudaDataType_t data_type = CUDA_R_16F;
  static constexpr const char* name = "half";
};
template <>
struct storage<__nv_bfloat16> {
  static constexpr cudaDataType_t data_type = CUDA_R_16BF;
  static constexpr const char* name = "bfloat16";
};

template <>
struct storage<float16_t> : storage<__half> {};
template <>
struct storage<bfloat16_t> : storage<__nv_bfloat16> {};
static_assert(sizeof(float16_t) == sizeof(__half) && sizeof(bfloat16_t) == sizeof(__nv_bfloat16));

template <class T>
concept cuda_storage = std::is_same_v<T, float> || std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16> ||
                       std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>;

namespace cuda_detail {
__host__ __device__ inline float load(float v) { return v; }
__host__ __device__ inline float load(__half v) { return __half2float(v); }
__host__ __device__ inline float load(__nv_bfloat16 v) { return __bfloat162float(v); }
__host__ __device__ inline float load(float16_t v) { return __half2float(__ushort_as_half(v.bits)); }
__host__ __device__ inline float load(bfloat16_t v) { return __bfloat162float(__ushort_as_bfloat16(v.bits)); }

template <class T>
__host__ __device__ inline T store(float v) {
  if constexpr (std::is_same_v<T, float>)
    return v;
  else if constexpr (std::is_same_v<T, __half>)
    return __float2half_rn(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __float2bfloat16_rn(v);
  else if constexpr (std::is_same_v<T, float16_t>) {
    T h;
    h.bits = __half_as_ushort(__float2half_rn(v));
    return h;
  } else {
    T h;
    h.bits = __bfloat16_as_ushort(__float2bfloat16_rn(v));
    return h;
  }
}
}  // namespace cuda_detail

}  // namespace ctnn

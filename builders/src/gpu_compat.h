/* ccl-health: the CUDA runtime names ccl_health_links.cu uses, mapped to
 * HIP's where the source is compiled by hipcc for AMD GPUs
 * (__HIP_PLATFORM_AMD__, or clang's __HIP__ where hipcc does not define
 * it: Debian's HIP 5.2); with nvcc it is the CUDA runtime itself. */
#ifndef CCL_HEALTH_GPU_COMPAT_H
#define CCL_HEALTH_GPU_COMPAT_H
#if defined(__HIP_PLATFORM_AMD__) || defined(__HIP__)
#include <hip/hip_runtime.h>
#define GPU_RUNTIME "HIP"
#define cudaError_t hipError_t
#define cudaSuccess hipSuccess
#define cudaErrorPeerAccessAlreadyEnabled hipErrorPeerAccessAlreadyEnabled
#define cudaGetErrorString hipGetErrorString
#define cudaGetLastError hipGetLastError
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaSetDevice hipSetDevice
#define cudaDeviceGetPCIBusId hipDeviceGetPCIBusId
#define cudaDeviceProp hipDeviceProp_t
#define cudaGetDeviceProperties hipGetDeviceProperties
#define cudaDeviceCanAccessPeer hipDeviceCanAccessPeer
#define cudaDeviceEnablePeerAccess hipDeviceEnablePeerAccess
#define cudaDeviceSynchronize hipDeviceSynchronize
#define cudaDriverGetVersion hipDriverGetVersion
#define cudaRuntimeGetVersion hipRuntimeGetVersion
#define cudaMalloc hipMalloc
#define cudaFree hipFree
#define cudaMallocHost hipHostMalloc
#define cudaFreeHost hipHostFree
#define cudaMemset hipMemset
#define cudaMemcpy hipMemcpy
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemcpyPeerAsync hipMemcpyPeerAsync
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define cudaMemcpyHostToHost hipMemcpyHostToHost
#define cudaMemcpyKind hipMemcpyKind
#define cudaStream_t hipStream_t
#define cudaStreamCreateWithFlags hipStreamCreateWithFlags
#define cudaStreamNonBlocking hipStreamNonBlocking
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaStreamDestroy hipStreamDestroy
#define cudaEvent_t hipEvent_t
#define cudaEventCreate hipEventCreate
#define cudaEventRecord hipEventRecord
#define cudaEventSynchronize hipEventSynchronize
#define cudaEventElapsedTime hipEventElapsedTime
#define cudaEventDestroy hipEventDestroy
#define cudaMemsetAsync hipMemsetAsync
#else
#include <cuda_runtime.h>
#define GPU_RUNTIME "CUDA"
#endif
/* ccl-health-probe (-DCCL_HEALTH_PROBE): NCCL, or RCCL (whose API keeps
 * NCCL's names; its header is <rccl/rccl.h>, <rccl.h> before ROCm 5.x) */
#ifdef CCL_HEALTH_PROBE
#if defined(__HIP_PLATFORM_AMD__) || defined(__HIP__)
#if __has_include(<rccl/rccl.h>)
#include <rccl/rccl.h>
#else
#include <rccl.h>
#endif
#define NCCL_NAME "rccl"
#else
#include <nccl.h>
#define NCCL_NAME "nccl"
#endif
#endif
#endif

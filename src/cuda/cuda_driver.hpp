// The few CUDA driver API declarations the CUDA backend needs, written out
// so that building it needs no CUDA toolkit. Values and signatures are those
// of cuda.h (CUDA 11 to 13); tests/cuda/driver_decls.cpp checks them against
// cuda.h when the toolkit is installed.
#ifndef DLBRIDGE_SRC_CUDA_CUDA_DRIVER_HPP_
#define DLBRIDGE_SRC_CUDA_CUDA_DRIVER_HPP_

#include <cstddef>

namespace dlb::cu {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUhostFn = void (*)(void* user_data);
// CUipcMemHandle and CUipcEventHandle: 64 opaque bytes, passed by value.
struct CUipcMemHandle {
  char reserved[64];
};
struct CUipcEventHandle {
  char reserved[64];
};

constexpr CUresult kSuccess = 0;                 // CUDA_SUCCESS
constexpr CUresult kErrorInvalidValue = 1;       // CUDA_ERROR_INVALID_VALUE
constexpr CUresult kErrorOutOfMemory = 2;        // CUDA_ERROR_OUT_OF_MEMORY
constexpr CUresult kErrorInvalidContext = 201;   // CUDA_ERROR_INVALID_CONTEXT
constexpr unsigned kEventDisableTiming = 0x2;    // CU_EVENT_DISABLE_TIMING
constexpr unsigned kEventInterprocess = 0x4;     // CU_EVENT_INTERPROCESS
constexpr unsigned kIpcMemLazyEnablePeerAccess = 0x1;  // CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
constexpr unsigned kMemAttachGlobal = 0x1;       // CU_MEM_ATTACH_GLOBAL
constexpr int kPointerAttributeMemoryType = 2;   // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr int kPointerAttributeIsManaged = 8;    // CU_POINTER_ATTRIBUTE_IS_MANAGED
constexpr int kPointerAttributeDeviceOrdinal = 9;  // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
constexpr unsigned kMemoryTypeHost = 0x1;        // CU_MEMORYTYPE_HOST
constexpr unsigned kMemoryTypeDevice = 0x2;      // CU_MEMORYTYPE_DEVICE
constexpr unsigned kMemoryTypeUnified = 0x4;     // CU_MEMORYTYPE_UNIFIED

// CU_STREAM_LEGACY and CU_STREAM_PER_THREAD: the stream values 1 and 2 of
// the Python protocol are these handles.
inline CUstream legacy_stream() noexcept { return reinterpret_cast<CUstream>(0x1); }
inline CUstream per_thread_stream() noexcept { return reinterpret_cast<CUstream>(0x2); }

// The driver entry points, by the symbol names the backend resolves.
#define DLB_CUDA_DRIVER_FUNCTIONS(X)                                                      \
  X(cuInit, CUresult (*)(unsigned))                                                       \
  X(cuGetErrorName, CUresult (*)(CUresult, const char**))                                 \
  X(cuGetErrorString, CUresult (*)(CUresult, const char**))                               \
  X(cuDeviceGetCount, CUresult (*)(int*))                                                 \
  X(cuDeviceGet, CUresult (*)(CUdevice*, int))                                            \
  X(cuDevicePrimaryCtxRetain, CUresult (*)(CUcontext*, CUdevice))                         \
  X(cuDevicePrimaryCtxRelease_v2, CUresult (*)(CUdevice))                                 \
  X(cuCtxPushCurrent_v2, CUresult (*)(CUcontext))                                         \
  X(cuCtxPopCurrent_v2, CUresult (*)(CUcontext*))                                         \
  X(cuMemAlloc_v2, CUresult (*)(CUdeviceptr*, std::size_t))                               \
  X(cuMemFree_v2, CUresult (*)(CUdeviceptr))                                              \
  X(cuMemAllocHost_v2, CUresult (*)(void**, std::size_t))                                 \
  X(cuMemFreeHost, CUresult (*)(void*))                                                   \
  X(cuMemAllocManaged, CUresult (*)(CUdeviceptr*, std::size_t, unsigned))                 \
  X(cuMemsetD8Async, CUresult (*)(CUdeviceptr, unsigned char, std::size_t, CUstream))     \
  X(cuMemcpyDtoHAsync_v2, CUresult (*)(void*, CUdeviceptr, std::size_t, CUstream))        \
  X(cuStreamSynchronize, CUresult (*)(CUstream))                                          \
  X(cuStreamWaitEvent, CUresult (*)(CUstream, CUevent, unsigned))                         \
  X(cuEventCreate, CUresult (*)(CUevent*, unsigned))                                      \
  X(cuEventRecord, CUresult (*)(CUevent, CUstream))                                       \
  X(cuEventDestroy_v2, CUresult (*)(CUevent))                                             \
  X(cuPointerGetAttribute, CUresult (*)(void*, int, CUdeviceptr))                        \
  X(cuMemGetAddressRange_v2, CUresult (*)(CUdeviceptr*, std::size_t*, CUdeviceptr))       \
  X(cuIpcGetMemHandle, CUresult (*)(CUipcMemHandle*, CUdeviceptr))                        \
  X(cuIpcOpenMemHandle_v2, CUresult (*)(CUdeviceptr*, CUipcMemHandle, unsigned))          \
  X(cuIpcCloseMemHandle, CUresult (*)(CUdeviceptr))                                       \
  X(cuIpcGetEventHandle, CUresult (*)(CUipcEventHandle*, CUevent))                        \
  X(cuIpcOpenEventHandle, CUresult (*)(CUevent*, CUipcEventHandle))

}  // namespace dlb::cu

#endif

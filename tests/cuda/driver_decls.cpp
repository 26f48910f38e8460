// The CUDA backend declares the driver API itself (src/cuda/cuda_driver.hpp)
// so that it builds without the CUDA toolkit. Where cuda.h is installed,
// this program is compiled against it: every function the backend resolves
// must be declared by cuda.h under that exact symbol name, with the same
// return and parameter types up to the spelling of pointers and integers
// (sizes compared), and the constants must have cuda.h's values. It fails
// to compile otherwise; running it only prints what it checked.
#include <cuda.h>

#include <cstddef>
#include <cstdio>
#include <tuple>
#include <type_traits>

#include "cuda/cuda_driver.hpp"

namespace dlbcheck {

template <class T>
struct norm {
  // Integers, enums, and the IPC handles passed by value (64-byte structs).
  static_assert(std::is_integral_v<T> || std::is_enum_v<T> || std::is_class_v<T>,
                "a parameter that is neither pointer, integer nor handle");
  using type = std::integral_constant<std::size_t, sizeof(T) + (std::is_class_v<T> ? 1000 : 0)>;
};
template <class T>
struct norm<T*> {
  using type = void*;
};
template <class F>
struct sig;
template <class R, class... A>
struct sig<R (*)(A...)> {
  using type = std::tuple<typename norm<R>::type, typename norm<A>::type...>;
};

}  // namespace dlbcheck

// Expanded inside dlb::cu, so that the type names in the list are the
// backend's own declarations, not cuda.h's.
namespace dlb::cu {
#define DLB_CHECK_DECL(name, fn_type)                                                                     \
  static_assert(std::is_same_v<dlbcheck::sig<fn_type>::type, dlbcheck::sig<decltype(&::name)>::type>, \
                #name ": the backend's declaration differs from cuda.h's");
DLB_CUDA_DRIVER_FUNCTIONS(DLB_CHECK_DECL)
#undef DLB_CHECK_DECL
}  // namespace dlb::cu

namespace {

namespace cu = dlb::cu;
static_assert(sizeof(cu::CUdeviceptr) == sizeof(::CUdeviceptr));
static_assert(sizeof(cu::CUresult) == sizeof(::CUresult));
static_assert(cu::kSuccess == CUDA_SUCCESS);
static_assert(cu::kErrorInvalidValue == CUDA_ERROR_INVALID_VALUE);
static_assert(cu::kErrorOutOfMemory == CUDA_ERROR_OUT_OF_MEMORY);
static_assert(cu::kEventDisableTiming == CU_EVENT_DISABLE_TIMING);
static_assert(cu::kEventInterprocess == CU_EVENT_INTERPROCESS);
static_assert(cu::kIpcMemLazyEnablePeerAccess == CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
static_assert(cu::kErrorInvalidContext == CUDA_ERROR_INVALID_CONTEXT);
static_assert(sizeof(cu::CUipcMemHandle) == sizeof(::CUipcMemHandle));
static_assert(sizeof(cu::CUipcEventHandle) == sizeof(::CUipcEventHandle));
static_assert(cu::kMemAttachGlobal == CU_MEM_ATTACH_GLOBAL);
static_assert(cu::kPointerAttributeMemoryType == CU_POINTER_ATTRIBUTE_MEMORY_TYPE);
static_assert(cu::kPointerAttributeIsManaged == CU_POINTER_ATTRIBUTE_IS_MANAGED);
static_assert(cu::kPointerAttributeDeviceOrdinal == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL);
static_assert(cu::kMemoryTypeHost == CU_MEMORYTYPE_HOST);
static_assert(cu::kMemoryTypeDevice == CU_MEMORYTYPE_DEVICE);
static_assert(cu::kMemoryTypeUnified == CU_MEMORYTYPE_UNIFIED);

}  // namespace

int main() {
  int n = 0;
#define DLB_COUNT(name, fn_type) ++n;
  DLB_CUDA_DRIVER_FUNCTIONS(DLB_COUNT)
#undef DLB_COUNT
  std::printf("%d driver declarations and 18 constants match cuda.h (CUDA_VERSION %d)\n", n, CUDA_VERSION);
  // The stream values 1 and 2 are the driver's own handles.
  return cu::legacy_stream() == CU_STREAM_LEGACY && cu::per_thread_stream() == CU_STREAM_PER_THREAD ? 0 : 1;
}

// The OpenCL backend declares the OpenCL API itself (src/opencl/opencl_cl.hpp)
// so that it builds without OpenCL headers. Compiled against the Khronos
// headers (opencl-headers), this program checks that every function the
// backend resolves is declared there under that exact name, with the same
// return and parameter types up to the spelling of pointers and integers
// (sizes compared), and that the constants have the headers' values. It
// fails to compile otherwise; running it only prints what it checked.
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <CL/cl_ext.h>

#include <cstddef>
#include <cstdio>
#include <tuple>
#include <type_traits>

#include "opencl/opencl_cl.hpp"

namespace dlbcheck {

template <class T>
struct norm {
  static_assert(std::is_integral_v<T> || std::is_enum_v<T>, "a parameter that is neither pointer nor integer");
  using type = std::integral_constant<std::size_t, sizeof(T)>;
};
template <class T>
struct norm<T*> {
  using type = void*;
};
template <>
struct norm<void> {
  using type = void;
};
template <class F>
struct sig;
template <class R, class... A>
struct sig<R (*)(A...)> {
  using type = std::tuple<typename norm<R>::type, typename norm<A>::type...>;
};

}  // namespace dlbcheck

// Expanded inside dlb::cl, so that the type names in the list are the
// backend's own declarations, not the headers'.
namespace dlb::cl {
#define DLB_CHECK_DECL(name, fn_type)                                                                     \
  static_assert(std::is_same_v<dlbcheck::sig<fn_type>::type, dlbcheck::sig<decltype(&::name)>::type>, \
                #name ": the backend's declaration differs from CL/cl.h's");
DLB_OPENCL_FUNCTIONS(DLB_CHECK_DECL)
#undef DLB_CHECK_DECL
}  // namespace dlb::cl

namespace {

namespace ours = dlb::cl;
static_assert(sizeof(ours::cl_int) == sizeof(::cl_int) && sizeof(ours::cl_uint) == sizeof(::cl_uint));
static_assert(sizeof(ours::cl_bitfield) == sizeof(::cl_bitfield));
static_assert(sizeof(ours::cl_context_properties) == sizeof(::cl_context_properties));
static_assert(ours::kSuccess == CL_SUCCESS);
static_assert(ours::kDeviceNotFound == CL_DEVICE_NOT_FOUND);
static_assert(ours::kMemObjectAllocationFailure == CL_MEM_OBJECT_ALLOCATION_FAILURE);
static_assert(ours::kOutOfResources == CL_OUT_OF_RESOURCES);
static_assert(ours::kOutOfHostMemory == CL_OUT_OF_HOST_MEMORY);
static_assert(ours::kInvalidBufferSize == CL_INVALID_BUFFER_SIZE);
static_assert(ours::kPlatformNotFoundKhr == CL_PLATFORM_NOT_FOUND_KHR);
static_assert(ours::kFalse == CL_FALSE && ours::kTrue == CL_TRUE);
static_assert(ours::kDeviceTypeAll == CL_DEVICE_TYPE_ALL);
static_assert(ours::kMemReadWrite == CL_MEM_READ_WRITE);
static_assert(ours::kPlatformName == CL_PLATFORM_NAME);
static_assert(ours::kDeviceName == CL_DEVICE_NAME);
static_assert(ours::kContextDevices == CL_CONTEXT_DEVICES);
static_assert(ours::kContextNumDevices == CL_CONTEXT_NUM_DEVICES);
static_assert(ours::kContextPlatform == CL_CONTEXT_PLATFORM);
static_assert(ours::kQueueContext == CL_QUEUE_CONTEXT);
static_assert(ours::kQueueDevice == CL_QUEUE_DEVICE);
static_assert(ours::kMemType == CL_MEM_TYPE);
static_assert(ours::kMemSize == CL_MEM_SIZE);
static_assert(ours::kMemReferenceCount == CL_MEM_REFERENCE_COUNT);
static_assert(ours::kMemContext == CL_MEM_CONTEXT);
static_assert(ours::kMemObjectBuffer == CL_MEM_OBJECT_BUFFER);
static_assert(ours::kEventContext == CL_EVENT_CONTEXT);

}  // namespace

int main() {
  int n = 0;
#define DLB_COUNT(name, fn_type) ++n;
  DLB_OPENCL_FUNCTIONS(DLB_COUNT)
#undef DLB_COUNT
  std::printf("%d OpenCL declarations and 24 constants match CL/cl.h (CL_TARGET_OPENCL_VERSION %d)\n", n,
              CL_TARGET_OPENCL_VERSION);
  return 0;
}

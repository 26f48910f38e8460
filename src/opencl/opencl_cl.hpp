// The few OpenCL declarations the OpenCL backend needs, written out so that
// building it needs no OpenCL header or library. Values and signatures are
// those of the Khronos CL/cl.h (OpenCL 1.2 to 3.0) and cl_ext.h;
// tests/opencl/cl_decls.cpp checks them against the installed headers.
#ifndef DLBRIDGE_SRC_OPENCL_OPENCL_CL_HPP_
#define DLBRIDGE_SRC_OPENCL_OPENCL_CL_HPP_

#include <cstddef>
#include <cstdint>

namespace dlb::cl {

using cl_int = std::int32_t;
using cl_uint = std::uint32_t;
using cl_ulong = std::uint64_t;
using cl_bool = cl_uint;
using cl_bitfield = cl_ulong;
using cl_mem_flags = cl_bitfield;
using cl_device_type = cl_bitfield;
using cl_command_queue_properties = cl_bitfield;
using cl_platform_info = cl_uint;
using cl_device_info = cl_uint;
using cl_context_info = cl_uint;
using cl_command_queue_info = cl_uint;
using cl_mem_info = cl_uint;
using cl_event_info = cl_uint;
using cl_mem_object_type = cl_uint;
using cl_context_properties = std::intptr_t;

using cl_platform_id = struct _cl_platform_id*;
using cl_device_id = struct _cl_device_id*;
using cl_context = struct _cl_context*;
using cl_command_queue = struct _cl_command_queue*;
using cl_mem = struct _cl_mem*;
using cl_event = struct _cl_event*;

constexpr cl_int kSuccess = 0;                          // CL_SUCCESS
constexpr cl_int kDeviceNotFound = -1;                  // CL_DEVICE_NOT_FOUND
constexpr cl_int kMemObjectAllocationFailure = -4;      // CL_MEM_OBJECT_ALLOCATION_FAILURE
constexpr cl_int kOutOfResources = -5;                  // CL_OUT_OF_RESOURCES
constexpr cl_int kOutOfHostMemory = -6;                 // CL_OUT_OF_HOST_MEMORY
constexpr cl_int kInvalidBufferSize = -61;              // CL_INVALID_BUFFER_SIZE
constexpr cl_int kPlatformNotFoundKhr = -1001;          // CL_PLATFORM_NOT_FOUND_KHR
constexpr cl_bool kFalse = 0;                           // CL_FALSE
constexpr cl_bool kTrue = 1;                            // CL_TRUE
constexpr cl_device_type kDeviceTypeAll = 0xFFFFFFFF;   // CL_DEVICE_TYPE_ALL
constexpr cl_mem_flags kMemReadWrite = 1 << 0;          // CL_MEM_READ_WRITE
constexpr cl_platform_info kPlatformName = 0x0902;      // CL_PLATFORM_NAME
constexpr cl_device_info kDeviceName = 0x102B;          // CL_DEVICE_NAME
constexpr cl_context_info kContextDevices = 0x1081;     // CL_CONTEXT_DEVICES
constexpr cl_context_info kContextNumDevices = 0x1083;  // CL_CONTEXT_NUM_DEVICES
constexpr cl_context_properties kContextPlatform = 0x1084;  // CL_CONTEXT_PLATFORM
constexpr cl_command_queue_info kQueueContext = 0x1090;     // CL_QUEUE_CONTEXT
constexpr cl_command_queue_info kQueueDevice = 0x1091;      // CL_QUEUE_DEVICE
constexpr cl_mem_info kMemType = 0x1100;                    // CL_MEM_TYPE
constexpr cl_mem_info kMemSize = 0x1102;                    // CL_MEM_SIZE
constexpr cl_mem_info kMemReferenceCount = 0x1105;          // CL_MEM_REFERENCE_COUNT
constexpr cl_mem_info kMemContext = 0x1106;                 // CL_MEM_CONTEXT
constexpr cl_mem_object_type kMemObjectBuffer = 0x10F0;     // CL_MEM_OBJECT_BUFFER
constexpr cl_event_info kEventContext = 0x11D4;             // CL_EVENT_CONTEXT

// The entry points, by the names the backend resolves in the ICD loader.
#define DLB_OPENCL_FUNCTIONS(X)                                                                                       \
  X(clGetPlatformIDs, cl_int (*)(cl_uint, cl_platform_id*, cl_uint*))                                                 \
  X(clGetPlatformInfo, cl_int (*)(cl_platform_id, cl_platform_info, std::size_t, void*, std::size_t*))                \
  X(clGetDeviceIDs, cl_int (*)(cl_platform_id, cl_device_type, cl_uint, cl_device_id*, cl_uint*))                     \
  X(clGetDeviceInfo, cl_int (*)(cl_device_id, cl_device_info, std::size_t, void*, std::size_t*))                      \
  X(clCreateContext, cl_context (*)(const cl_context_properties*, cl_uint, const cl_device_id*,                       \
                                    void (*)(const char*, const void*, std::size_t, void*), void*, cl_int*))         \
  X(clRetainContext, cl_int (*)(cl_context))                                                                          \
  X(clReleaseContext, cl_int (*)(cl_context))                                                                         \
  X(clGetContextInfo, cl_int (*)(cl_context, cl_context_info, std::size_t, void*, std::size_t*))                      \
  X(clCreateCommandQueue, cl_command_queue (*)(cl_context, cl_device_id, cl_command_queue_properties, cl_int*))       \
  X(clRetainCommandQueue, cl_int (*)(cl_command_queue))                                                               \
  X(clReleaseCommandQueue, cl_int (*)(cl_command_queue))                                                              \
  X(clGetCommandQueueInfo, cl_int (*)(cl_command_queue, cl_command_queue_info, std::size_t, void*, std::size_t*))     \
  X(clFlush, cl_int (*)(cl_command_queue))                                                                            \
  X(clFinish, cl_int (*)(cl_command_queue))                                                                           \
  X(clCreateBuffer, cl_mem (*)(cl_context, cl_mem_flags, std::size_t, void*, cl_int*))                                \
  X(clRetainMemObject, cl_int (*)(cl_mem))                                                                            \
  X(clReleaseMemObject, cl_int (*)(cl_mem))                                                                           \
  X(clGetMemObjectInfo, cl_int (*)(cl_mem, cl_mem_info, std::size_t, void*, std::size_t*))                            \
  X(clEnqueueReadBuffer, cl_int (*)(cl_command_queue, cl_mem, cl_bool, std::size_t, std::size_t, void*, cl_uint,      \
                                    const cl_event*, cl_event*))                                                      \
  X(clEnqueueReadBufferRect, cl_int (*)(cl_command_queue, cl_mem, cl_bool, const std::size_t*, const std::size_t*,    \
                                        const std::size_t*, std::size_t, std::size_t, std::size_t, std::size_t,       \
                                        void*, cl_uint, const cl_event*, cl_event*))                                  \
  X(clEnqueueWriteBuffer, cl_int (*)(cl_command_queue, cl_mem, cl_bool, std::size_t, std::size_t, const void*,       \
                                     cl_uint, const cl_event*, cl_event*))                                            \
  X(clEnqueueFillBuffer, cl_int (*)(cl_command_queue, cl_mem, const void*, std::size_t, std::size_t, std::size_t,     \
                                    cl_uint, const cl_event*, cl_event*))                                             \
  X(clEnqueueMarkerWithWaitList, cl_int (*)(cl_command_queue, cl_uint, const cl_event*, cl_event*))                   \
  X(clEnqueueBarrierWithWaitList, cl_int (*)(cl_command_queue, cl_uint, const cl_event*, cl_event*))                  \
  X(clWaitForEvents, cl_int (*)(cl_uint, const cl_event*))                                                            \
  X(clGetEventInfo, cl_int (*)(cl_event, cl_event_info, std::size_t, void*, std::size_t*))                            \
  X(clRetainEvent, cl_int (*)(cl_event))                                                                              \
  X(clReleaseEvent, cl_int (*)(cl_event))

}  // namespace dlb::cl

#endif

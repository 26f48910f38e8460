// The OpenCL tests' fixture. The tests run on a real OpenCL driver (PoCL's
// CPU device in CI) and use the OpenCL API themselves, through the system's
// ICD loader and headers, as the independent side: they make contexts,
// queues, buffers and events, write values with clEnqueueWriteBuffer and
// read the truth back with clEnqueueReadBuffer, and count references with
// CL_MEM_REFERENCE_COUNT. The library under test loads the same loader
// itself with dlopen. The program is linked with the library's objects, to
// reach the backend's internal counters and its loader hook.
//
// Test groups: Opencl* need a device; NoLoader and NoPlatform run in
// processes whose loader is missing (the hook) or lists no platform
// (OCL_ICD_VENDORS names an empty place); Disabled runs in builds with
// -Dopencl=disabled.
#ifndef DLBRIDGE_TESTS_OPENCL_OPENCL_FIXTURE_HPP_
#define DLBRIDGE_TESTS_OPENCL_OPENCL_FIXTURE_HPP_

#define CL_TARGET_OPENCL_VERSION 120
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>

#include <cstring>
#include <string>
#include <vector>

#include "support.hpp"

namespace ocltest {

using namespace dlbtest;

// The test's own OpenCL objects: device 0 of the library's numbering (the
// first platform's first device), a context and an in-order queue of it,
// and a second context on the same device.
struct Cl {
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;
  cl_context other_context = nullptr;
  cl_command_queue other_queue = nullptr;
  bool ok = false;
  std::string why;
};
Cl& cl();

#define CL_OK(call) ASSERT_EQ((call), CL_SUCCESS) << #call

// A buffer of `bytes` bytes in `context`, holding `init` (if not NULL).
cl_mem make_mem(cl_context context, std::size_t bytes, const void* init = nullptr);

// The cl_mem's reference count.
cl_uint refcount(cl_mem mem);

// The cl_mem's whole contents, read on the test's own queue of its context.
std::vector<unsigned char> read_all(cl_mem mem, cl_command_queue queue);

// The elements a strided view of `dtype` at byte `offset` of `memory`
// reaches, compact row-major: the oracle of every host copy.
std::vector<unsigned char> gather(const std::vector<unsigned char>& memory, std::size_t elem,
                                  const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& strides,
                                  std::int64_t offset);

// doubles 0, 1, 2, ... as bytes.
std::vector<unsigned char> iota_doubles(std::size_t count, double start = 0.0);

// A managed tensor of "another library" over a cl_mem (which it retains
// while it lives), with a deleter that counts its calls.
struct ClProducer {
  cl_mem mem = nullptr;
  std::vector<std::int64_t> shape, strides;
  int deleter_calls = 0;
  DLManagedTensorVersioned versioned{};
  DLManagedTensor legacy{};

  ClProducer(cl_mem mem_, std::vector<std::int64_t> shape_, std::vector<std::int64_t> strides_,
             std::uint64_t byte_offset, std::int32_t device_id = 0);
  ~ClProducer();
  ClProducer(const ClProducer&) = delete;
  ClProducer& operator=(const ClProducer&) = delete;
};

// Every OpenCL test: a device is required (a failure, not a skip, when the
// driver is missing), and the DlbTest checks apply.
class OpenclTest : public DlbTest {
 protected:
  void SetUp() override;
};

}  // namespace ocltest

#endif

#include "opencl_fixture.hpp"

namespace ocltest {

Cl& cl() {
  static Cl c = [] {
    Cl r;
    cl_uint n = 0;
    cl_platform_id platforms[8];
    if (clGetPlatformIDs(8, platforms, &n) != CL_SUCCESS || n == 0) {
      r.why = "no OpenCL platform (install pocl-opencl-icd: scripts/install-deps)";
      return r;
    }
    // Device 0 of the library's numbering: the first platform with a device.
    for (cl_uint p = 0; p < n && r.device == nullptr; ++p) {
      cl_uint count = 0;
      if (clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 1, &r.device, &count) != CL_SUCCESS || count == 0)
        r.device = nullptr;
      else
        r.platform = platforms[p];
    }
    if (r.device == nullptr) {
      r.why = "no OpenCL device";
      return r;
    }
    cl_int rc = CL_SUCCESS;
    r.context = clCreateContext(nullptr, 1, &r.device, nullptr, nullptr, &rc);
    if (rc == CL_SUCCESS) r.queue = clCreateCommandQueue(r.context, r.device, 0, &rc);
    if (rc == CL_SUCCESS) r.other_context = clCreateContext(nullptr, 1, &r.device, nullptr, nullptr, &rc);
    if (rc == CL_SUCCESS) r.other_queue = clCreateCommandQueue(r.other_context, r.device, 0, &rc);
    if (rc != CL_SUCCESS) {
      r.why = "creating the test's contexts failed with " + std::to_string(rc);
      return r;
    }
    r.ok = true;
    return r;
  }();
  return c;
}

cl_mem make_mem(cl_context context, std::size_t bytes, const void* init) {
  cl_int rc = CL_SUCCESS;
  cl_mem m = clCreateBuffer(context, CL_MEM_READ_WRITE | (init != nullptr ? CL_MEM_COPY_HOST_PTR : 0), bytes,
                            const_cast<void*>(init), &rc);
  EXPECT_EQ(rc, CL_SUCCESS);
  return m;
}

cl_uint refcount(cl_mem mem) {
  cl_uint n = 0;
  EXPECT_EQ(clGetMemObjectInfo(mem, CL_MEM_REFERENCE_COUNT, sizeof n, &n, nullptr), CL_SUCCESS);
  return n;
}

std::vector<unsigned char> read_all(cl_mem mem, cl_command_queue queue) {
  std::size_t size = 0;
  EXPECT_EQ(clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof size, &size, nullptr), CL_SUCCESS);
  std::vector<unsigned char> out(size);
  EXPECT_EQ(clEnqueueReadBuffer(queue, mem, CL_TRUE, 0, size, out.data(), 0, nullptr, nullptr), CL_SUCCESS);
  return out;
}

std::vector<unsigned char> gather(const std::vector<unsigned char>& memory, std::size_t elem,
                                  const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& strides,
                                  std::int64_t offset) {
  std::size_t count = 1;
  for (std::int64_t e : shape) count *= static_cast<std::size_t>(e);
  std::vector<unsigned char> out(count * elem);
  std::vector<std::int64_t> index(shape.size(), 0);
  for (std::size_t i = 0; i < count; ++i) {
    std::int64_t at = offset;
    for (std::size_t d = 0; d < shape.size(); ++d) at += index[d] * strides[d] * static_cast<std::int64_t>(elem);
    std::memcpy(out.data() + i * elem, memory.data() + at, elem);
    for (std::size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

std::vector<unsigned char> iota_doubles(std::size_t count, double start) {
  std::vector<unsigned char> out(count * sizeof(double));
  for (std::size_t i = 0; i < count; ++i) {
    const double v = start + static_cast<double>(i);
    std::memcpy(out.data() + i * sizeof v, &v, sizeof v);
  }
  return out;
}

namespace {

void producer_deleter_versioned(DLManagedTensorVersioned* m) {
  auto* p = static_cast<ClProducer*>(m->manager_ctx);
  ++p->deleter_calls;
}

void producer_deleter_legacy(DLManagedTensor* m) {
  auto* p = static_cast<ClProducer*>(m->manager_ctx);
  ++p->deleter_calls;
}

}  // namespace

ClProducer::ClProducer(cl_mem mem_, std::vector<std::int64_t> shape_, std::vector<std::int64_t> strides_,
                       std::uint64_t byte_offset, std::int32_t device_id)
    : mem(mem_), shape(std::move(shape_)), strides(std::move(strides_)) {
  clRetainMemObject(mem);
  DLTensor t{};
  t.data = mem;
  t.device = DLDevice{kDLOpenCL, device_id};
  t.ndim = static_cast<std::int32_t>(shape.size());
  t.dtype = f64();
  t.shape = shape.data();
  t.strides = strides.empty() ? nullptr : strides.data();
  t.byte_offset = byte_offset;
  versioned.version = DLPackVersion{1, 1};
  versioned.manager_ctx = this;
  versioned.deleter = producer_deleter_versioned;
  versioned.dl_tensor = t;
  legacy.dl_tensor = t;
  legacy.manager_ctx = this;
  legacy.deleter = producer_deleter_legacy;
}

ClProducer::~ClProducer() {
  if (mem != nullptr) clReleaseMemObject(mem);
}

void OpenclTest::SetUp() {
  DlbTest::SetUp();
  ASSERT_TRUE(cl().ok) << cl().why;
}

}  // namespace ocltest

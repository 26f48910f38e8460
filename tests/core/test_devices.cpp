// The device table, compact strides, the stream rules of the export planner
// and dlb_buffer_resolve: the facts and decisions bindings ask the core for.
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "support.hpp"

using namespace dlbtest;

namespace {

class Devices : public DlbTest {};

dlb_buffer* wrap_on(DLDeviceType type, std::vector<float>& data, int64_t* shape) {
  DLTensor view{data.data(), DLDevice{type, 0}, 1, f32(), shape, nullptr, 0};
  dlb_buffer* b = nullptr;
  EXPECT_EQ(dlb_buffer_wrap(&view, 0, nullptr, nullptr, &b), DLB_OK);
  return b;
}

}  // namespace

TEST_F(Devices, TheTableMatchesDLPackForEveryCode) {
  // Written from the DLPack header (1.3 and main), not from the library.
  struct Expect {
    int32_t type;
    const char* name;
    uint32_t flags;
  };
  const uint32_t K = DLB_DEVICE_KNOWN, H = DLB_DEVICE_HOST_READABLE, A = DLB_DEVICE_ADDRESS,
                 S = DLB_DEVICE_HAS_STREAMS, C = DLB_DEVICE_CUDA_BACKEND;
  const Expect known[] = {
      {1, "cpu", K | H | A},        {2, "cuda", K | A | S | C},      {3, "cuda_host", K | H | A | S | C},
      {4, "opencl", K},             {7, "vulkan", K},                {8, "metal", K},
      {9, "vpi", K | A},            {10, "rocm", K | A | S},         {11, "rocm_host", K | H | A | S},
      {12, "ext_dev", K | A},       {13, "cuda_managed", K | H | A | S | C}, {14, "oneapi", K | A},
      {15, "webgpu", K},            {16, "hexagon", K | A},          {17, "maia", K | A},
      {18, "trn", K | A},           {19, "tpu", K | A},              {20, "tpu_host", K | A},
  };
  for (int32_t code = -3; code < 256; ++code) {
    const Expect* e = nullptr;
    for (const Expect& k : known)
      if (k.type == code) e = &k;
    dlb_device_info info;
    std::memset(&info, 0xAB, sizeof info);
    info.struct_size = sizeof info;
    const dlb_status s = dlb_device_type_info(code, &info);
    if (e == nullptr) {
      EXPECT_EQ(s, DLB_ERR_UNSUPPORTED_DEVICE) << code;
      EXPECT_TRUE(MessageContains(std::to_string(code).c_str())) << code;
      EXPECT_EQ(info.device_type, static_cast<int32_t>(0xABABABAB)) << "out touched for " << code;
      continue;
    }
    ASSERT_EQ(s, DLB_OK) << code;
    EXPECT_EQ(info.device_type, code);
    EXPECT_EQ(info.flags, e->flags) << code;
    EXPECT_STREQ(info.name, e->name);
  }
}

TEST_F(Devices, InfoRejectsBadOutArguments) {
  EXPECT_EQ(dlb_device_type_info(1, nullptr), DLB_ERR_INVALID_ARGUMENT);
  dlb_device_info info{};
  info.struct_size = 4;
  EXPECT_EQ(dlb_device_type_info(1, &info), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("struct_size"));
  EXPECT_EQ(info.name, nullptr);
}

TEST_F(Devices, ManagedMemoryIsHostReadableEverywhere) {
  std::vector<float> data = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  // The free copy function and the buffer copy agree on it.
  DLTensor view{data.data(), DLDevice{kDLCUDAManaged, 0}, 1, f32(), shape, nullptr, 0};
  float out[4] = {};
  ASSERT_EQ(dlb_copy_to_contiguous(&view, out, sizeof out), DLB_OK);
  EXPECT_EQ(out[3], 4.0f);
  dlb_buffer* b = wrap_on(kDLCUDAManaged, data, shape);
  dlb_buffer* host = nullptr;
  ASSERT_EQ(dlb_buffer_to_host(b, &host), DLB_OK);
  DLTensor t;
  ASSERT_EQ(dlb_buffer_dltensor(host, &t), DLB_OK);
  EXPECT_EQ(t.device.device_type, kDLCPU);
  EXPECT_NE(t.data, data.data());
  EXPECT_EQ(static_cast<float*>(t.data)[2], 3.0f);
  dlb_buffer_release(host);
  // An export to the CPU: zero-copy by default, a copy when asked for.
  dlb_export_options o = opts(DLB_COPY_IF_NEEDED);
  o.has_target_device = 1;
  o.target_device = cpu();
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, &o, &m), DLB_OK);
  EXPECT_EQ(m->dl_tensor.device.device_type, kDLCPU);
  EXPECT_EQ(m->dl_tensor.data, data.data());
  m->deleter(m);
  o.copy = DLB_COPY_ALWAYS;
  ASSERT_EQ(dlb_export_versioned(b, &o, &m), DLB_OK);
  EXPECT_NE(m->dl_tensor.data, data.data());
  EXPECT_EQ(static_cast<float*>(m->dl_tensor.data)[1], 2.0f);
  EXPECT_EQ(m->flags, DLPACK_FLAG_BITMASK_IS_COPIED);
  m->deleter(m);
  dlb_buffer_release(b);
}

TEST_F(Devices, CompactStrides) {
  const int64_t shape[4] = {2, 3, 1, 5};
  int64_t strides[4] = {-1, -1, -1, -1};
  ASSERT_EQ(dlb_compact_strides(4, shape, strides), DLB_OK);
  EXPECT_EQ(strides[0], 15);
  EXPECT_EQ(strides[1], 5);
  EXPECT_EQ(strides[2], 5);
  EXPECT_EQ(strides[3], 1);
  EXPECT_EQ(dlb_compact_strides(0, nullptr, nullptr), DLB_OK);
  // An empty tensor with huge extents saturates.
  const int64_t empty[3] = {0, INT64_MAX, 4};
  ASSERT_EQ(dlb_compact_strides(3, empty, strides), DLB_OK);
  EXPECT_EQ(strides[0], INT64_MAX);
  EXPECT_EQ(strides[1], 4);
  EXPECT_EQ(strides[2], 1);
  // Bad arguments leave strides_out untouched.
  int64_t keep[3] = {7, 7, 7};
  const int64_t huge[3] = {2, INT64_MAX / 2, 3};
  EXPECT_EQ(dlb_compact_strides(3, huge, keep), DLB_ERR_OVERFLOW);
  EXPECT_EQ(keep[0], 7);
  const int64_t negative[2] = {2, -3};
  EXPECT_EQ(dlb_compact_strides(2, negative, keep), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("shape[1] is -3"));
  EXPECT_EQ(dlb_compact_strides(-1, shape, keep), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_compact_strides(DLB_MAX_NDIM + 1, shape, keep), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_compact_strides(2, nullptr, keep), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_compact_strides(2, shape, nullptr), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(keep[1], 7);
}

TEST_F(Devices, CompactStridesMatchWhatBuffersGetWithoutStrides) {
  const int64_t shape[3] = {4, 1, 6};
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_alloc(cpu(), f32(), 3, shape, &b), DLB_OK);
  DLTensor t;
  ASSERT_EQ(dlb_buffer_dltensor(b, &t), DLB_OK);
  int64_t strides[3];
  ASSERT_EQ(dlb_compact_strides(3, shape, strides), DLB_OK);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(strides[i], t.strides[i]) << i;
  dlb_buffer_release(b);
}

TEST_F(Devices, StreamRules) {
  std::vector<float> data(4);
  int64_t shape[1] = {4};
  dlb_buffer* host = wrap_on(kDLCPU, data, shape);
  dlb_buffer* cuda = wrap_on(kDLCUDA, data, shape);
  dlb_buffer* rocm = wrap_on(kDLROCM, data, shape);
  DLManagedTensorVersioned* m = nullptr;
  dlb_export_options o = opts(DLB_COPY_IF_NEEDED);
  // Stream 0 without the flag is "no stream".
  ASSERT_EQ(dlb_export_versioned(host, &o, &m), DLB_OK);
  m->deleter(m);
  ASSERT_EQ(dlb_export_versioned(cuda, &o, &m), DLB_OK);
  m->deleter(m);
  // A literal 0: refused for host memory and for CUDA/ROCm.
  o.flags = DLB_EXPORT_STREAM_GIVEN;
  m = nullptr;
  EXPECT_EQ(dlb_export_versioned(host, &o, &m), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("host memory"));
  EXPECT_EQ(dlb_export_versioned(cuda, &o, &m), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("stream 0 is not allowed for cuda"));
  EXPECT_EQ(dlb_export_versioned(rocm, &o, &m), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_export_legacy(rocm, &o, nullptr), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(m, nullptr);
  // 1, 2, -1 and a handle are accepted on devices with streams, refused
  // for host memory with or without the flag.
  for (int64_t stream : {int64_t{1}, int64_t{2}, int64_t{-1}, int64_t{0x7f001234}}) {
    for (uint64_t flags : {uint64_t{0}, uint64_t{DLB_EXPORT_STREAM_GIVEN}}) {
      o.flags = flags;
      o.stream = stream;
      ASSERT_EQ(dlb_export_versioned(cuda, &o, &m), DLB_OK) << stream;
      m->deleter(m);
      m = nullptr;
      EXPECT_EQ(dlb_export_versioned(host, &o, &m), DLB_ERR_INVALID_ARGUMENT) << stream;
    }
  }
  o.stream = -2;
  EXPECT_EQ(dlb_export_versioned(cuda, &o, &m), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("stream -2"));
  EXPECT_EQ(m, nullptr);
  dlb_buffer_release(host);
  dlb_buffer_release(cuda);
  dlb_buffer_release(rocm);
}

TEST_F(Devices, ResolveReturnsTheBufferItselfWhenItSatisfiesTheRequest) {
  std::vector<float> data = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  dlb_buffer* b = wrap_on(kDLCUDAHost, data, shape);
  dlb_buffer* r = nullptr;
  ASSERT_EQ(dlb_buffer_resolve(b, nullptr, &r), DLB_OK);
  EXPECT_EQ(r, b);
  EXPECT_EQ(dlb_buffer_refcount(b), 2);
  dlb_buffer_release(r);
  dlb_export_options o = opts(DLB_COPY_NEVER);
  o.has_target_device = 1;
  o.target_device = DLDevice{kDLCUDAHost, 0};
  ASSERT_EQ(dlb_buffer_resolve(b, &o, &r), DLB_OK);
  EXPECT_EQ(r, b);
  dlb_buffer_release(r);
  EXPECT_EQ(dlb_buffer_refcount(b), 1);
  dlb_buffer* host = wrap_on(kDLCPU, data, shape);
  o.target_device = cpu();
  ASSERT_EQ(dlb_buffer_resolve(host, &o, &r), DLB_OK);
  EXPECT_EQ(r, host);
  dlb_buffer_release(r);
  dlb_buffer_release(host);
  dlb_buffer_release(b);
}

TEST_F(Devices, ResolveRelabelsHostReadableMemoryForTheCpu) {
  // Pinned memory asked for on the CPU: the same memory, strides and offset
  // on {kDLCPU, 0}, no copy, holding the source until the view goes.
  std::vector<float> data = {1, 2, 3, 4, 5, 6, 7};
  int64_t shape[2] = {2, 3};
  int64_t strides[2] = {1, 2};
  DLTensor view{data.data(), DLDevice{kDLCUDAHost, 0}, 2, f32(), shape, strides, 4};
  ReleaseCounter rc;
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&view, DLB_BUFFER_READ_ONLY, ReleaseCounter::release, &rc, &b), DLB_OK);
  const int64_t live = dlb_live_exports();
  for (dlb_copy_policy policy : {DLB_COPY_IF_NEEDED, DLB_COPY_NEVER}) {
    dlb_export_options o = opts(policy);
    o.has_target_device = 1;
    o.target_device = cpu();
    dlb_buffer* r = nullptr;
    ASSERT_EQ(dlb_buffer_resolve(b, &o, &r), DLB_OK) << last_message();
    ASSERT_NE(r, b);
    EXPECT_EQ(dlb_buffer_refcount(b), 2);
    EXPECT_EQ(dlb_buffer_flags(r), DLB_BUFFER_READ_ONLY);  // not a copy, read-only as the export would be
    EXPECT_EQ(dlb_live_exports(), live);                   // nothing exported on the way
    DLTensor t;
    ASSERT_EQ(dlb_buffer_dltensor(r, &t), DLB_OK);
    EXPECT_EQ(t.device.device_type, kDLCPU);
    EXPECT_EQ(t.device.device_id, 0);
    EXPECT_EQ(t.data, data.data());
    EXPECT_EQ(t.byte_offset, 4u);
    EXPECT_EQ(t.strides[0], 1);
    EXPECT_EQ(t.strides[1], 2);
    dlb_buffer* h = nullptr;
    ASSERT_EQ(dlb_buffer_to_host(r, &h), DLB_OK);
    DLTensor ht;
    ASSERT_EQ(dlb_buffer_dltensor(h, &ht), DLB_OK);
    const float want[6] = {2, 4, 6, 3, 5, 7};
    for (int i = 0; i < 6; ++i) EXPECT_EQ(static_cast<float*>(ht.data)[i], want[i]) << i;
    dlb_buffer_release(h);
    // Its own exports are CPU exports: a stream is refused there.
    dlb_export_options so = opts(DLB_COPY_IF_NEEDED);
    so.stream = 1;
    DLManagedTensorVersioned* m = nullptr;
    EXPECT_EQ(dlb_export_versioned(r, &so, &m), DLB_ERR_INVALID_ARGUMENT);
    ASSERT_EQ(dlb_export_versioned(r, nullptr, &m), DLB_OK);
    EXPECT_EQ(m->dl_tensor.device.device_type, kDLCPU);
    EXPECT_EQ(m->dl_tensor.data, reinterpret_cast<unsigned char*>(data.data()) + 4);
    dlb_buffer_release(r);
    EXPECT_EQ(dlb_buffer_refcount(b), 2);  // the export holds the view, the view holds b
    m->deleter(m);
    EXPECT_EQ(dlb_buffer_refcount(b), 1);
  }
  dlb_buffer_release(b);
  EXPECT_EQ(rc.calls.load(), 1);
}

TEST_F(Devices, ConsumerStreamRule) {
  // The type as an int: a DLDeviceType lvalue holding a value outside the
  // enum's range is undefined to load (UBSan says so); a converted value
  // passed on is what a C caller hands over.
  struct Case {
    int32_t type;
    int64_t stream;
    dlb_status want;
  };
  const Case cases[] = {
      {kDLCUDA, 1, DLB_OK},           {kDLCUDA, 2, DLB_OK},
      {kDLCUDA, -1, DLB_OK},          {kDLCUDA, 0x7f001234, DLB_OK},
      {kDLROCM, 1, DLB_OK},           {kDLCUDAManaged, 2, DLB_OK},
      {kDLCUDAHost, -1, DLB_OK},      {kDLROCMHost, 3, DLB_OK},
      {kDLCUDA, 0, DLB_ERR_INVALID_ARGUMENT},
      {kDLCUDA, -2, DLB_ERR_INVALID_ARGUMENT},
      {kDLROCM, std::numeric_limits<int64_t>::min(), DLB_ERR_INVALID_ARGUMENT},
      {kDLCPU, 1, DLB_ERR_INVALID_ARGUMENT},
      {kDLCPU, -1, DLB_ERR_INVALID_ARGUMENT},
      {kDLCPU, 0, DLB_ERR_INVALID_ARGUMENT},
      {kDLOpenCL, 1, DLB_ERR_INVALID_ARGUMENT},
      {kDLVulkan, 2, DLB_ERR_INVALID_ARGUMENT},
      {5, 1, DLB_ERR_UNSUPPORTED_DEVICE},
      {999, 1, DLB_ERR_UNSUPPORTED_DEVICE},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.type) + " stream " + std::to_string(c.stream));
    EXPECT_EQ(dlb_check_consumer_stream(DLDevice{static_cast<DLDeviceType>(c.type), 3}, c.stream), c.want);
  }
  EXPECT_EQ(dlb_check_consumer_stream(cpu(), 7), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("stream 7 was given for cpu:0 memory, which has no streams"));
  EXPECT_EQ(dlb_check_consumer_stream(DLDevice{kDLCUDA, 1}, 0), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("stream 0 is not allowed for cuda memory"));
  EXPECT_TRUE(MessageContains("0 is ambiguous"));
  EXPECT_EQ(dlb_check_consumer_stream(DLDevice{static_cast<DLDeviceType>(999), 0}, 1), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("999"));
  // The export planner decides by the same rule: wrapped memory (no
  // storage of its own to wait) with the stream given explicitly.
  std::vector<float> data(4);
  int64_t shape[1] = {4};
  for (const Case& c : cases) {
    if (c.want == DLB_ERR_UNSUPPORTED_DEVICE) continue;
    SCOPED_TRACE(std::to_string(c.type) + " stream " + std::to_string(c.stream));
    dlb_buffer* b = wrap_on(static_cast<DLDeviceType>(c.type), data, shape);
    dlb_export_options o = opts(DLB_COPY_IF_NEEDED);
    o.stream = c.stream;
    o.flags = DLB_EXPORT_STREAM_GIVEN;
    DLManagedTensorVersioned* m = nullptr;
    EXPECT_EQ(dlb_export_versioned(b, &o, &m), c.want);
    if (m != nullptr) m->deleter(m);
    dlb_buffer_release(b);
  }
}

TEST_F(Devices, ImportRoutingFallsBackToPlainMemoryWhenTheCudaBackendRefuses) {
  // Host memory that says it is CUDA memory: the CUDA backend refuses it
  // (no driver here, or a driver that does not know the pointer), so the
  // routed import takes it as any other memory, and the tensor is the
  // buffer's.
  for (DLDeviceType type : {kDLCUDA, kDLCUDAHost, kDLCUDAManaged}) {
    SCOPED_TRACE(type);
    ForeignTensor f(f32(), {2, 3}, {}, 24);
    f.tensor().device = DLDevice{type, 0};
    dlb_import_options io;
    dlb_import_options_init(&io);
    io.flags = DLB_IMPORT_CUDA_BACKEND;
    dlb_buffer* b = nullptr;
    ASSERT_EQ(dlb_import_versioned_on_stream(f.as_versioned(), &io, 7, &b), DLB_OK) << last_message();
    EXPECT_EQ(dlb_buffer_flags(b), DLB_BUFFER_IMPORTED);
    int64_t stream = 0;
    EXPECT_NE(dlb_cuda_buffer_stream(b, &stream), DLB_OK);  // not a CUDA buffer
    dlb_buffer_release(b);
    EXPECT_EQ(f.deleter_calls.load(), 1);
  }
}

TEST_F(Devices, ImportOnStreamChecksTheOptionsFirst) {
  ForeignTensor f(f32(), {2, 3}, {1, 2}, 24);  // transposed
  f.tensor().device = DLDevice{kDLCUDA, 0};
  dlb_import_options io;
  dlb_import_options_init(&io);
  io.flags = DLB_IMPORT_CUDA_BACKEND;
  io.require_contiguous = 1;
  dlb_buffer* sentinel = reinterpret_cast<dlb_buffer*>(0x1);
  dlb_buffer* b = sentinel;
  EXPECT_EQ(dlb_import_versioned_on_stream(f.as_versioned(), &io, 1, &b), DLB_ERR_UNSUPPORTED_LAYOUT);
  io.require_contiguous = 0;
  io.flags = UINT64_C(1) << 40;
  EXPECT_EQ(dlb_import_versioned_on_stream(f.as_versioned(), &io, 1, &b), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("unknown bits"));
  EXPECT_EQ(dlb_import_versioned_on_stream(nullptr, nullptr, 1, &b), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_import_versioned_on_stream(f.as_versioned(), nullptr, 1, nullptr), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_import_legacy_on_stream(nullptr, nullptr, 1, &b), DLB_ERR_INVALID_ARGUMENT);
  f.as_versioned()->version.major = 2;
  EXPECT_EQ(dlb_import_versioned_on_stream(f.as_versioned(), &io, 1, &b), DLB_ERR_VERSION);
  EXPECT_EQ(b, sentinel);
  EXPECT_EQ(f.deleter_calls.load(), 0);
  // Legacy, with no routing asked: plain memory, the stream unused.
  f.as_versioned()->version.major = 1;
  io.flags = 0;
  ASSERT_EQ(dlb_import_legacy_on_stream(f.as_legacy(), &io, 5, &b), DLB_OK);
  EXPECT_EQ(dlb_buffer_flags(b), DLB_BUFFER_IMPORTED);
  dlb_buffer_release(b);
  EXPECT_EQ(f.deleter_calls.load(), 1);
}

TEST_F(Devices, ResolveCopiesWhenTheRequestNeedsIt) {
  std::vector<float> data = {1, 2, 3, 4, 5, 6};
  int64_t shape[2] = {2, 3};
  int64_t strides[2] = {1, 2};  // a transposed view
  DLTensor view{data.data(), cpu(), 2, f32(), shape, strides, 0};
  ReleaseCounter rc;
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&view, DLB_BUFFER_READ_ONLY, ReleaseCounter::release, &rc, &b), DLB_OK);
  dlb_export_options o = opts(DLB_COPY_ALWAYS);
  dlb_buffer* r = nullptr;
  ASSERT_EQ(dlb_buffer_resolve(b, &o, &r), DLB_OK);
  ASSERT_NE(r, b);
  EXPECT_EQ(dlb_buffer_flags(r), DLB_BUFFER_COPIED);  // a copy is writable
  DLTensor t;
  ASSERT_EQ(dlb_buffer_dltensor(r, &t), DLB_OK);
  EXPECT_EQ(t.strides[0], 3);
  EXPECT_EQ(t.strides[1], 1);
  const float want[6] = {1, 3, 5, 2, 4, 6};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(static_cast<float*>(t.data)[i], want[i]) << i;
  EXPECT_EQ(dlb_buffer_refcount(b), 1);  // the copy holds nothing of b
  dlb_buffer_release(r);
  o.flags = DLB_EXPORT_READ_ONLY;
  ASSERT_EQ(dlb_buffer_resolve(b, &o, &r), DLB_OK);
  EXPECT_EQ(dlb_buffer_flags(r), DLB_BUFFER_COPIED | DLB_BUFFER_READ_ONLY);
  dlb_buffer_release(r);
  dlb_buffer_release(b);
  EXPECT_EQ(rc.calls.load(), 1);
}

TEST_F(Devices, ResolveFailsAsTheExportWouldAndLeavesOutUntouched) {
  std::vector<float> data(4);
  int64_t shape[1] = {4};
  dlb_buffer* cuda = wrap_on(kDLCUDA, data, shape);
  dlb_buffer* sentinel = reinterpret_cast<dlb_buffer*>(0x1);
  dlb_buffer* r = sentinel;
  dlb_export_options o = opts(DLB_COPY_IF_NEEDED);
  o.has_target_device = 1;
  o.target_device = cpu();
  DLManagedTensorVersioned* m = nullptr;
  const dlb_status want = dlb_export_versioned(cuda, &o, &m);
  EXPECT_EQ(want, DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_EQ(dlb_buffer_resolve(cuda, &o, &r), want);
  o.copy = DLB_COPY_NEVER;
  EXPECT_EQ(dlb_buffer_resolve(cuda, &o, &r), DLB_ERR_NOT_ZERO_COPY);
  o.has_target_device = 0;
  o.flags = DLB_EXPORT_STREAM_GIVEN;
  EXPECT_EQ(dlb_buffer_resolve(cuda, &o, &r), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(r, sentinel);
  EXPECT_EQ(dlb_buffer_resolve(nullptr, nullptr, &r), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_buffer_resolve(cuda, nullptr, nullptr), DLB_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(dlb_buffer_delete(cuda), DLB_OK);
  EXPECT_EQ(dlb_buffer_resolve(cuda, nullptr, &r), DLB_ERR_DELETED);
  EXPECT_EQ(r, sentinel);
  EXPECT_EQ(dlb_buffer_refcount(cuda), 1);
  dlb_buffer_release(cuda);
}

TEST_F(Devices, LayoutDescribeGivesTheArithmetic) {
  dlb_layout_info info;
  std::memset(&info, 0xAB, sizeof info);
  info.struct_size = sizeof info;
  int64_t shape[2] = {3, 4};
  int64_t strides[2] = {-4, 2};  // rows reversed, every other column
  DLTensor t{nullptr, cpu(), 2, f32(), shape, strides, 0};
  ASSERT_EQ(dlb_layout_describe(&t, &info), DLB_OK) << last_message();
  EXPECT_EQ(info.numel, 12u);
  EXPECT_EQ(info.nbytes, 48u);
  EXPECT_EQ(info.element_bits, 32u);
  EXPECT_EQ(info.contiguous, 0);
  EXPECT_EQ(info.min_offset, -8);  // row 2: 2 * -4
  EXPECT_EQ(info.max_offset, 6);   // column 3: 3 * 2
  t.strides = nullptr;
  DLDataType f4{17, 4, 1};
  t.dtype = f4;
  ASSERT_EQ(dlb_layout_describe(&t, &info), DLB_OK);
  EXPECT_EQ(info.nbytes, 6u);  // 48 bits
  EXPECT_EQ(info.element_bits, 4u);
  EXPECT_EQ(info.contiguous, 1);
  EXPECT_EQ(info.min_offset, 0);
  EXPECT_EQ(info.max_offset, 11);
  shape[0] = 0;
  ASSERT_EQ(dlb_layout_describe(&t, &info), DLB_OK);
  EXPECT_EQ(info.numel, 0u);
  EXPECT_EQ(info.max_offset, 0);
  // Refusals leave out as it was.
  shape[0] = -1;
  info.numel = 77;
  EXPECT_EQ(dlb_layout_describe(&t, &info), DLB_ERR_MALFORMED);
  EXPECT_EQ(info.numel, 77u);
  shape[0] = 3;
  t.dtype = DLDataType{kDLFloat, 12, 1};
  EXPECT_EQ(dlb_layout_describe(&t, &info), DLB_ERR_UNSUPPORTED_DTYPE);
  t.dtype = f32();
  int64_t huge[2] = {INT64_MAX / 2, 4};
  t.shape = huge;
  EXPECT_EQ(dlb_layout_describe(&t, &info), DLB_ERR_OVERFLOW);
  info.struct_size = 8;
  EXPECT_EQ(dlb_layout_describe(&t, &info), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("struct_size"));
  EXPECT_EQ(dlb_layout_describe(nullptr, &info), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_layout_describe(&t, nullptr), DLB_ERR_INVALID_ARGUMENT);
}

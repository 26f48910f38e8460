// kDLOpenCL tensors from another producer: through the importer's routing
// (DLB_IMPORT_DEVICE_BACKEND, what the Python package does) and the
// backend's own import, from the library's context or another one, with
// the deleter called once and every reference given back.
#include "opencl_fixture.hpp"

namespace ocltest {
namespace {

using OpenclImport = OpenclTest;

dlb_import_options routed() {
  dlb_import_options io;
  dlb_import_options_init(&io);
  io.flags = DLB_IMPORT_DEVICE_BACKEND;
  return io;
}

TEST_F(OpenclImport, RoutedImportOfAForeignContextCopiesToTheHostAndReexportsTheSameHandle) {
  const std::vector<unsigned char> values = iota_doubles(40, -3.0);
  cl_mem mem = make_mem(cl().other_context, values.size(), values.data());
  const cl_uint refs = refcount(mem);
  {
    // A 4 x 5 view with strides (1, 4), a transpose, 10 elements in.
    ClProducer p(mem, {4, 5}, {1, 4}, 10 * sizeof(double));
    dlb_import_options io = routed();
    dlb_buffer* b = nullptr;
    ASSERT_EQ(dlb_import_versioned(&p.versioned, &io, &b), DLB_OK) << dlb_last_error_message();
    EXPECT_NE(dlb_buffer_flags(b) & DLB_BUFFER_BACKEND, 0u);
    // Zero-copy out again: the same cl_mem and offset.
    DLManagedTensorVersioned* t = nullptr;
    ASSERT_EQ(dlb_export_versioned(b, nullptr, &t), DLB_OK);
    EXPECT_EQ(t->dl_tensor.data, mem);
    EXPECT_EQ(t->dl_tensor.byte_offset, 10 * sizeof(double));
    EXPECT_EQ(t->dl_tensor.device.device_type, kDLOpenCL);
    // The host copy: the elements the view reaches.
    dlb_buffer* h = nullptr;
    ASSERT_EQ(dlb_buffer_to_host(b, &h), DLB_OK);
    DLTensor ht;
    ASSERT_EQ(dlb_buffer_dltensor(h, &ht), DLB_OK);
    const std::vector<unsigned char> expect = gather(read_all(mem, cl().other_queue), 8, {4, 5}, {1, 4}, 80);
    EXPECT_EQ(std::memcmp(ht.data, expect.data(), expect.size()), 0);
    dlb_buffer_release(h);
    dlb_buffer_release(b);
    EXPECT_EQ(p.deleter_calls, 0);  // the export still holds it
    t->deleter(t);
    EXPECT_EQ(p.deleter_calls, 1);
  }
  EXPECT_EQ(refcount(mem), refs);
  clReleaseMemObject(mem);
}

TEST_F(OpenclImport, TheBackendsOwnImportTakesLegacyTensorsToo) {
  const std::vector<unsigned char> values = iota_doubles(8, 2.0);
  cl_mem mem = make_mem(cl().context, values.size(), values.data());
  const cl_uint refs = refcount(mem);
  {
    ClProducer p(mem, {8}, {}, 0);
    dlb_backend* be = nullptr;
    ASSERT_EQ(dlb_opencl_backend_from_queue(cl().context, cl().queue, &be), DLB_OK);
    dlb_buffer* b = nullptr;
    ASSERT_EQ(dlb_opencl_import_legacy(be, &p.legacy, 0, &b), DLB_OK) << dlb_last_error_message();
    dlb_backend_release(be);
    dlb_export_options o = opts(DLB_COPY_ALWAYS);
    DLManagedTensor* t = nullptr;
    ASSERT_EQ(dlb_export_legacy(b, &o, &t), DLB_OK);
    EXPECT_EQ(t->dl_tensor.device.device_type, kDLCPU);
    EXPECT_EQ(std::memcmp(t->dl_tensor.data, values.data(), values.size()), 0);
    t->deleter(t);
    dlb_buffer_release(b);
    EXPECT_EQ(p.deleter_calls, 1);
  }
  EXPECT_EQ(refcount(mem), refs);
  clReleaseMemObject(mem);
}

TEST_F(OpenclImport, PaddedSubByteElementsAreRefusedByEveryImportAndStayTheProducers) {
  const std::vector<unsigned char> values(8, 1);
  cl_mem mem = make_mem(cl().context, values.size(), values.data());
  const cl_uint refs = refcount(mem);
  {
    ClProducer p(mem, {8}, {}, 0);
    p.versioned.dl_tensor.dtype = DLDataType{kDLInt, 4, 1};  // int4, one element a byte
    p.versioned.flags |= DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
    dlb_backend* be = nullptr;
    ASSERT_EQ(dlb_opencl_backend_from_queue(cl().context, cl().queue, &be), DLB_OK);
    dlb_buffer* b = nullptr;
    EXPECT_EQ(dlb_opencl_import_versioned(be, &p.versioned, 0, &b), DLB_ERR_UNSUPPORTED_DTYPE);
    EXPECT_TRUE(MessageContains("the OpenCL backend takes in packed sub-byte elements only"));
    dlb_backend_release(be);
    dlb_import_options io = routed();
    EXPECT_EQ(dlb_import_versioned(&p.versioned, &io, &b), DLB_ERR_UNSUPPORTED_DTYPE);
    EXPECT_TRUE(MessageContains("import it without DLB_IMPORT_DEVICE_BACKEND"));
    EXPECT_EQ(b, nullptr);
    EXPECT_EQ(p.deleter_calls, 0);  // still the producer's
  }
  EXPECT_EQ(refcount(mem), refs);
  clReleaseMemObject(mem);
}

TEST_F(OpenclImport, WithoutTheFlagATensorComesInPlainAndCannotBeCopied) {
  cl_mem mem = make_mem(cl().context, 64);
  {
    ClProducer p(mem, {8}, {}, 0);
    dlb_buffer* b = nullptr;
    ASSERT_EQ(dlb_import_versioned(&p.versioned, nullptr, &b), DLB_OK);
    EXPECT_EQ(dlb_buffer_flags(b) & DLB_BUFFER_BACKEND, 0u);
    dlb_buffer* h = nullptr;
    EXPECT_EQ(dlb_buffer_to_host(b, &h), DLB_ERR_UNSUPPORTED_DEVICE);
    EXPECT_TRUE(MessageContains("opencl:0 and was imported without a backend"));
    dlb_buffer_release(b);
    EXPECT_EQ(p.deleter_calls, 1);
  }
  clReleaseMemObject(mem);
}

TEST_F(OpenclImport, ADeviceTheContextLacksIsMalformed) {
  int32_t n = 0;
  ASSERT_EQ(dlb_opencl_device_count(&n), DLB_OK);
  cl_mem mem = make_mem(cl().context, 64);
  const cl_uint refs = refcount(mem);
  {
    ClProducer p(mem, {8}, {}, 0, n);  // one past the last device
    dlb_import_options io = routed();
    dlb_buffer* b = nullptr;
    EXPECT_EQ(dlb_import_versioned(&p.versioned, &io, &b), DLB_ERR_MALFORMED);
    EXPECT_EQ(b, nullptr);
    EXPECT_TRUE(MessageContains("the ICD loader lists"));
    EXPECT_EQ(p.deleter_calls, 0);  // the caller still owns it
  }
  EXPECT_EQ(refcount(mem), refs);
  clReleaseMemObject(mem);
}

TEST_F(OpenclImport, AnEmptyTensorWithoutAClMemComesInPlain) {
  int64_t shape[1] = {0};
  DLManagedTensorVersioned m{};
  m.version = DLPackVersion{1, 1};
  m.dl_tensor = DLTensor{nullptr, {kDLOpenCL, 0}, 1, f64(), shape, nullptr, 0};
  dlb_import_options io = routed();
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_import_versioned(&m, &io, &b), DLB_OK);
  EXPECT_EQ(dlb_buffer_nbytes(b), 0u);
  dlb_buffer_release(b);
}

}  // namespace
}  // namespace ocltest

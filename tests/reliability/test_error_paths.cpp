// The core's error paths, each reached on purpose: the exception firewall's
// three catch clauses, the refusals of every entry point that takes options
// (import and export each come in several entry points, and each decides
// alone), user backends whose callbacks fail or that have no copy
// callback, layout arithmetic at the edges of 64 bits, the dtype names'
// corner cases, a deleter that runs after its thread's library state is
// gone, and the allocator's large-mapping bookkeeping. Linked with the
// library's objects, so the internal hooks (alloc.hpp) are reachable.
#include <dlbridge/dlbridge.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "core/alloc.hpp"
#include "core/errors.hpp"

namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kCheckedMalloc = true;
#else
const bool kCheckedMalloc = std::getenv("LD_PRELOAD") != nullptr &&
                            std::strstr(std::getenv("LD_PRELOAD"), "vgpreload") != nullptr;  // valgrind
#endif

std::string message() { return dlb_last_error_message(); }
bool says(const char* words) { return message().find(words) != std::string::npos; }

DLDataType f32() { return DLDataType{kDLFloat, 32, 1}; }

class ErrorPaths : public ::testing::Test {
 protected:
  void SetUp() override {
    dlb_clear_last_error();
    live_ = dlb_live_exports();
  }
  void TearDown() override {
    dlb::testing::fail_allocation_after(0);
    EXPECT_EQ(dlb_live_exports(), live_);
  }
  std::int64_t live_ = 0;
};

// ---------------------------------------------------------------------------
// The firewall: the template every entry point runs its body in. The library
// reports its own errors by status; what reaches these clauses is an
// exception of the standard library (an allocation, a lock) or a bug.

TEST_F(ErrorPaths, FirewallTurnsEveryExceptionIntoAStatusAndAMessage) {
  EXPECT_EQ(dlb::firewall("dlb_x", []() -> dlb_status { throw std::bad_alloc(); }), DLB_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(message(), "dlb_x: out of memory");
  EXPECT_EQ(dlb_last_error_code(), DLB_ERR_OUT_OF_MEMORY);

  EXPECT_EQ(dlb::firewall("dlb_x",
                          []() -> dlb_status {
                            throw std::system_error(std::make_error_code(std::errc::resource_deadlock_would_occur),
                                                    "mutex");
                          }),
            DLB_ERR_INTERNAL);
  EXPECT_TRUE(says("dlb_x: internal error: mutex")) << message();

  EXPECT_EQ(dlb::firewall("dlb_x", []() -> dlb_status { throw std::runtime_error("a bug"); }), DLB_ERR_INTERNAL);
  EXPECT_EQ(message(), "dlb_x: internal error: a bug");

  EXPECT_EQ(dlb::firewall("dlb_x", []() -> dlb_status { throw 42; }), DLB_ERR_INTERNAL);
  EXPECT_EQ(message(), "dlb_x: internal error (unknown exception)");

  // Nothing thrown: the body's status, the message untouched.
  dlb_clear_last_error();
  EXPECT_EQ(dlb::firewall("dlb_x", []() -> dlb_status { return DLB_OK; }), DLB_OK);
  EXPECT_EQ(message(), "");
}

TEST_F(ErrorPaths, FirewallForVoidAndValueEntryPointsRecordsAndFallsBack) {
  dlb::firewall_void("dlb_release_x", [] { throw std::bad_alloc(); });
  EXPECT_EQ(dlb_last_error_code(), DLB_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(message(), "dlb_release_x: out of memory");
  const int v = dlb::firewall_value("dlb_get_x", -7, []() -> int { throw std::logic_error("broken"); });
  EXPECT_EQ(v, -7);
  EXPECT_EQ(message(), "dlb_get_x: internal error: broken");
  EXPECT_EQ(dlb::firewall_value("dlb_get_x", -7, [] { return 3; }), 3);
}

// ---------------------------------------------------------------------------
// Small entry points' refusals.

TEST_F(ErrorPaths, NullArgumentsOfTheSmallEntryPoints) {
  dlb_buffer* out = nullptr;
  EXPECT_EQ(dlb_buffer_to_host(nullptr, &out), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(says("buffer is NULL"));
  std::int64_t shape[1] = {3};
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_alloc(DLDevice{kDLCPU, 0}, f32(), 1, shape, &b), DLB_OK);
  EXPECT_EQ(dlb_buffer_to_host(b, nullptr), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(says("out is NULL"));
  EXPECT_EQ(dlb_buffer_resolve(nullptr, nullptr, &out), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(says("buffer is NULL"));
  EXPECT_EQ(dlb_buffer_resolve(b, nullptr, nullptr), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(says("out is NULL"));
  EXPECT_EQ(dlb_buffer_refcount(nullptr), 0);
  EXPECT_EQ(dlb_buffer_refcount(b), 1);
  dlb_export_options_init(nullptr);  // harmless
  dlb_import_options_init(nullptr);
  // Host memory of another CPU "device" is not something alloc makes.
  EXPECT_EQ(dlb_buffer_alloc(DLDevice{kDLCPU, 1}, f32(), 1, shape, &out), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(says("cpu:1"));
  dlb_buffer_release(b);

  EXPECT_EQ(dlb_backend_retain(nullptr), nullptr);
  dlb_backend_set_error(nullptr);  // clears a text no callback left: harmless
  EXPECT_EQ(dlb_backend_create(nullptr, nullptr, nullptr), DLB_ERR_INVALID_ARGUMENT);
}

TEST_F(ErrorPaths, TheDtypeNamesAtTheirEdges) {
  DLDataType d{};
  char text[8];
  EXPECT_EQ(dlb_dtype_name(DLDataType{kDLFloat, 7, 1}, text, sizeof text), DLB_ERR_UNSUPPORTED_DTYPE);
  EXPECT_EQ(dlb_dtype_name(f32(), nullptr, 8), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_dtype_from_name(nullptr, &d), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_dtype_from_name("float32", nullptr), DLB_ERR_INVALID_ARGUMENT);
  const std::string long_name(100, 'f');
  EXPECT_EQ(dlb_dtype_from_name(long_name.c_str(), &d), DLB_ERR_UNSUPPORTED_DTYPE);
  EXPECT_TRUE(says("too long"));
  // Lane suffixes: none, zero, too many, not a number, trailing junk, a
  // width that is not a number.
  for (const char* bad : {"float32x", "float32xa", "float32x0", "float32x65536", "float32x4y", "floatx4", "intx", "uint8x-1",
                          "complexx2", "bool8", "float32xx4"}) {
    EXPECT_EQ(dlb_dtype_from_name(bad, &d), DLB_ERR_UNSUPPORTED_DTYPE) << bad;
  }
  ASSERT_EQ(dlb_dtype_from_name("float32x65535", &d), DLB_OK);
  EXPECT_EQ(d.lanes, 65535);
  ASSERT_EQ(dlb_dtype_from_name("float4_e2m1fnx2", &d), DLB_OK);
  EXPECT_EQ(d.code, 17);
  EXPECT_EQ(d.lanes, 2);
}

// ---------------------------------------------------------------------------
// Layout arithmetic at the edges of 64 bits, and the device checks.

DLTensor host(void* data, std::int32_t ndim, std::int64_t* shape, std::int64_t* strides, DLDataType dt = f32()) {
  DLTensor t{};
  t.data = data;
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = ndim;
  t.dtype = dt;
  t.shape = shape;
  t.strides = strides;
  return t;
}

TEST_F(ErrorPaths, LayoutOverflowsAtEachStep) {
  void* somewhere = reinterpret_cast<void*>(std::uintptr_t{1} << 40);
  // Two dimensions whose reaches each fit but whose sum does not.
  std::int64_t shape[2] = {2, 2};
  std::int64_t strides[2] = {INT64_MAX, 1};
  DLTensor t = host(somewhere, 2, shape, strides, DLDataType{kDLUInt, 8, 1});
  EXPECT_EQ(dlb_validate(&t, 0), DLB_ERR_OVERFLOW);
  EXPECT_TRUE(says("byte extent of the strided view overflows 64 bits")) << message();
  // Downwards alike.
  strides[0] = INT64_MIN + 1;
  strides[1] = -2;
  EXPECT_EQ(dlb_validate(&t, 0), DLB_ERR_OVERFLOW);
  // Highest minus lowest element offset past 64 bits.
  strides[0] = INT64_MAX;
  strides[1] = INT64_MIN + 1;
  EXPECT_EQ(dlb_validate(&t, 0), DLB_ERR_OVERFLOW);
  EXPECT_TRUE(says("byte extent")) << message();
  // A stride times its extent.
  shape[0] = 3;
  strides[0] = INT64_MAX / 2 + 1;
  strides[1] = 1;
  EXPECT_EQ(dlb_validate(&t, 0), DLB_ERR_OVERFLOW);
  EXPECT_TRUE(says("strides[0]")) << message();
  // Elements of 8 bytes: an element span that fits, bytes that do not.
  shape[0] = 2;
  strides[0] = INT64_MAX / 4;
  t.dtype = DLDataType{kDLFloat, 64, 1};
  EXPECT_EQ(dlb_validate(&t, 0), DLB_ERR_OVERFLOW);
  EXPECT_TRUE(says("byte extent")) << message();
  // Packed sub-byte: the bits below element 0 overflow, then those above.
  t.dtype = DLDataType{kDLUInt, 2, 65535};
  strides[0] = -(INT64_MAX / 4);
  EXPECT_EQ(dlb_validate(&t, 0), DLB_ERR_OVERFLOW);
  EXPECT_TRUE(says("bit extent")) << message();
  // The element count, then the byte size.
  std::int64_t big[2] = {INT64_MAX, 3};
  DLTensor c = host(somewhere, 2, big, nullptr);
  EXPECT_EQ(dlb_validate(&c, 0), DLB_ERR_OVERFLOW);
  EXPECT_TRUE(says("element count")) << message();
  std::int64_t many[1] = {INT64_MAX / 2};
  c = host(somewhere, 1, many, nullptr, DLDataType{kDLComplex, 128, 1});
  EXPECT_EQ(dlb_validate(&c, 0), DLB_ERR_OVERFLOW);
  EXPECT_TRUE(says("byte size")) << message();
}

TEST_F(ErrorPaths, LayoutDeviceRefusalsNameTheDevice) {
  float x[2] = {1, 2};
  std::int64_t shape[1] = {2};
  DLTensor t = host(x, 1, shape, nullptr);
  t.device.device_id = -3;
  EXPECT_EQ(dlb_validate(&t, 0), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(says("device id -3 is negative")) << message();
  dlb_buffer* b = nullptr;
  EXPECT_EQ(dlb_buffer_wrap(&t, 0, nullptr, nullptr, &b), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(says("device id -3")) << message();
  // The padded layout of a dtype that is not one.
  t.device.device_id = 0;
  t.dtype = DLDataType{kDLInt, 3, 1};
  EXPECT_EQ(dlb_buffer_wrap(&t, DLB_BUFFER_SUBBYTE_PADDED, nullptr, nullptr, &b), DLB_ERR_UNSUPPORTED_DTYPE);
  EXPECT_TRUE(says("bits 3")) << message();
  // The strided copy of memory the host cannot read.
  t.dtype = f32();
  t.device = DLDevice{kDLCUDA, 1};
  float dst[2];
  EXPECT_EQ(dlb_copy_to_contiguous(&t, dst, sizeof dst), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(says("cuda:1")) << message();
  // The consumer-stream rule for a device type DLPack does not define.
  std::int32_t bogus = 5;
  DLDevice d{};
  std::memcpy(&d.device_type, &bogus, sizeof bogus);
  EXPECT_EQ(dlb_check_consumer_stream(d, 1), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_EQ(dlb_check_consumer_stream(DLDevice{kDLCPU, 0}, 7), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(says("cpu:0")) << message();
}

// ---------------------------------------------------------------------------
// Imports: every option refusal through every import entry point (each
// reads and checks the options itself).

struct Foreign {
  float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  std::int64_t shape[2] = {2, 3};
  std::int64_t strides[2] = {3, 1};
  int deleted = 0;
  DLManagedTensorVersioned v{};
  DLManagedTensor l{};
  Foreign() {
    DLTensor t = host(data, 2, shape, strides);
    v.version = DLPackVersion{1, 1};
    v.manager_ctx = this;
    v.deleter = [](DLManagedTensorVersioned* m) { ++static_cast<Foreign*>(m->manager_ctx)->deleted; };
    v.dl_tensor = t;
    l.manager_ctx = this;
    l.deleter = [](DLManagedTensor* m) { ++static_cast<Foreign*>(m->manager_ctx)->deleted; };
    l.dl_tensor = t;
  }
};

enum class Entry { versioned, legacy, versioned_stream, legacy_stream };

dlb_status import_by(Entry e, Foreign& f, const dlb_import_options* o, dlb_buffer** out) {
  switch (e) {
    case Entry::versioned: return dlb_import_versioned(&f.v, o, out);
    case Entry::legacy: return dlb_import_legacy(&f.l, o, out);
    case Entry::versioned_stream: return dlb_import_versioned_on_stream(&f.v, o, DLB_STREAM_NONE, out);
    case Entry::legacy_stream: return dlb_import_legacy_on_stream(&f.l, o, DLB_STREAM_NONE, out);
  }
  return DLB_ERR_INTERNAL;
}

TEST_F(ErrorPaths, EveryImportEntryPointRefusesBadOptionsAndUnmetRequirements) {
  for (Entry e : {Entry::versioned, Entry::legacy, Entry::versioned_stream, Entry::legacy_stream}) {
    SCOPED_TRACE(static_cast<int>(e));
    Foreign f;
    dlb_buffer* const sentinel = reinterpret_cast<dlb_buffer*>(0x5eed);
    dlb_buffer* out = sentinel;
    dlb_import_options o;
    dlb_import_options_init(&o);
    o.struct_size = 4;
    EXPECT_EQ(import_by(e, f, &o, &out), DLB_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(says("struct_size")) << message();
    dlb_import_options_init(&o);
    o.require_alignment = 24;
    EXPECT_EQ(import_by(e, f, &o, &out), DLB_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(says("power of two")) << message();
    dlb_import_options_init(&o);
    o.flags = std::uint64_t{1} << 40;
    EXPECT_EQ(import_by(e, f, &o, &out), DLB_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(says("unknown bits")) << message();
    // Requirements the tensor does not meet.
    dlb_import_options_init(&o);
    f.v.dl_tensor.byte_offset = f.l.dl_tensor.byte_offset = 4;
    o.require_alignment = 8;
    EXPECT_EQ(import_by(e, f, &o, &out), DLB_ERR_ALIGNMENT);
    f.v.dl_tensor.byte_offset = f.l.dl_tensor.byte_offset = 0;
    dlb_import_options_init(&o);
    o.require_contiguous = 1;
    f.strides[1] = 2;
    EXPECT_EQ(import_by(e, f, &o, &out), DLB_ERR_UNSUPPORTED_LAYOUT);
    f.strides[1] = 1;
    dlb_import_options_init(&o);
    o.require_writable = 1;
    f.v.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
    o.flags = (e == Entry::legacy || e == Entry::legacy_stream) ? DLB_IMPORT_LEGACY_READ_ONLY : 0;
    EXPECT_EQ(import_by(e, f, &o, &out), DLB_ERR_READ_ONLY);
    // A malformed tensor under options.
    dlb_import_options_init(&o);
    f.shape[0] = -1;
    EXPECT_EQ(import_by(e, f, &o, &out), DLB_ERR_MALFORMED);
    f.shape[0] = 2;
    EXPECT_EQ(out, sentinel);
    EXPECT_EQ(f.deleted, 0);
    // Met: accepted, IS_COPIED and padded flags carried over.
    f.v.flags = DLPACK_FLAG_BITMASK_IS_COPIED;
    o.require_alignment = 4;
    ASSERT_EQ(import_by(e, f, &o, &out), DLB_OK) << message();
    if (e == Entry::versioned || e == Entry::versioned_stream) {
      EXPECT_NE(dlb_buffer_flags(out) & DLB_BUFFER_COPIED, 0u);
    }
    dlb_buffer_release(out);
    EXPECT_EQ(f.deleted, 1);
    // NULL tensor and NULL out.
    EXPECT_EQ(import_by(e, f, &o, nullptr), DLB_ERR_INVALID_ARGUMENT);
  }
  EXPECT_EQ(dlb_import_versioned(nullptr, nullptr, nullptr), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_import_legacy(nullptr, nullptr, nullptr), DLB_ERR_INVALID_ARGUMENT);
}

TEST_F(ErrorPaths, PaddedFlagsOnEveryImportEntryPoint) {
  for (Entry e : {Entry::versioned, Entry::versioned_stream}) {
    Foreign f;
    f.v.dl_tensor.dtype = DLDataType{kDLInt, 4, 2};  // a byte per element: no padded layout means anything
    f.v.flags = DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
    dlb_buffer* out = nullptr;
    dlb_import_options o;
    dlb_import_options_init(&o);
    EXPECT_EQ(import_by(e, f, &o, &out), DLB_ERR_UNSUPPORTED_DTYPE);
    EXPECT_TRUE(says("IS_SUBBYTE_TYPE_PADDED")) << message();
    EXPECT_EQ(import_by(e, f, nullptr, &out), DLB_ERR_UNSUPPORTED_DTYPE);
    f.v.dl_tensor.dtype = DLDataType{kDLUInt, 4, 1};  // padded: one byte each
    ASSERT_EQ(import_by(e, f, &o, &out), DLB_OK) << message();
    EXPECT_NE(dlb_buffer_flags(out) & DLB_BUFFER_SUBBYTE_PADDED, 0u);
    dlb_buffer_release(out);
  }
}

// A producer may give no deleter: nothing is called when the buffer goes.
TEST_F(ErrorPaths, ImportedTensorsWithoutADeleter) {
  Foreign f;
  f.v.deleter = nullptr;
  f.l.deleter = nullptr;
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_import_versioned(&f.v, nullptr, &b), DLB_OK);
  dlb_buffer_release(b);
  ASSERT_EQ(dlb_import_legacy(&f.l, nullptr, &b), DLB_OK);
  dlb_buffer_release(b);
  dlb_managed_free_versioned(&f.v);
  dlb_managed_free_legacy(&f.l);
  dlb_managed_free_versioned(nullptr);
  dlb_managed_free_legacy(nullptr);
  EXPECT_EQ(f.deleted, 0);
}

// More dimensions than the pooled buffer headers hold (8).
TEST_F(ErrorPaths, ManyDimensionsTakeTheirOwnHeader) {
  std::int64_t shape[12];
  for (auto& s : shape) s = 1;
  shape[11] = 3;
  float x[3] = {1, 2, 3};
  DLTensor t = host(x, 12, shape, nullptr);
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&t, 0, nullptr, nullptr, &b), DLB_OK) << message();
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
  EXPECT_EQ(m->dl_tensor.ndim, 12);
  m->deleter(m);
  dlb_buffer_release(b);
}

// ---------------------------------------------------------------------------
// The export planner through each of its entry points (versioned, legacy,
// resolve), which plan separately.

enum class Out { versioned, legacy, resolve };

dlb_status export_by(Out how, dlb_buffer* b, const dlb_export_options* o) {
  switch (how) {
    case Out::versioned: {
      DLManagedTensorVersioned* m = nullptr;
      const dlb_status s = dlb_export_versioned(b, o, &m);
      if (s == DLB_OK) m->deleter(m);
      return s;
    }
    case Out::legacy: {
      DLManagedTensor* m = nullptr;
      const dlb_status s = dlb_export_legacy(b, o, &m);
      if (s == DLB_OK) m->deleter(m);
      return s;
    }
    case Out::resolve: {
      dlb_buffer* r = nullptr;
      const dlb_status s = dlb_buffer_resolve(b, o, &r);
      if (s == DLB_OK) dlb_buffer_release(r);
      return s;
    }
  }
  return DLB_ERR_INTERNAL;
}

dlb_export_options options(std::int32_t copy = DLB_COPY_IF_NEEDED, std::uint64_t flags = 0) {
  dlb_export_options o;
  dlb_export_options_init(&o);
  o.copy = copy;
  o.flags = flags;
  return o;
}

TEST_F(ErrorPaths, ThePlannerRefusesTheSameThroughEveryEntryPoint) {
  float x[6] = {1, 2, 3, 4, 5, 6};
  std::int64_t shape[1] = {6};
  DLTensor t = host(x, 1, shape, nullptr);
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&t, 0, nullptr, nullptr, &b), DLB_OK);
  dlb_buffer* ro = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&t, DLB_BUFFER_READ_ONLY, nullptr, nullptr, &ro), DLB_OK);
  for (Out how : {Out::versioned, Out::legacy, Out::resolve}) {
    SCOPED_TRACE(static_cast<int>(how));
    dlb_export_options o = options();
    o.struct_size = 4;
    EXPECT_EQ(export_by(how, b, &o), DLB_ERR_INVALID_ARGUMENT);
    o = options(7);
    EXPECT_EQ(export_by(how, b, &o), DLB_ERR_INVALID_ARGUMENT);
    o = options(DLB_COPY_IF_NEEDED, std::uint64_t{1} << 33);
    EXPECT_EQ(export_by(how, b, &o), DLB_ERR_INVALID_ARGUMENT);
    // Target devices: unknown, negative id, another device.
    o = options();
    o.has_target_device = 1;
    std::int32_t unknown = 6;
    std::memcpy(&o.target_device.device_type, &unknown, sizeof unknown);
    EXPECT_EQ(export_by(how, b, &o), DLB_ERR_UNSUPPORTED_DEVICE);
    EXPECT_TRUE(says("not a DLPack device")) << message();
    o.target_device = DLDevice{kDLCPU, -1};
    EXPECT_EQ(export_by(how, b, &o), DLB_ERR_UNSUPPORTED_DEVICE);
    o.target_device = DLDevice{kDLCUDA, 0};
    EXPECT_EQ(export_by(how, b, &o), DLB_ERR_UNSUPPORTED_DEVICE);
    EXPECT_TRUE(says("cannot be exported to cuda:0")) << message();
    o.target_device = DLDevice{kDLCPU, 1};
    EXPECT_EQ(export_by(how, b, &o), DLB_ERR_UNSUPPORTED_DEVICE);
    o.target_device = DLDevice{kDLCPU, 0};
    EXPECT_EQ(export_by(how, b, &o), DLB_OK) << message();
    // Streams: CPU memory has none.
    o = options();
    o.stream = 2;
    EXPECT_EQ(export_by(how, b, &o), DLB_ERR_INVALID_ARGUMENT);
    o = options(DLB_COPY_IF_NEEDED, DLB_EXPORT_STREAM_GIVEN);  // a stream given, even "none": CPU takes none
    o.stream = DLB_STREAM_NONE;
    EXPECT_EQ(export_by(how, b, &o), DLB_ERR_INVALID_ARGUMENT) << message();
    // Copies: always, and read-only requests of a copy.
    o = options(DLB_COPY_ALWAYS, DLB_EXPORT_READ_ONLY);
    const dlb_status s = export_by(how, b, &o);
    EXPECT_EQ(s, how == Out::legacy ? DLB_ERR_READ_ONLY : DLB_OK) << message();
    // Read-only memory.
    o = options(DLB_COPY_NEVER);
    EXPECT_EQ(export_by(how, ro, &o), how == Out::legacy ? DLB_ERR_READ_ONLY : DLB_OK) << message();
    o = options(DLB_COPY_IF_NEEDED, DLB_EXPORT_ALLOW_READ_ONLY_LEGACY);
    EXPECT_EQ(export_by(how, ro, &o), DLB_OK) << message();
    o = options(DLB_COPY_ALWAYS);
    EXPECT_EQ(export_by(how, ro, &o), DLB_OK) << message();
    o = options();
    o.has_target_device = 1;
    o.target_device = DLDevice{kDLCPU, 0};
    EXPECT_EQ(export_by(how, ro, &o), DLB_OK) << message();
    EXPECT_EQ(export_by(how, ro, nullptr), DLB_OK) << message();
  }
  EXPECT_EQ(export_by(Out::versioned, nullptr, nullptr), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(export_by(Out::legacy, nullptr, nullptr), DLB_ERR_INVALID_ARGUMENT);
  dlb_buffer_release(ro);
  dlb_buffer_release(b);
}

// Memory on a device the host cannot read, wrapped: what needs a copy is
// refused with the reason, and a read-only buffer's legacy export cannot
// be a copy to where it was not asked to go.
TEST_F(ErrorPaths, DeviceMemoryThePlannerCannotCopy) {
  std::int64_t shape[1] = {4};
  DLTensor t = host(reinterpret_cast<void*>(std::uintptr_t{1} << 40), 1, shape, nullptr);
  t.device = DLDevice{kDLROCM, 0};
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&t, DLB_BUFFER_READ_ONLY, nullptr, nullptr, &b), DLB_OK);
  for (Out how : {Out::versioned, Out::legacy, Out::resolve}) {
    SCOPED_TRACE(static_cast<int>(how));
    dlb_export_options o = options(DLB_COPY_ALWAYS);
    EXPECT_EQ(export_by(how, b, &o), DLB_ERR_UNSUPPORTED_DEVICE) << message();
    o = options();
    o.has_target_device = 1;
    o.target_device = DLDevice{kDLCPU, 0};
    o.copy = DLB_COPY_NEVER;
    EXPECT_EQ(export_by(how, b, &o), DLB_ERR_NOT_ZERO_COPY) << message();
    EXPECT_TRUE(says("DLB_COPY_NEVER")) << message();
    o.copy = DLB_COPY_IF_NEEDED;
    EXPECT_EQ(export_by(how, b, &o), DLB_ERR_UNSUPPORTED_DEVICE) << message();  // the host cannot read it
  }
  dlb_export_options o = options();
  EXPECT_EQ(export_by(Out::legacy, b, &o), DLB_ERR_READ_ONLY);
  EXPECT_TRUE(says("rocm:0")) << message();
  EXPECT_EQ(export_by(Out::versioned, b, &o), DLB_OK) << message();
  dlb_buffer_release(b);
}

// ---------------------------------------------------------------------------
// User backends: callbacks that fail, a backend without a copy callback
// whose memory the host reads, layouts DLPack cannot express.

struct Store {
  float data[6] = {1, 2, 3, 4, 5, 6};
  int fail_wait = 0;
  int fail_acquire = 0;
  std::int32_t layout = DLB_LAYOUT_STRIDED;
  int acquired = 0, released = 0;
};

dlb_backend* access_backend(bool with_copy, bool with_wait = true) {
  dlb_backend_vtable vt;
  std::memset(&vt, 0, sizeof vt);
  vt.struct_size = sizeof vt;
  vt.name = "mapped";
  vt.acquire_access = [](void*, void* storage, void** data, void** ref) -> int32_t {
    auto* s = static_cast<Store*>(storage);
    if (s->fail_acquire != 0) {
      dlb_backend_set_error("the mapping went away");
      return s->fail_acquire;
    }
    ++s->acquired;
    *data = s->data;
    *ref = s;
    return 0;
  };
  vt.release_access = [](void*, void*, void* ref) { ++static_cast<Store*>(ref)->released; };
  if (with_copy) {
    vt.copy_to_host = [](void*, void* storage, void* dst, uint64_t n) -> int32_t {
      std::memcpy(dst, static_cast<Store*>(storage)->data, static_cast<std::size_t>(n));
      return 0;
    };
  }
  if (with_wait) {
    vt.wait_ready = [](void*, void* storage, int64_t) -> int32_t { return static_cast<Store*>(storage)->fail_wait; };
  }
  vt.query_layout = [](void*, void* storage) -> int32_t { return static_cast<Store*>(storage)->layout; };
  dlb_backend* be = nullptr;
  EXPECT_EQ(dlb_backend_create(&vt, nullptr, &be), DLB_OK);
  return be;
}

TEST_F(ErrorPaths, ABackendWithoutACopyCallbackCopiesThroughItsAccess) {
  dlb_backend* be = access_backend(false);
  Store st;
  std::int64_t shape[2] = {2, 3};
  std::int64_t strides[2] = {1, 2};  // transposed
  DLTensor layout = host(nullptr, 2, shape, strides);
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_from_backend(be, &st, &layout, 0, &b), DLB_OK) << message();
  dlb_buffer* h = nullptr;
  ASSERT_EQ(dlb_buffer_to_host(b, &h), DLB_OK) << message();
  DLTensor v;
  ASSERT_EQ(dlb_buffer_dltensor(h, &v), DLB_OK);
  const float want[6] = {1, 3, 5, 2, 4, 6};
  EXPECT_EQ(std::memcmp(v.data, want, sizeof want), 0);
  dlb_buffer_release(h);
  EXPECT_EQ(st.acquired, 1);
  EXPECT_EQ(st.released, 1);
  // The access fails: the copy says so, with the backend's words.
  st.fail_acquire = 3;
  EXPECT_EQ(dlb_buffer_to_host(b, &h), DLB_ERR_BACKEND);
  EXPECT_TRUE(says("the mapping went away")) << message();
  st.fail_acquire = 0;
  // The wait fails first.
  st.fail_wait = 5;
  EXPECT_EQ(dlb_buffer_to_host(b, &h), DLB_ERR_BACKEND);
  EXPECT_TRUE(says("wait_ready failed (returned 5)")) << message();
  for (Out how : {Out::versioned, Out::legacy, Out::resolve}) {
    if (how == Out::resolve) continue;  // CPU memory without a target: the buffer itself, nothing asked
    EXPECT_EQ(export_by(how, b, nullptr), DLB_ERR_BACKEND);
    dlb_export_options o = options(DLB_COPY_NEVER);
    EXPECT_EQ(export_by(how, b, &o), DLB_ERR_BACKEND);
  }
  st.fail_wait = 0;
  // Access refused during a zero-copy export and a resolve.
  st.fail_acquire = 9;
  for (Out how : {Out::versioned, Out::legacy}) {
    EXPECT_EQ(export_by(how, b, nullptr), DLB_ERR_BACKEND) << static_cast<int>(how);
    dlb_export_options o = options(DLB_COPY_NEVER);
    EXPECT_EQ(export_by(how, b, &o), DLB_ERR_BACKEND);
  }
  st.fail_acquire = 0;
  // An empty storage copies without asking the backend anything.
  Store empty;
  std::int64_t none[1] = {0};
  DLTensor zero = host(nullptr, 1, none, nullptr);
  dlb_buffer* z = nullptr;
  ASSERT_EQ(dlb_buffer_from_backend(be, &empty, &zero, 0, &z), DLB_OK);
  ASSERT_EQ(dlb_buffer_to_host(z, &h), DLB_OK);
  dlb_buffer_release(h);
  dlb_buffer_release(z);
  EXPECT_EQ(empty.acquired, 0);
  dlb_buffer_release(b);
  dlb_backend_release(be);
}

TEST_F(ErrorPaths, LayoutsDLPackCannotExpressAreNamed) {
  dlb_backend* be = access_backend(true, false);
  std::int64_t shape[1] = {6};
  DLTensor layout = host(nullptr, 1, shape, nullptr);
  const struct {
    std::int32_t kind;
    const char* name;
  } kinds[] = {{DLB_LAYOUT_TILED, "tiled"},
               {DLB_LAYOUT_MULTI_PART, "multi-part"},
               {DLB_LAYOUT_DYNAMIC, "dynamic shape"},
               {77, "unknown layout kind"}};
  for (const auto& k : kinds) {
    SCOPED_TRACE(k.name);
    Store st;
    st.layout = k.kind;
    dlb_buffer* b = nullptr;
    ASSERT_EQ(dlb_buffer_from_backend(be, &st, &layout, 0, &b), DLB_OK) << message();
    // Zero-copy is ruled out, with the layout's name as the reason; a copy
    // through the backend's callback is still made.
    dlb_export_options o = options(DLB_COPY_NEVER);
    EXPECT_EQ(export_by(Out::versioned, b, &o), DLB_ERR_UNSUPPORTED_LAYOUT);
    EXPECT_TRUE(says(k.name)) << message();
    EXPECT_EQ(export_by(Out::versioned, b, nullptr), DLB_OK) << message();
    dlb_buffer_release(b);
  }
  dlb_backend_release(be);
}

TEST_F(ErrorPaths, BackendArgumentsAndNames) {
  dlb_backend_vtable vt;
  std::memset(&vt, 0, sizeof vt);
  vt.struct_size = sizeof vt;
  vt.name = "";
  dlb_backend* be = nullptr;
  EXPECT_EQ(dlb_backend_create(&vt, nullptr, &be), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(says("name")) << message();
  vt.name = nullptr;
  EXPECT_EQ(dlb_backend_create(&vt, nullptr, &be), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_backend_create(&vt, nullptr, nullptr), DLB_ERR_INVALID_ARGUMENT);
  vt.name = "x";
  ASSERT_EQ(dlb_backend_create(&vt, nullptr, &be), DLB_OK);
  EXPECT_EQ(dlb_backend_retain(be), be);
  dlb_backend_release(be);
  std::int64_t shape[1] = {2};
  DLTensor layout = host(nullptr, 1, shape, nullptr);
  dlb_buffer* b = nullptr;
  EXPECT_EQ(dlb_buffer_from_backend(nullptr, nullptr, &layout, 0, &b), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_buffer_from_backend(be, nullptr, nullptr, 0, &b), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_buffer_from_backend(be, nullptr, &layout, 0, nullptr), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_buffer_from_backend(be, nullptr, &layout, DLB_BUFFER_SUBBYTE_PADDED, &b), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(says("SUBBYTE_PADDED")) << message();
  dlb_backend_release(be);
}

// A resolve of a backend buffer the host reads: its relabelled buffer holds
// an access; when making it runs out of memory, the access is given back.
TEST_F(ErrorPaths, AResolveThatRunsOutOfMemoryGivesItsAccessBack) {
  dlb_backend* be = access_backend(true);
  Store st;
  std::int64_t shape[1] = {6};
  DLTensor layout = host(nullptr, 1, shape, nullptr);
  layout.device = DLDevice{kDLCUDAHost, 0};
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_from_backend(be, &st, &layout, 0, &b), DLB_OK) << message();
  dlb_export_options o = options();
  o.has_target_device = 1;
  o.target_device = DLDevice{kDLCPU, 0};
  int failures = 0;
  for (std::int64_t n = 1; n < 8; ++n) {
    dlb::testing::drop_thread_caches();
    dlb::testing::fail_allocation_after(n);
    dlb_buffer* r = nullptr;
    const dlb_status s = dlb_buffer_resolve(b, &o, &r);
    dlb::testing::fail_allocation_after(0);
    if (s == DLB_OK) {
      dlb_buffer_release(r);
      break;
    }
    EXPECT_EQ(s, DLB_ERR_OUT_OF_MEMORY) << message();
    ++failures;
  }
  EXPECT_GE(failures, 1);
  EXPECT_EQ(st.acquired, st.released);
  dlb_buffer_release(b);
  dlb_backend_release(be);
}

// ---------------------------------------------------------------------------
// A deleter that runs while its thread exits, after the library's per-thread
// state is gone (thread_local objects die in reverse order of construction:
// one made before the library's runs after it).

struct HeldAtExit {
  DLManagedTensorVersioned* m = nullptr;
  ~HeldAtExit() {
    if (m != nullptr) m->deleter(m);
  }
};

TEST_F(ErrorPaths, ADeleterRunningAfterItsThreadsStateIsGone) {
  std::int64_t shape[1] = {4};
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_alloc(DLDevice{kDLCPU, 0}, f32(), 1, shape, &b), DLB_OK);
  const std::int64_t before = dlb_live_exports();
  std::thread t([b] {
    thread_local HeldAtExit held;  // constructed before the library's state of this thread
    DLManagedTensorVersioned* first = nullptr;
    ASSERT_EQ(dlb_export_versioned(b, nullptr, &first), DLB_OK);
    first->deleter(first);  // the block goes to this thread's cache
    ASSERT_EQ(dlb_export_versioned(b, nullptr, &held.m), DLB_OK);
  });
  t.join();
  EXPECT_EQ(dlb_live_exports(), before);
  dlb_buffer_release(b);
}

// ---------------------------------------------------------------------------
// The allocator's large mappings: several live at once (the registry is a
// list), without the huge-page advice, without keeping a freed one, and
// sizes no mapping can have.

TEST_F(ErrorPaths, LargeMappingsBookkeeping) {
  const std::size_t big = dlb::kLargeAllocation;
  dlb::testing::set_huge_page_advice(false);
  void* a = dlb::mem_alloc_aligned(64, big);
  void* z = dlb::mem_alloc_zeroed(64, big + 4096);
  void* c = dlb::mem_alloc_aligned(4096, big + 8192);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(z, nullptr);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(static_cast<unsigned char*>(z)[big], 0);
  EXPECT_EQ(dlb::testing::large_allocations_live(), 3);
  dlb::mem_free_aligned(a);  // the oldest, at the end of the list
  dlb::mem_free_aligned(c);
  dlb::mem_free_aligned(z);
  EXPECT_EQ(dlb::testing::large_allocations_live(), 0);
  dlb::testing::set_huge_page_advice(true);
  dlb::testing::set_keep_large_mapping(false);
  EXPECT_EQ(dlb::testing::kept_mapping_bytes(), 0u);
  void* d = dlb::mem_alloc_aligned(64, big);
  dlb::mem_free_aligned(d);
  EXPECT_EQ(dlb::testing::kept_mapping_bytes(), 0u);
  dlb::testing::set_keep_large_mapping(true);
  // Sizes past what any mapping or heap block can be.
  EXPECT_EQ(dlb::mem_alloc_aligned(64, SIZE_MAX - 64), nullptr);
  EXPECT_EQ(dlb::mem_alloc_zeroed(64, SIZE_MAX / 2), nullptr);
  // Alignments past a huge page take the heap's path: sizes it cannot serve
  // (a sanitizer's or valgrind's malloc stops the process instead of
  // returning NULL for 2^60 bytes).
  EXPECT_EQ(dlb::mem_alloc_aligned(std::size_t{4} << 20, SIZE_MAX - 64), nullptr);
  if (!kCheckedMalloc) {
    EXPECT_EQ(dlb::mem_alloc_aligned(std::size_t{4} << 20, std::size_t{1} << 60), nullptr);
    EXPECT_EQ(dlb::mem_alloc_zeroed(std::size_t{4} << 20, std::size_t{1} << 60), nullptr);
  }
  dlb::testing::drop_kept_mapping();
  dlb::testing::drop_kept_mapping();  // nothing kept: harmless
  dlb::mem_free_aligned(nullptr);
  dlb::mem_free(nullptr);
}

// Freed mid-size blocks are kept for reuse, at most 8 and 32 MiB of them:
// the oldest go back to the heap when a newer one needs room.
TEST_F(ErrorPaths, KeptBlocksMakeRoomOldestFirst) {
  dlb::testing::drop_recycled_blocks();
  std::vector<void*> blocks;
  for (int i = 0; i < 10; ++i) blocks.push_back(dlb::mem_alloc_aligned(64, std::size_t{128} << 10));
  for (void* p : blocks) dlb::mem_free_aligned(p);
  EXPECT_LE(dlb::testing::recycled_bytes(), std::size_t{8} * (std::size_t{132} << 10));
  EXPECT_GT(dlb::testing::recycled_bytes(), 0u);
  // Two large-ish blocks: the second needs the room of everything kept.
  void* a = dlb::mem_alloc_aligned(64, std::size_t{20} << 20);
  void* b = dlb::mem_alloc_aligned(64, std::size_t{20} << 20);
  dlb::mem_free_aligned(a);
  dlb::mem_free_aligned(b);
  EXPECT_LE(dlb::testing::recycled_bytes(), std::size_t{32} << 20);
  // A kept block serves a request of about its size.
  void* c = dlb::mem_alloc_aligned(64, (std::size_t{20} << 20) - 4096);
  EXPECT_NE(c, nullptr);
  dlb::mem_free_aligned(c);
  dlb::testing::drop_recycled_blocks();
  EXPECT_EQ(dlb::testing::recycled_bytes(), 0u);
}

// A view whose last byte would lie past 2^64.
TEST_F(ErrorPaths, AViewEndingPastTheTopOfTheAddressSpace) {
  std::int64_t shape[1] = {16};
  DLTensor t = host(reinterpret_cast<void*>(UINTPTR_MAX - 10), 1, shape, nullptr, DLDataType{kDLUInt, 8, 1});
  EXPECT_EQ(dlb_validate(&t, 0), DLB_ERR_OVERFLOW);
  EXPECT_TRUE(says("leaves the address space")) << message();
}

// The exchange allocator's refusal of device memory names the device.
TEST_F(ErrorPaths, TheExchangeAllocatorAllocatesHostMemoryOnly) {
  std::int64_t shape[1] = {4};
  DLTensor proto = host(nullptr, 1, shape, nullptr);
  proto.device = DLDevice{kDLROCM, 1};
  DLManagedTensorVersioned* out = nullptr;
  EXPECT_EQ(dlb_managed_tensor_alloc(&proto, &out, nullptr, nullptr), -1);
  EXPECT_TRUE(says("rocm:1")) << message();
  EXPECT_EQ(out, nullptr);
}

}  // namespace

namespace {

// ---------------------------------------------------------------------------
// The rules' boundaries, each pinned (scripts/mutate moves them by one).

// Options structs of the smallest size the library reads are taken.
TEST_F(ErrorPaths, OptionsOfTheSmallestSizeAreTaken) {
  Foreign f;
  dlb_import_options io;
  dlb_import_options_init(&io);
  io.struct_size = offsetof(dlb_import_options, require_alignment) + sizeof io.require_alignment;
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_import_versioned(&f.v, &io, &b), DLB_OK) << message();
  dlb_export_options eo;
  dlb_export_options_init(&eo);
  eo.struct_size = offsetof(dlb_export_options, copy) + sizeof eo.copy;
  eo.copy = DLB_COPY_ALWAYS;
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, &eo, &m), DLB_OK) << message();
  EXPECT_NE(m->flags & DLPACK_FLAG_BITMASK_IS_COPIED, 0u);
  m->deleter(m);
  dlb_buffer_release(b);
  EXPECT_EQ(f.deleted, 1);
}

// DLPack 1.2's rule is about ndim > 0: a 0-d tensor needs no strides.
TEST_F(ErrorPaths, ScalarsNeedNoStridesEvenWhenStridesAreRequired) {
  float x = 1;
  DLTensor t = host(&x, 0, nullptr, nullptr);
  EXPECT_EQ(dlb_validate(&t, DLB_VALIDATE_STRIDES_REQUIRED), DLB_OK) << message();
}

// After the first export of a thread, an export of up to 8 dimensions
// allocates nothing (its block comes back to the thread's cache), and a
// copy export frees its copy when its deleter runs.
TEST_F(ErrorPaths, ExportsAllocateNothingOnTheHotPathAndFreeTheirCopies) {
  std::int64_t shape[8] = {1, 1, 1, 1, 1, 1, 1, 4};
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_alloc(DLDevice{kDLCPU, 0}, f32(), 8, shape, &b), DLB_OK);
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
  m->deleter(m);
  dlb::testing::fail_allocation_after(-1);  // count, fail none
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
  m->deleter(m);
  EXPECT_EQ(dlb::testing::allocations_attempted(), 0);
  dlb::testing::fail_allocation_after(0);
  dlb_buffer_release(b);

  const std::int64_t live = dlb::testing::large_allocations_live();
  std::int64_t big[1] = {std::int64_t{9} << 20};  // 36 MiB of float32: a mapping of its own
  ASSERT_EQ(dlb_buffer_alloc(DLDevice{kDLCPU, 0}, f32(), 1, big, &b), DLB_OK);
  dlb_export_options o = options(DLB_COPY_ALWAYS);
  ASSERT_EQ(dlb_export_versioned(b, &o, &m), DLB_OK);
  EXPECT_EQ(dlb::testing::large_allocations_live(), live + 2);
  m->deleter(m);
  EXPECT_EQ(dlb::testing::large_allocations_live(), live + 1);
  dlb_buffer_release(b);
  EXPECT_EQ(dlb::testing::large_allocations_live(), live);
}

// A copy that cannot be made, for no reason but where it would have to go:
// the message says that alone.
TEST_F(ErrorPaths, ACopyToADeviceTheHostCannotWriteSaysSo) {
  std::int64_t shape[1] = {4};
  DLTensor t = host(reinterpret_cast<void*>(std::uintptr_t{1} << 40), 1, shape, nullptr);
  t.device = DLDevice{kDLROCM, 0};
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&t, 0, nullptr, nullptr, &b), DLB_OK);
  dlb_export_options o = options(DLB_COPY_ALWAYS);
  o.has_target_device = 1;
  o.target_device = DLDevice{kDLROCM, 0};
  DLManagedTensorVersioned* m = nullptr;
  EXPECT_EQ(dlb_export_versioned(b, &o, &m), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_EQ(message(), "a copy can only be made to host memory, but rocm:0 was asked for");
  dlb_buffer_release(b);
}

// A backend that waits on streams itself takes a stream for CPU memory,
// which has none of its own; the stream reaches its wait.
TEST_F(ErrorPaths, ABackendThatWaitsTakesAStreamForHostMemory) {
  static std::int64_t seen = 0;
  dlb_backend_vtable vt;
  std::memset(&vt, 0, sizeof vt);
  vt.struct_size = sizeof vt;
  vt.name = "waits";
  vt.acquire_access = [](void*, void* storage, void** data, void** ref) -> int32_t {
    *data = storage;
    *ref = nullptr;
    return 0;
  };
  vt.release_access = [](void*, void*, void*) {};
  vt.wait_ready = [](void*, void*, int64_t stream) -> int32_t {
    seen = stream;
    return 0;
  };
  dlb_backend* be = nullptr;
  ASSERT_EQ(dlb_backend_create(&vt, nullptr, &be), DLB_OK);
  float x[4] = {1, 2, 3, 4};
  std::int64_t shape[1] = {4};
  DLTensor layout = host(nullptr, 1, shape, nullptr);
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_from_backend(be, x, &layout, 0, &b), DLB_OK);
  dlb_export_options o = options();
  o.stream = 5;
  o.flags = DLB_EXPORT_STREAM_GIVEN;
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, &o, &m), DLB_OK) << message();
  EXPECT_EQ(seen, 5);
  EXPECT_EQ(m->dl_tensor.data, x);
  m->deleter(m);
  dlb_buffer_release(b);
  dlb_backend_release(be);
}

// Every dtype DLPack defines is taken, and its name comes back; the widths
// next to each legal one are refused.
TEST_F(ErrorPaths, TheDtypeTableAgainstDLPack) {
  struct Code {
    std::uint8_t code;
    std::vector<int> widths;
  };
  const Code codes[] = {
      {kDLInt, {2, 4, 8, 16, 32, 64}}, {kDLUInt, {2, 4, 8, 16, 32, 64}}, {kDLFloat, {16, 32, 64}},
      {kDLOpaqueHandle, {8, 16, 32, 64}}, {kDLBfloat, {16}}, {kDLComplex, {32, 64, 128}}, {6, {8}},
      {7, {8}}, {8, {8}}, {9, {8}}, {10, {8}}, {11, {8}}, {12, {8}}, {13, {8}}, {14, {8}},
      {15, {6}}, {16, {6}}, {17, {4}},
  };
  for (const Code& c : codes) {
    for (int w : c.widths) {
      SCOPED_TRACE(::testing::Message() << "code " << int(c.code) << " bits " << w);
      const DLDataType dt{c.code, static_cast<std::uint8_t>(w), 1};
      EXPECT_EQ(dlb_dtype_check(dt), DLB_OK) << message();
      char name[64];
      ASSERT_EQ(dlb_dtype_name(dt, name, sizeof name), DLB_OK) << message();
      DLDataType back{};
      ASSERT_EQ(dlb_dtype_from_name(name, &back), DLB_OK) << name;
      EXPECT_TRUE(back.code == dt.code && back.bits == dt.bits && back.lanes == 1) << name;
      for (int near : {w - 1, w + 1}) {
        bool legal = false;
        for (int o : c.widths) legal = legal || o == near;
        if (!legal) {
          EXPECT_EQ(dlb_dtype_check(DLDataType{c.code, static_cast<std::uint8_t>(near), 1}),
                    DLB_ERR_UNSUPPORTED_DTYPE)
              << near;
        }
      }
    }
  }
  EXPECT_EQ(dlb_dtype_check(DLDataType{18, 8, 1}), DLB_ERR_UNSUPPORTED_DTYPE);
  EXPECT_TRUE(says("dtype code 18 is not a DLPack type code (known: 0..17)")) << message();
}

TEST_F(ErrorPaths, DtypeNamesAtTheirBoundaries) {
  DLDataType d{};
  ASSERT_EQ(dlb_dtype_from_name("float32x9", &d), DLB_OK) << message();
  EXPECT_EQ(d.lanes, 9);
  ASSERT_EQ(dlb_dtype_from_name("float32x1", &d), DLB_OK) << message();
  EXPECT_TRUE(d.code == kDLFloat && d.bits == 32 && d.lanes == 1);
  const std::string sixty_three(63, 'q');
  EXPECT_EQ(dlb_dtype_from_name(sixty_three.c_str(), &d), DLB_ERR_UNSUPPORTED_DTYPE);
  EXPECT_TRUE(says("is not a dtype name")) << message();
  const std::string sixty_four(64, 'q');
  EXPECT_EQ(dlb_dtype_from_name(sixty_four.c_str(), &d), DLB_ERR_UNSUPPORTED_DTYPE);
  EXPECT_TRUE(says("too long")) << message();
  char exact[8];  // "float32" and its terminator
  EXPECT_EQ(dlb_dtype_name(f32(), exact, sizeof exact), DLB_OK) << message();
  EXPECT_STREQ(exact, "float32");
  EXPECT_EQ(dlb_dtype_name(f32(), exact, 7), DLB_ERR_INVALID_ARGUMENT);
}

// The device table ends at kDLTPUHost (20).
TEST_F(ErrorPaths, DeviceTypesPastTheTableAreUnknown) {
  dlb_device_info info;
  info.struct_size = sizeof info;
  EXPECT_EQ(dlb_device_type_info(20, &info), DLB_OK);
  EXPECT_EQ(dlb_device_type_info(21, &info), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_EQ(dlb_device_type_info(0, &info), DLB_ERR_UNSUPPORTED_DEVICE);
  float x[1] = {0};
  std::int64_t shape[1] = {1};
  DLTensor t = host(x, 1, shape, nullptr);
  std::int32_t type = 21;
  std::memcpy(&t.device.device_type, &type, sizeof type);
  EXPECT_EQ(dlb_validate(&t, 0), DLB_ERR_UNSUPPORTED_DEVICE);
}

}  // namespace

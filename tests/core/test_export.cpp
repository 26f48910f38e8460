// The exporter: versioned and legacy structs, the deleter exactly once,
// flags, copy policy, devices, deleted buffers, threads.
#include <atomic>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "support.hpp"

using namespace dlbtest;

namespace {

// A wrapped 2x3x4x5 float32 tensor with a counted release.
struct Wrapped {
  std::vector<float> data = std::vector<float>(120);
  int64_t shape[4] = {2, 3, 4, 5};
  ReleaseCounter rc;
  dlb_buffer* b = nullptr;
  explicit Wrapped(uint64_t flags = 0) {
    std::iota(data.begin(), data.end(), 0.0f);
    DLTensor view{data.data(), cpu(), 4, f32(), shape, nullptr, 0};
    EXPECT_EQ(dlb_buffer_wrap(&view, flags, ReleaseCounter::release, &rc, &b), DLB_OK);
  }
};

}  // namespace

class Export : public DlbTest {};

TEST_F(Export, VersionedIsZeroCopyAndHoldsAReferenceUntilItsDeleterRuns) {
  Wrapped w;
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(w.b, nullptr, &m), DLB_OK);
  EXPECT_EQ(dlb_live_exports(), live_at_start_ + 1);
  EXPECT_EQ(m->version.major, 1u);
  EXPECT_EQ(m->version.minor, 3u);
  EXPECT_EQ(m->flags, 0u);
  EXPECT_EQ(m->dl_tensor.data, w.data.data());
  EXPECT_EQ(m->dl_tensor.device.device_type, kDLCPU);
  EXPECT_EQ(m->dl_tensor.ndim, 4);
  EXPECT_EQ(m->dl_tensor.dtype.code, kDLFloat);
  ASSERT_NE(m->dl_tensor.strides, nullptr);
  const int64_t want_strides[4] = {60, 20, 5, 1};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(m->dl_tensor.shape[i], w.shape[i]);
    EXPECT_EQ(m->dl_tensor.strides[i], want_strides[i]);
  }
  EXPECT_EQ(dlb_buffer_refcount(w.b), 2);
  dlb_buffer_release(w.b);
  EXPECT_EQ(w.rc.calls.load(), 0);  // the export keeps the memory
  EXPECT_EQ(static_cast<float*>(m->dl_tensor.data)[119], 119.0f);
  m->deleter(m);
  EXPECT_EQ(w.rc.calls.load(), 1);
}

TEST_F(Export, LegacyIsZeroCopy) {
  Wrapped w;
  DLManagedTensor* m = nullptr;
  ASSERT_EQ(dlb_export_legacy(w.b, nullptr, &m), DLB_OK);
  EXPECT_EQ(m->dl_tensor.data, w.data.data());
  EXPECT_EQ(m->dl_tensor.strides[0], 60);
  dlb_managed_free_legacy(m);
  dlb_buffer_release(w.b);
  EXPECT_EQ(w.rc.calls.load(), 1);
}

TEST_F(Export, ReadOnlyBuffersAndRequestsSetTheFlag) {
  Wrapped ro(DLB_BUFFER_READ_ONLY);
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(ro.b, nullptr, &m), DLB_OK);
  EXPECT_EQ(m->flags, DLPACK_FLAG_BITMASK_READ_ONLY);
  m->deleter(m);

  Wrapped rw;
  const dlb_export_options o = opts(DLB_COPY_IF_NEEDED, DLB_EXPORT_READ_ONLY);
  ASSERT_EQ(dlb_export_versioned(rw.b, &o, &m), DLB_OK);
  EXPECT_EQ(m->flags, DLPACK_FLAG_BITMASK_READ_ONLY);
  m->deleter(m);
  dlb_buffer_release(ro.b);
  dlb_buffer_release(rw.b);
}

// The legacy struct cannot say READ_ONLY: with a copy allowed, read-only
// memory goes out as the consumer's own writable copy (copy=None in the
// array API), the default export and explicit options alike, the cached
// default decision included.
TEST_F(Export, LegacyExportOfReadOnlyDataIsAWritableCopyWhenCopyIsAllowed) {
  Wrapped ro(DLB_BUFFER_READ_ONLY);
  const dlb_export_options if_needed = opts(DLB_COPY_IF_NEEDED);
  const dlb_export_options* choices[] = {nullptr, nullptr, &if_needed};
  for (const dlb_export_options* o : choices) {
    DLManagedTensor* m = nullptr;
    ASSERT_EQ(dlb_export_legacy(ro.b, o, &m), DLB_OK);
    EXPECT_EQ(dlb_live_exports(), live_at_start_ + 1);
    EXPECT_EQ(dlb_buffer_refcount(ro.b), 1);  // a copy holds no reference
    EXPECT_NE(m->dl_tensor.data, ro.data.data());
    EXPECT_EQ(m->dl_tensor.device.device_type, kDLCPU);
    EXPECT_EQ(m->dl_tensor.byte_offset, 0u);
    EXPECT_EQ(m->dl_tensor.strides[0], 60);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(m->dl_tensor.data) % 64, 0u);
    float* got = static_cast<float*>(m->dl_tensor.data);
    for (int i = 0; i < 120; ++i) EXPECT_EQ(got[i], static_cast<float>(i));
    got[7] = -1.0f;  // the consumer's own: the original does not see it
    EXPECT_EQ(ro.data[7], 7.0f);
    m->deleter(m);
    EXPECT_EQ(dlb_live_exports(), live_at_start_);
  }
  // The versioned export of the same buffer still shares it, marked
  // READ_ONLY, before and after the legacy decision was cached.
  for (int round = 0; round < 2; ++round) {
    DLManagedTensorVersioned* v = nullptr;
    ASSERT_EQ(dlb_export_versioned(ro.b, nullptr, &v), DLB_OK);
    EXPECT_EQ(v->dl_tensor.data, ro.data.data());
    EXPECT_EQ(v->flags, DLPACK_FLAG_BITMASK_READ_ONLY);
    v->deleter(v);
    DLManagedTensor* m = nullptr;
    ASSERT_EQ(dlb_export_legacy(ro.b, nullptr, &m), DLB_OK);
    EXPECT_NE(m->dl_tensor.data, ro.data.data());
    m->deleter(m);
  }
  EXPECT_EQ(ro.rc.calls.load(), 0);
  dlb_buffer_release(ro.b);
  EXPECT_EQ(ro.rc.calls.load(), 1);
  EXPECT_EQ(dlb_live_exports(), live_at_start_);
}

// Imported back, a legacy export of this library says what its struct
// could not: a copy comes in COPIED (and writable), read-only memory shared
// under DLB_EXPORT_ALLOW_READ_ONLY_LEGACY comes in READ_ONLY.
TEST_F(Export, OwnLegacyExportImportsWithWhatItsStructCannotSay) {
  Wrapped ro(DLB_BUFFER_READ_ONLY);
  DLManagedTensor* m = nullptr;
  ASSERT_EQ(dlb_export_legacy(ro.b, nullptr, &m), DLB_OK);
  dlb_buffer* in = nullptr;
  ASSERT_EQ(dlb_import_legacy(m, nullptr, &in), DLB_OK);
  EXPECT_NE(dlb_buffer_flags(in) & DLB_BUFFER_COPIED, 0u);
  EXPECT_EQ(dlb_buffer_flags(in) & DLB_BUFFER_READ_ONLY, 0u);
  dlb_buffer_release(in);  // runs the copy's deleter
  EXPECT_EQ(dlb_live_exports(), live_at_start_);

  const dlb_export_options allow = opts(DLB_COPY_IF_NEEDED, DLB_EXPORT_ALLOW_READ_ONLY_LEGACY);
  ASSERT_EQ(dlb_export_legacy(ro.b, &allow, &m), DLB_OK);
  EXPECT_EQ(m->dl_tensor.data, ro.data.data());
  ASSERT_EQ(dlb_import_legacy(m, nullptr, &in), DLB_OK);
  EXPECT_EQ(dlb_buffer_flags(in) & DLB_BUFFER_COPIED, 0u);
  EXPECT_NE(dlb_buffer_flags(in) & DLB_BUFFER_READ_ONLY, 0u);
  dlb_buffer_release(in);

  Wrapped rw;
  ASSERT_EQ(dlb_export_legacy(rw.b, nullptr, &m), DLB_OK);
  ASSERT_EQ(dlb_import_legacy(m, nullptr, &in), DLB_OK);
  EXPECT_EQ(dlb_buffer_flags(in) & (DLB_BUFFER_COPIED | DLB_BUFFER_READ_ONLY), 0u);
  dlb_buffer_release(in);
  dlb_buffer_release(rw.b);
  dlb_buffer_release(ro.b);
  EXPECT_EQ(ro.rc.calls.load(), 1);
  EXPECT_EQ(rw.rc.calls.load(), 1);
  EXPECT_EQ(dlb_live_exports(), live_at_start_);
}

// copy=False in the array API: the legacy export of read-only memory would
// need a copy and is refused, naming the remedies.
TEST_F(Export, LegacyExportOfReadOnlyDataIsRefusedWithCopyNever) {
  Wrapped ro(DLB_BUFFER_READ_ONLY);
  DLManagedTensor* m = nullptr;
  const dlb_export_options never = opts(DLB_COPY_NEVER);
  EXPECT_EQ(dlb_export_legacy(ro.b, &never, &m), DLB_ERR_READ_ONLY);
  EXPECT_TRUE(MessageContains("DLB_COPY_NEVER"));
  EXPECT_TRUE(MessageContains("allow a copy (DLB_COPY_IF_NEEDED; copy=None in Python)"));
  EXPECT_TRUE(MessageContains("DLB_EXPORT_ALLOW_READ_ONLY_LEGACY"));
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(dlb_buffer_refcount(ro.b), 1);  // no reference taken
  EXPECT_EQ(dlb_live_exports(), live_at_start_);
  // The versioned export needs no copy, so copy never is fine there.
  DLManagedTensorVersioned* v = nullptr;
  ASSERT_EQ(dlb_export_versioned(ro.b, &never, &v), DLB_OK);
  EXPECT_EQ(v->dl_tensor.data, ro.data.data());
  v->deleter(v);
  // Allowed: shared as it is, the caller promising the consumer won't write.
  const dlb_export_options allow = opts(DLB_COPY_NEVER, DLB_EXPORT_ALLOW_READ_ONLY_LEGACY);
  ASSERT_EQ(dlb_export_legacy(ro.b, &allow, &m), DLB_OK);
  EXPECT_EQ(m->dl_tensor.data, ro.data.data());
  EXPECT_EQ(dlb_buffer_refcount(ro.b), 2);
  m->deleter(m);
  // Always a copy, read-only or not.
  const dlb_export_options copy = opts(DLB_COPY_ALWAYS);
  ASSERT_EQ(dlb_export_legacy(ro.b, &copy, &m), DLB_OK);
  EXPECT_NE(m->dl_tensor.data, ro.data.data());
  m->deleter(m);
  dlb_buffer_release(ro.b);
  EXPECT_EQ(ro.rc.calls.load(), 1);
  EXPECT_EQ(dlb_live_exports(), live_at_start_);
}

// DLB_EXPORT_READ_ONLY asks for a flag the legacy struct does not have: a
// copy would not carry it either.
TEST_F(Export, LegacyExportAskedReadOnlyIsRefused) {
  Wrapped rw;
  DLManagedTensor* m = nullptr;
  const dlb_export_options o = opts(DLB_COPY_IF_NEEDED, DLB_EXPORT_READ_ONLY);
  EXPECT_EQ(dlb_export_legacy(rw.b, &o, &m), DLB_ERR_READ_ONLY);
  EXPECT_TRUE(MessageContains("DLB_EXPORT_READ_ONLY"));
  EXPECT_EQ(m, nullptr);
  const dlb_export_options always = opts(DLB_COPY_ALWAYS, DLB_EXPORT_READ_ONLY);
  EXPECT_EQ(dlb_export_legacy(rw.b, &always, &m), DLB_ERR_READ_ONLY);
  const dlb_export_options allow = opts(DLB_COPY_IF_NEEDED, DLB_EXPORT_READ_ONLY | DLB_EXPORT_ALLOW_READ_ONLY_LEGACY);
  ASSERT_EQ(dlb_export_legacy(rw.b, &allow, &m), DLB_OK);
  EXPECT_EQ(m->dl_tensor.data, rw.data.data());
  m->deleter(m);
  dlb_buffer_release(rw.b);
  EXPECT_EQ(dlb_live_exports(), live_at_start_);
}

TEST_F(Export, CopyAlwaysGivesAFreshRowMajorCopyWithIsCopied) {
  // A transposed, offset view: the copy must be compact and hold the values.
  std::vector<double> data(20);
  std::iota(data.begin(), data.end(), 0.0);
  int64_t shape[2] = {4, 3};
  int64_t strides[2] = {1, 4};
  DLTensor view{data.data(), cpu(), 2, f64(), shape, strides, 2 * sizeof(double)};
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&view, DLB_BUFFER_READ_ONLY, nullptr, nullptr, &b), DLB_OK);
  const dlb_export_options o = opts(DLB_COPY_ALWAYS);
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, &o, &m), DLB_OK);
  EXPECT_EQ(m->flags, DLPACK_FLAG_BITMASK_IS_COPIED);  // a copy is writable
  EXPECT_EQ(m->dl_tensor.byte_offset, 0u);
  EXPECT_EQ(m->dl_tensor.strides[0], 3);
  EXPECT_EQ(m->dl_tensor.strides[1], 1);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(m->dl_tensor.data) % 64, 0u);
  const double* got = static_cast<const double*>(m->dl_tensor.data);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(got[i * 3 + j], 2.0 + i + 4 * j);
  EXPECT_EQ(dlb_buffer_refcount(b), 1);  // a copy holds no reference
  m->deleter(m);
  dlb_buffer_release(b);
}

TEST_F(Export, CopyNeverAndIfNeededAreZeroCopyOnHostBuffers) {
  Wrapped w;
  for (int32_t policy : {DLB_COPY_NEVER, DLB_COPY_IF_NEEDED}) {
    const dlb_export_options o = opts(policy);
    DLManagedTensorVersioned* m = nullptr;
    ASSERT_EQ(dlb_export_versioned(w.b, &o, &m), DLB_OK);
    EXPECT_EQ(m->dl_tensor.data, w.data.data());
    EXPECT_EQ(m->flags & DLPACK_FLAG_BITMASK_IS_COPIED, 0u);
    m->deleter(m);
  }
  dlb_buffer_release(w.b);
}

TEST_F(Export, StridesOfSizeOneAndEmptyDimensionsAreKept) {
  float data[8];
  int64_t shape[3] = {1, 4, 1};
  int64_t strides[3] = {77, 2, -5};  // arbitrary on the size-1 dimensions
  DLTensor view{data, cpu(), 3, f32(), shape, strides, 0};
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&view, 0, nullptr, nullptr, &b), DLB_OK);
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
  EXPECT_EQ(m->dl_tensor.strides[0], 77);
  EXPECT_EQ(m->dl_tensor.strides[1], 2);
  EXPECT_EQ(m->dl_tensor.strides[2], -5);
  m->deleter(m);
  dlb_buffer_release(b);

  int64_t eshape[2] = {0, 3};
  int64_t estrides[2] = {999, 123};
  DLTensor empty{nullptr, cpu(), 2, f32(), eshape, estrides, 0};
  ASSERT_EQ(dlb_buffer_wrap(&empty, 0, nullptr, nullptr, &b), DLB_OK);
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
  EXPECT_EQ(m->dl_tensor.strides[0], 999);
  EXPECT_EQ(m->dl_tensor.strides[1], 123);
  // Never NULL, even for a zero-size buffer without memory: some consumers
  // skip the deleter of a tensor whose data is NULL.
  EXPECT_NE(m->dl_tensor.data, nullptr);
  m->deleter(m);
  dlb_buffer_release(b);
}

TEST_F(Export, ZeroDimensionalExportsHaveShapeAndStridesPointers) {
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_alloc(cpu(), f64(), 0, nullptr, &b), DLB_OK);
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
  EXPECT_EQ(m->dl_tensor.ndim, 0);
  m->deleter(m);
  dlb_buffer_release(b);
}

TEST_F(Export, HighDimensionalExportsWork) {
  std::vector<int64_t> shape(DLB_MAX_NDIM, 1);
  shape[3] = 2;
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_alloc(cpu(), u8(), DLB_MAX_NDIM, shape.data(), &b), DLB_OK);
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
  EXPECT_EQ(m->dl_tensor.ndim, DLB_MAX_NDIM);
  EXPECT_EQ(m->dl_tensor.shape[3], 2);
  EXPECT_EQ(m->dl_tensor.strides[2], 2);
  m->deleter(m);
  dlb_buffer_release(b);
}

TEST_F(Export, TargetDevices) {
  Wrapped w;
  dlb_export_options o = opts(DLB_COPY_IF_NEEDED);
  o.has_target_device = 1;
  o.target_device = cpu();
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(w.b, &o, &m), DLB_OK);
  EXPECT_EQ(m->dl_tensor.data, w.data.data());
  m->deleter(m);
  o.target_device = DLDevice{kDLCUDA, 0};
  m = nullptr;
  EXPECT_EQ(dlb_export_versioned(w.b, &o, &m), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("cuda:0"));
  EXPECT_EQ(m, nullptr);
  o.target_device = DLDevice{static_cast<DLDeviceType>(6), 0};
  EXPECT_EQ(dlb_export_versioned(w.b, &o, &m), DLB_ERR_UNSUPPORTED_DEVICE);
  dlb_buffer_release(w.b);
}

TEST_F(Export, PinnedHostMemoryIsHandedOverAsCpuWhenTheCpuIsAskedFor) {
  std::vector<float> data(4);
  int64_t shape[1] = {4};
  DLTensor view{data.data(), DLDevice{kDLCUDAHost, 0}, 1, f32(), shape, nullptr, 0};
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&view, 0, nullptr, nullptr, &b), DLB_OK);
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
  EXPECT_EQ(m->dl_tensor.device.device_type, kDLCUDAHost);  // as the buffer says
  m->deleter(m);
  dlb_export_options o = opts(DLB_COPY_NEVER);
  o.has_target_device = 1;
  o.target_device = cpu();
  ASSERT_EQ(dlb_export_versioned(b, &o, &m), DLB_OK);
  EXPECT_EQ(m->dl_tensor.device.device_type, kDLCPU);
  EXPECT_EQ(m->dl_tensor.data, data.data());
  m->deleter(m);
  dlb_buffer_release(b);
}

TEST_F(Export, DeviceMemoryWithoutABackendCannotBeCopied) {
  int64_t shape[1] = {4};
  DLTensor view{reinterpret_cast<void*>(0x10000), DLDevice{kDLCUDA, 1}, 1, f32(), shape, nullptr, 0};
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&view, 0, nullptr, nullptr, &b), DLB_OK);
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);  // zero-copy, device kept
  EXPECT_EQ(m->dl_tensor.device.device_type, kDLCUDA);
  EXPECT_EQ(m->dl_tensor.device.device_id, 1);
  m->deleter(m);
  dlb_export_options o = opts(DLB_COPY_IF_NEEDED);
  o.has_target_device = 1;
  o.target_device = cpu();
  m = nullptr;
  EXPECT_EQ(dlb_export_versioned(b, &o, &m), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("dlb_buffer_from_backend"));
  o.copy = DLB_COPY_NEVER;
  EXPECT_EQ(dlb_export_versioned(b, &o, &m), DLB_ERR_NOT_ZERO_COPY);
  EXPECT_TRUE(MessageContains("copy was forbidden"));
  EXPECT_EQ(m, nullptr);
  dlb_buffer_release(b);
}

TEST_F(Export, StreamsAreRefusedForHostMemory) {
  Wrapped w;
  dlb_export_options o = opts(DLB_COPY_IF_NEEDED);
  o.stream = 7;
  DLManagedTensorVersioned* m = nullptr;
  EXPECT_EQ(dlb_export_versioned(w.b, &o, &m), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("stream 7"));
  dlb_buffer_release(w.b);
}

TEST_F(Export, BadOptionsAndArguments) {
  Wrapped w;
  DLManagedTensorVersioned* m = nullptr;
  dlb_export_options o = opts(5);
  EXPECT_EQ(dlb_export_versioned(w.b, &o, &m), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("copy is 5"));
  o = opts(DLB_COPY_NEVER, 1u << 9);
  EXPECT_EQ(dlb_export_versioned(w.b, &o, &m), DLB_ERR_INVALID_ARGUMENT);
  o.struct_size = 2;
  EXPECT_EQ(dlb_export_versioned(w.b, &o, &m), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("struct_size"));
  EXPECT_EQ(dlb_export_versioned(nullptr, nullptr, &m), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_export_versioned(w.b, nullptr, nullptr), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_export_legacy(w.b, nullptr, nullptr), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(dlb_buffer_refcount(w.b), 1);
  dlb_buffer_release(w.b);
}

TEST_F(Export, ManagedFreeIsNullSafeAndSkipsANullDeleter) {
  dlb_managed_free_versioned(nullptr);
  dlb_managed_free_legacy(nullptr);
  DLManagedTensorVersioned v{};
  dlb_managed_free_versioned(&v);
  DLManagedTensor l{};
  dlb_managed_free_legacy(&l);
}

TEST_F(Export, DeletersRunOnOtherThreads) {
  Wrapped w;
  std::vector<DLManagedTensorVersioned*> ms(64);
  for (auto& m : ms) ASSERT_EQ(dlb_export_versioned(w.b, nullptr, &m), DLB_OK);
  dlb_buffer_release(w.b);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (std::size_t i = static_cast<std::size_t>(t); i < ms.size(); i += 4) ms[i]->deleter(ms[i]);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(w.rc.calls.load(), 1);
}

TEST_F(Export, EightThreadsExportWhileAnotherDeletes) {
  Wrapped w;
  std::atomic<bool> go{false};
  std::atomic<long> ok{0}, deleted{0}, other{0};
  const long n = iterations(20000);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      std::vector<DLManagedTensorVersioned*> held;
      for (long i = 0; i < n; ++i) {
        DLManagedTensorVersioned* m = nullptr;
        const dlb_status s = dlb_export_versioned(w.b, nullptr, &m);
        if (s == DLB_OK) {
          ++ok;
          // Valid while held, whatever happens to the buffer meanwhile.
          if (static_cast<float*>(m->dl_tensor.data)[7] != 7.0f) ++other;
          if ((i + t) % 3 == 0) held.push_back(m); else m->deleter(m);
        } else if (s == DLB_ERR_DELETED) {
          ++deleted;
        } else {
          ++other;
        }
      }
      for (auto* m : held) m->deleter(m);
    });
  go = true;
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_EQ(dlb_buffer_delete(w.b), DLB_OK);
  for (auto& t : threads) t.join();
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(ok.load() + deleted.load(), 8 * n);
  EXPECT_EQ(w.rc.calls.load(), 0);
  dlb_buffer_release(w.b);
  EXPECT_EQ(w.rc.calls.load(), 1);
}

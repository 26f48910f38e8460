// The storage interface seen from outside: every kind of storage exports,
// copies and honours the planner the same way. IS_COPIED as DLPack means it,
// byte_offset folded for address devices, managed memory read by the host,
// and the cached default plan agreeing with the planner.
#include <atomic>
#include <cstring>
#include <numeric>
#include <vector>

#include "support.hpp"

using namespace dlbtest;

namespace {

class Storage : public DlbTest {};

}  // namespace

TEST_F(Storage, ReexportOfAnImportedCopyIsNotACopy) {
  // The producer made a copy and handed it over (IS_COPIED): this library
  // owns it now, but its exports share it, so none may claim sole ownership.
  ForeignTensor f(f32(), {6}, {1}, 24, 0, DLPACK_FLAG_BITMASK_IS_COPIED);
  float* values = static_cast<float*>(f.data());
  std::iota(values, values + 6, 1.0f);
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_import_versioned(f.as_versioned(), nullptr, &b), DLB_OK);
  EXPECT_EQ(dlb_buffer_flags(b) & DLB_BUFFER_COPIED, DLB_BUFFER_COPIED);  // what the producer said
  DLManagedTensorVersioned* m1 = nullptr;
  DLManagedTensorVersioned* m2 = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m1), DLB_OK);
  dlb_export_options never = opts(DLB_COPY_NEVER);
  ASSERT_EQ(dlb_export_versioned(b, &never, &m2), DLB_OK);
  EXPECT_EQ(m1->dl_tensor.data, f.data());
  EXPECT_EQ(m2->dl_tensor.data, f.data());
  EXPECT_EQ(m1->flags & DLPACK_FLAG_BITMASK_IS_COPIED, 0u);
  EXPECT_EQ(m2->flags & DLPACK_FLAG_BITMASK_IS_COPIED, 0u);
  // An export that copies says so.
  dlb_export_options always = opts(DLB_COPY_ALWAYS);
  DLManagedTensorVersioned* m3 = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, &always, &m3), DLB_OK);
  EXPECT_NE(m3->dl_tensor.data, f.data());
  EXPECT_EQ(m3->flags, DLPACK_FLAG_BITMASK_IS_COPIED);
  EXPECT_EQ(static_cast<float*>(m3->dl_tensor.data)[5], 6.0f);
  // The copy, imported and exported again, is shared too.
  dlb_buffer* c = nullptr;
  ASSERT_EQ(dlb_import_versioned(m3, nullptr, &c), DLB_OK);
  DLManagedTensorVersioned* m4 = nullptr;
  ASSERT_EQ(dlb_export_versioned(c, nullptr, &m4), DLB_OK);
  EXPECT_EQ(m4->flags, 0u);
  dlb_buffer_release(c);
  m4->deleter(m4);
  m1->deleter(m1);
  m2->deleter(m2);
  dlb_buffer_release(b);
  EXPECT_EQ(f.deleter_calls.load(), 1);
}

TEST_F(Storage, ByteOffsetIsFoldedIntoDataOnAddressDevices) {
  // A float32 tensor whose element 0 starts 3 elements into the storage.
  ForeignTensor f(f32(), {4}, {1}, 64, 3 * sizeof(float));
  float* values = static_cast<float*>(f.data());
  std::iota(values, values + 16, 0.0f);
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_import_legacy(f.as_legacy(), nullptr, &b), DLB_OK);
  for (int legacy = 0; legacy < 2; ++legacy) {
    DLTensor t;
    DLManagedTensor* ml = nullptr;
    DLManagedTensorVersioned* mv = nullptr;
    if (legacy != 0) {
      ASSERT_EQ(dlb_export_legacy(b, nullptr, &ml), DLB_OK);
      t = ml->dl_tensor;
    } else {
      ASSERT_EQ(dlb_export_versioned(b, nullptr, &mv), DLB_OK);
      t = mv->dl_tensor;
    }
    // A consumer that ignores byte_offset (torch) reads the right values.
    EXPECT_EQ(t.byte_offset, 0u);
    EXPECT_EQ(static_cast<float*>(t.data)[0], 3.0f);
    EXPECT_EQ(static_cast<float*>(t.data)[3], 6.0f);
    if (ml != nullptr) ml->deleter(ml);
    if (mv != nullptr) mv->deleter(mv);
  }
  // The buffer's own view is the producer's, unchanged.
  DLTensor view;
  ASSERT_EQ(dlb_buffer_dltensor(b, &view), DLB_OK);
  EXPECT_EQ(view.data, f.data());
  EXPECT_EQ(view.byte_offset, 3 * sizeof(float));
  dlb_buffer_release(b);
  EXPECT_EQ(f.deleter_calls.load(), 1);
}

TEST_F(Storage, ByteOffsetIsFoldedForDeviceAddressesAndKeptForOpaqueHandles) {
  int64_t shape[1] = {4};
  void* handle = reinterpret_cast<void*>(0x4000);
  struct Case {
    DLDeviceType type;
    bool folded;
  };
  for (Case c : {Case{kDLCUDA, true}, Case{kDLROCM, true}, Case{kDLCUDAManaged, true}, Case{kDLOpenCL, false},
                 Case{kDLVulkan, false}, Case{kDLMetal, false}, Case{static_cast<DLDeviceType>(15), false}}) {
    SCOPED_TRACE(c.type);
    DLTensor view{handle, DLDevice{c.type, 0}, 1, f32(), shape, nullptr, 256};
    dlb_buffer* b = nullptr;
    ASSERT_EQ(dlb_buffer_wrap(&view, 0, nullptr, nullptr, &b), DLB_OK);
    DLManagedTensorVersioned* m = nullptr;
    ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
    if (c.folded) {
      EXPECT_EQ(m->dl_tensor.data, static_cast<unsigned char*>(handle) + 256);
      EXPECT_EQ(m->dl_tensor.byte_offset, 0u);
    } else {
      EXPECT_EQ(m->dl_tensor.data, handle);
      EXPECT_EQ(m->dl_tensor.byte_offset, 256u);
    }
    m->deleter(m);
    dlb_buffer_release(b);
  }
}

TEST_F(Storage, ImportedManagedMemoryCopiesToHostAndExportsToTheCpu) {
  ForeignTensor f(f32(), {2, 2}, {1, 2}, 16);  // transposed
  float* values = static_cast<float*>(f.data());
  std::iota(values, values + 4, 10.0f);
  f.tensor().device = DLDevice{kDLCUDAManaged, 0};
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_import_versioned(f.as_versioned(), nullptr, &b), DLB_OK);
  dlb_buffer* host = nullptr;
  ASSERT_EQ(dlb_buffer_to_host(b, &host), DLB_OK) << dlb_last_error_message();
  DLTensor t;
  ASSERT_EQ(dlb_buffer_dltensor(host, &t), DLB_OK);
  const float want[4] = {10, 12, 11, 13};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(static_cast<float*>(t.data)[i], want[i]) << i;
  dlb_buffer_release(host);
  dlb_export_options o = opts(DLB_COPY_ALWAYS);
  o.has_target_device = 1;
  o.target_device = cpu();
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, &o, &m), DLB_OK) << dlb_last_error_message();
  EXPECT_EQ(m->dl_tensor.device.device_type, kDLCPU);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(static_cast<float*>(m->dl_tensor.data)[i], want[i]) << i;
  m->deleter(m);
  // The resolver agrees: already readable on the CPU, no copy needed; the
  // same memory, relabelled.
  o.copy = DLB_COPY_IF_NEEDED;
  dlb_buffer* r = nullptr;
  ASSERT_EQ(dlb_buffer_resolve(b, &o, &r), DLB_OK);
  ASSERT_NE(r, b);
  ASSERT_EQ(dlb_buffer_dltensor(r, &t), DLB_OK);
  EXPECT_EQ(t.device.device_type, kDLCPU);
  EXPECT_EQ(t.data, f.data());
  EXPECT_EQ(dlb_buffer_flags(r), 0u);
  dlb_buffer_release(r);
  dlb_buffer_release(b);
  EXPECT_EQ(f.deleter_calls.load(), 1);
}

TEST_F(Storage, DefaultExportsAgreeWithTheExplicitDefaultsForEveryKind) {
  // For each kind of storage, a NULL-options export (the cached plan) and
  // one with dlb_export_options_init's defaults (the planner) give the same
  // status, flags, device and data.
  std::vector<float> data(9, 1.0f);  // 8 elements after a 4-byte offset
  int64_t shape[1] = {8};
  DLTensor view{data.data(), cpu(), 1, f32(), shape, nullptr, 4};
  std::vector<dlb_buffer*> buffers;
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&view, 0, nullptr, nullptr, &b), DLB_OK);
  buffers.push_back(b);
  ASSERT_EQ(dlb_buffer_wrap(&view, DLB_BUFFER_READ_ONLY, nullptr, nullptr, &b), DLB_OK);
  buffers.push_back(b);
  view.device = DLDevice{kDLCUDAHost, 0};
  ASSERT_EQ(dlb_buffer_wrap(&view, 0, nullptr, nullptr, &b), DLB_OK);
  buffers.push_back(b);
  ASSERT_EQ(dlb_buffer_alloc(cpu(), f32(), 1, shape, &b), DLB_OK);
  buffers.push_back(b);
  ForeignTensor f(f32(), {4}, {1}, 32, 8, DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED);
  ASSERT_EQ(dlb_import_versioned(f.as_versioned(), nullptr, &b), DLB_OK);
  buffers.push_back(b);
  dlb_export_options defaults;
  dlb_export_options_init(&defaults);
  for (dlb_buffer* buf : buffers) {
    for (int legacy = 0; legacy < 2; ++legacy) {
      DLManagedTensorVersioned* a = nullptr;
      DLManagedTensorVersioned* d = nullptr;
      DLManagedTensor* la = nullptr;
      DLManagedTensor* ld = nullptr;
      if (legacy != 0) {
        const dlb_status s1 = dlb_export_legacy(buf, nullptr, &la);
        const dlb_status s2 = dlb_export_legacy(buf, &defaults, &ld);
        ASSERT_EQ(s1, s2);
        ASSERT_EQ(s1, DLB_OK);
        // Read-only memory goes out in a legacy export as a copy (one each);
        // other memory is shared by both.
        DLTensor held;
        ASSERT_EQ(dlb_buffer_dltensor(buf, &held), DLB_OK);
        const void* origin = static_cast<const char*>(held.data) + held.byte_offset;
        const bool copied = (dlb_buffer_flags(buf) & DLB_BUFFER_READ_ONLY) != 0;
        EXPECT_EQ(la->dl_tensor.data != origin, copied);
        EXPECT_EQ(ld->dl_tensor.data != origin, copied);
        if (!copied) {
          EXPECT_EQ(la->dl_tensor.data, ld->dl_tensor.data);
        }
        EXPECT_EQ(la->dl_tensor.byte_offset, ld->dl_tensor.byte_offset);
        EXPECT_EQ(la->dl_tensor.device.device_type, ld->dl_tensor.device.device_type);
        la->deleter(la);
        ld->deleter(ld);
      } else {
        ASSERT_EQ(dlb_export_versioned(buf, nullptr, &a), DLB_OK);
        ASSERT_EQ(dlb_export_versioned(buf, &defaults, &d), DLB_OK);
        EXPECT_EQ(a->flags, d->flags);
        EXPECT_EQ(a->dl_tensor.data, d->dl_tensor.data);
        EXPECT_EQ(a->dl_tensor.byte_offset, d->dl_tensor.byte_offset);
        EXPECT_EQ(a->dl_tensor.device.device_type, d->dl_tensor.device.device_type);
        a->deleter(a);
        d->deleter(d);
      }
    }
    dlb_buffer_release(buf);
  }
  EXPECT_EQ(f.deleter_calls.load(), 1);
}

namespace {

// A backend whose storage changes layout while the buffer lives (a
// storage that gets retiled): the default plan cannot be cached.
struct Shifting {
  std::atomic<int32_t> layout{DLB_LAYOUT_STRIDED};
  std::vector<float> memory = std::vector<float>(4, 7.0f);
  std::atomic<int> acquires{0}, releases{0};
};
int32_t shifting_acquire(void* ctx, void*, void** data, void** ref) {
  auto* s = static_cast<Shifting*>(ctx);
  ++s->acquires;
  *data = s->memory.data();
  *ref = nullptr;
  return 0;
}
void shifting_release(void* ctx, void*, void*) { ++static_cast<Shifting*>(ctx)->releases; }
int32_t shifting_layout(void* ctx, void*) { return static_cast<Shifting*>(ctx)->layout.load(); }
int32_t shifting_copy(void* ctx, void*, void* dst, uint64_t size) {
  std::memcpy(dst, static_cast<Shifting*>(ctx)->memory.data(), size);
  return 0;
}

}  // namespace

TEST_F(Storage, ADefaultExportFollowsABackendLayoutThatChanges) {
  Shifting s;
  dlb_backend_vtable vt;
  std::memset(&vt, 0, sizeof vt);
  vt.struct_size = sizeof vt;
  vt.name = "shifting";
  vt.acquire_access = shifting_acquire;
  vt.release_access = shifting_release;
  vt.query_layout = shifting_layout;
  vt.copy_to_host = shifting_copy;
  dlb_backend* be = nullptr;
  ASSERT_EQ(dlb_backend_create(&vt, &s, &be), DLB_OK);
  int64_t shape[1] = {4};
  DLTensor layout{nullptr, cpu(), 1, f32(), shape, nullptr, 0};
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_from_backend(be, nullptr, &layout, 0, &b), DLB_OK);
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
  EXPECT_EQ(m->dl_tensor.data, s.memory.data());  // zero-copy
  EXPECT_EQ(m->flags, 0u);
  m->deleter(m);
  s.layout = DLB_LAYOUT_TILED;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
  EXPECT_NE(m->dl_tensor.data, s.memory.data());  // now a copy
  EXPECT_EQ(m->flags, DLPACK_FLAG_BITMASK_IS_COPIED);
  EXPECT_EQ(static_cast<float*>(m->dl_tensor.data)[3], 7.0f);
  m->deleter(m);
  EXPECT_EQ(s.acquires.load(), 1);
  EXPECT_EQ(s.releases.load(), 1);
  dlb_buffer_release(b);
  dlb_backend_release(be);
}

TEST_F(Storage, ABackendStorageWithAnOffsetExportsItFolded) {
  Shifting s;
  std::iota(s.memory.begin(), s.memory.end(), 0.0f);
  dlb_backend_vtable vt;
  std::memset(&vt, 0, sizeof vt);
  vt.struct_size = sizeof vt;
  vt.name = "offset";
  vt.acquire_access = shifting_acquire;
  vt.release_access = shifting_release;
  dlb_backend* be = nullptr;
  ASSERT_EQ(dlb_backend_create(&vt, &s, &be), DLB_OK);
  int64_t shape[1] = {2};
  DLTensor layout{nullptr, cpu(), 1, f32(), shape, nullptr, 2 * sizeof(float)};
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_from_backend(be, nullptr, &layout, 0, &b), DLB_OK);
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
  EXPECT_EQ(m->dl_tensor.byte_offset, 0u);
  EXPECT_EQ(static_cast<float*>(m->dl_tensor.data)[0], 2.0f);
  EXPECT_EQ(static_cast<float*>(m->dl_tensor.data)[1], 3.0f);
  m->deleter(m);
  dlb_buffer_release(b);
  dlb_backend_release(be);
}

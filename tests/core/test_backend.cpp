// Backends and the host-copy fallback: the seed's failures as tests, with
// two test backends: "remote" (copy-only, like a proxy runtime) and "tiles"
// (zero-copy access, but some storages are tiled or multi-part).
#include <atomic>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "support.hpp"

using namespace dlbtest;

namespace {

// ---- "remote": memory reachable only through copy_to_host --------------
struct RemoteCtx {
  std::atomic<int> copies{0}, frees{0}, destroys{0}, waits{0};
  std::atomic<bool> fail_copy{false};
};
struct RemoteStorage {
  std::vector<float> values;
};

int32_t remote_copy(void* ctx, void* storage, void* dst, uint64_t size) {
  auto* c = static_cast<RemoteCtx*>(ctx);
  auto* s = static_cast<RemoteStorage*>(storage);
  if (c->fail_copy.load()) {
    dlb_backend_set_error("link to the remote store is down");
    return 5;
  }
  if (size != s->values.size() * sizeof(float)) return 1;
  std::memcpy(dst, s->values.data(), size);
  ++c->copies;
  return 0;
}
int32_t remote_wait(void* ctx, void*, int64_t) {
  ++static_cast<RemoteCtx*>(ctx)->waits;
  return 0;
}
void remote_free(void* ctx, void* storage) {
  ++static_cast<RemoteCtx*>(ctx)->frees;
  delete static_cast<RemoteStorage*>(storage);
}
void remote_destroy(void* ctx) { ++static_cast<RemoteCtx*>(ctx)->destroys; }

dlb_backend* make_remote(RemoteCtx* ctx) {
  dlb_backend_vtable vt;
  std::memset(&vt, 0, sizeof vt);
  vt.struct_size = sizeof vt;
  vt.name = "remote";
  vt.copy_to_host = remote_copy;
  vt.wait_ready = remote_wait;
  vt.free_storage = remote_free;
  vt.destroy = remote_destroy;
  dlb_backend* be = nullptr;
  EXPECT_EQ(dlb_backend_create(&vt, ctx, &be), DLB_OK);
  return be;
}

// A 2x3 float32 storage on "cuda:0" of the remote backend.
dlb_buffer* remote_buffer(dlb_backend* be, uint64_t flags = 0) {
  auto* s = new RemoteStorage{{1, 2, 3, 4, 5, 6}};
  int64_t shape[2] = {2, 3};
  DLTensor layout{nullptr, DLDevice{kDLCUDA, 0}, 2, f32(), shape, nullptr, 0};
  dlb_buffer* b = nullptr;
  EXPECT_EQ(dlb_buffer_from_backend(be, s, &layout, flags, &b), DLB_OK);
  return b;
}

// ---- "tiles": zero-copy access to host memory, some storages tiled ------
struct TilesCtx {
  std::atomic<int> acquires{0}, releases{0}, waits{0}, copies{0}, frees{0};
  std::atomic<bool> fail_acquire{false}, fail_wait{false};
};
struct TilesStorage {
  int32_t layout = DLB_LAYOUT_STRIDED;
  bool pending = true;        // writes not yet finished until wait_ready
  std::vector<float> memory;  // 4x4: row-major, or 2x2 tiles of 2x2 when tiled
};

int32_t tiles_acquire(void* ctx, void* storage, void** data, void** ref) {
  auto* c = static_cast<TilesCtx*>(ctx);
  if (c->fail_acquire.load()) {
    dlb_backend_set_error("device lost");
    return 2;
  }
  ++c->acquires;
  *data = static_cast<TilesStorage*>(storage)->memory.data();
  *ref = storage;
  return 0;
}
void tiles_release(void* ctx, void*, void*) { ++static_cast<TilesCtx*>(ctx)->releases; }
int32_t tiles_wait(void* ctx, void* storage, int64_t) {
  auto* c = static_cast<TilesCtx*>(ctx);
  if (c->fail_wait.load()) return 9;
  ++c->waits;
  auto* s = static_cast<TilesStorage*>(storage);
  if (s->pending) {
    // The "kernel" that was still writing finishes now.
    for (std::size_t i = 0; i < s->memory.size(); ++i) s->memory[i] += 100.0f;
    s->pending = false;
  }
  return 0;
}
int32_t tiles_copy(void* ctx, void* storage, void* dst, uint64_t size) {
  auto* s = static_cast<TilesStorage*>(storage);
  if (size != 16 * sizeof(float)) return 1;
  float* out = static_cast<float*>(dst);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) {
      const int tile = (r / 2) * 2 + c / 2;
      const int within = (r % 2) * 2 + c % 2;
      out[r * 4 + c] = s->layout == DLB_LAYOUT_TILED ? s->memory[static_cast<std::size_t>(tile * 4 + within)]
                                                      : s->memory[static_cast<std::size_t>(r * 4 + c)];
    }
  ++static_cast<TilesCtx*>(ctx)->copies;
  return 0;
}
void tiles_free(void* ctx, void* storage) {
  ++static_cast<TilesCtx*>(ctx)->frees;
  delete static_cast<TilesStorage*>(storage);
}
int32_t tiles_layout(void*, void* storage) { return static_cast<TilesStorage*>(storage)->layout; }

dlb_backend* make_tiles(TilesCtx* ctx) {
  dlb_backend_vtable vt;
  std::memset(&vt, 0, sizeof vt);
  vt.struct_size = sizeof vt;
  vt.name = "tiles";
  vt.acquire_access = tiles_acquire;
  vt.release_access = tiles_release;
  vt.wait_ready = tiles_wait;
  vt.copy_to_host = tiles_copy;
  vt.free_storage = tiles_free;
  vt.query_layout = tiles_layout;
  dlb_backend* be = nullptr;
  EXPECT_EQ(dlb_backend_create(&vt, ctx, &be), DLB_OK);
  return be;
}

// A 4x4 float32 storage whose logical value at (r, c) is 100 + r*4 + c once
// its pending writes finish.
dlb_buffer* tiles_buffer(dlb_backend* be, int32_t layout, uint64_t flags = 0) {
  auto* s = new TilesStorage;
  s->layout = layout;
  s->memory.resize(16);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) {
      const std::size_t at = layout == DLB_LAYOUT_TILED ? static_cast<std::size_t>(((r / 2) * 2 + c / 2) * 4 + (r % 2) * 2 + c % 2)
                                                        : static_cast<std::size_t>(r * 4 + c);
      s->memory[at] = static_cast<float>(r * 4 + c);
    }
  int64_t shape[2] = {4, 4};
  DLTensor layout_t{nullptr, cpu(), 2, f32(), shape, nullptr, 0};
  dlb_buffer* b = nullptr;
  EXPECT_EQ(dlb_buffer_from_backend(be, s, &layout_t, flags, &b), DLB_OK);
  return b;
}

void expect_logical_values(const DLManagedTensorVersioned* m) {
  const float* v = static_cast<const float*>(m->dl_tensor.data);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(v[i], 100.0f + static_cast<float>(i)) << i;
}

}  // namespace

class Backend : public DlbTest {};

TEST_F(Backend, CopyOnlyBackendExportsAHostCopyByDefault) {
  RemoteCtx ctx;
  dlb_backend* be = make_remote(&ctx);
  dlb_buffer* b = remote_buffer(be);
  EXPECT_EQ(dlb_buffer_flags(b), DLB_BUFFER_BACKEND);
  DLTensor view;
  ASSERT_EQ(dlb_buffer_dltensor(b, &view), DLB_OK);
  EXPECT_EQ(view.data, nullptr);
  EXPECT_EQ(view.device.device_type, kDLCUDA);
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
  EXPECT_EQ(m->flags, DLPACK_FLAG_BITMASK_IS_COPIED);
  EXPECT_EQ(m->dl_tensor.device.device_type, kDLCPU);
  EXPECT_EQ(m->dl_tensor.device.device_id, 0);
  const float* v = static_cast<const float*>(m->dl_tensor.data);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(v[i], static_cast<float>(i + 1));
  EXPECT_EQ(ctx.copies.load(), 1);
  EXPECT_EQ(ctx.waits.load(), 1);
  DLManagedTensor* l = nullptr;
  ASSERT_EQ(dlb_export_legacy(b, nullptr, &l), DLB_OK);
  EXPECT_EQ(l->dl_tensor.device.device_type, kDLCPU);
  l->deleter(l);
  m->deleter(m);
  dlb_buffer_release(b);
  EXPECT_EQ(ctx.frees.load(), 1);
  EXPECT_EQ(ctx.destroys.load(), 0);  // the caller still holds the backend
  dlb_backend_release(be);
  EXPECT_EQ(ctx.destroys.load(), 1);
}

TEST_F(Backend, CopyOnlyBackendWithCopyForbiddenNamesBackendAndRemedy) {
  RemoteCtx ctx;
  dlb_backend* be = make_remote(&ctx);
  dlb_buffer* b = remote_buffer(be);
  const dlb_export_options never = opts(DLB_COPY_NEVER);
  DLManagedTensorVersioned* m = nullptr;
  EXPECT_EQ(dlb_export_versioned(b, &never, &m), DLB_ERR_NOT_ZERO_COPY);
  EXPECT_TRUE(MessageContains("backend 'remote' has no zero-copy access"));
  EXPECT_TRUE(MessageContains("copy was forbidden"));
  EXPECT_TRUE(MessageContains("allow a copy"));
  EXPECT_TRUE(MessageContains("CPU device"));
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(ctx.copies.load(), 0);
  // Asking for the CPU device with copy forbidden is refused too.
  dlb_export_options cpu_never = never;
  cpu_never.has_target_device = 1;
  cpu_never.target_device = cpu();
  EXPECT_EQ(dlb_export_versioned(b, &cpu_never, &m), DLB_ERR_NOT_ZERO_COPY);
  // Its own device cannot be reached without zero-copy access either.
  dlb_export_options same = opts(DLB_COPY_IF_NEEDED);
  same.has_target_device = 1;
  same.target_device = DLDevice{kDLCUDA, 0};
  EXPECT_EQ(dlb_export_versioned(b, &same, &m), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("host memory"));
  dlb_buffer_release(b);
  dlb_backend_release(be);
  EXPECT_EQ(ctx.frees.load(), 1);
}

TEST_F(Backend, TargetCpuCopiesThroughTheBackend) {
  RemoteCtx ctx;
  dlb_backend* be = make_remote(&ctx);
  dlb_buffer* b = remote_buffer(be);
  dlb_export_options o = opts(DLB_COPY_IF_NEEDED);
  o.has_target_device = 1;
  o.target_device = cpu();
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, &o, &m), DLB_OK);
  EXPECT_EQ(m->dl_tensor.device.device_type, kDLCPU);
  EXPECT_EQ(static_cast<float*>(m->dl_tensor.data)[5], 6.0f);
  m->deleter(m);
  dlb_buffer* h = nullptr;
  ASSERT_EQ(dlb_buffer_to_host(b, &h), DLB_OK);
  DLTensor t;
  ASSERT_EQ(dlb_buffer_dltensor(h, &t), DLB_OK);
  EXPECT_EQ(t.device.device_type, kDLCPU);
  EXPECT_EQ(static_cast<float*>(t.data)[0], 1.0f);
  dlb_buffer_release(h);
  dlb_buffer_release(b);
  dlb_backend_release(be);
}

TEST_F(Backend, DeletedBackendBufferIsRefused) {
  RemoteCtx ctx;
  dlb_backend* be = make_remote(&ctx);
  dlb_buffer* b = remote_buffer(be);
  ASSERT_EQ(dlb_buffer_delete(b), DLB_OK);
  DLManagedTensorVersioned* m = nullptr;
  EXPECT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_ERR_DELETED);
  EXPECT_TRUE(MessageContains("buffer was deleted"));
  dlb_buffer* h = nullptr;
  EXPECT_EQ(dlb_buffer_to_host(b, &h), DLB_ERR_DELETED);
  dlb_buffer_release(b);
  dlb_backend_release(be);
  EXPECT_EQ(ctx.frees.load(), 1);
}

TEST_F(Backend, FailingCopyGivesBackendErrorAndLeaksNothing) {
  RemoteCtx ctx;
  dlb_backend* be = make_remote(&ctx);
  dlb_buffer* b = remote_buffer(be);
  ctx.fail_copy = true;
  DLManagedTensorVersioned* m = nullptr;
  EXPECT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_ERR_BACKEND);
  EXPECT_TRUE(MessageContains("backend 'remote': copy_to_host failed (returned 5): link to the remote store is down"));
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(dlb_buffer_refcount(b), 1);
  dlb_buffer* h = nullptr;
  EXPECT_EQ(dlb_buffer_to_host(b, &h), DLB_ERR_BACKEND);
  EXPECT_EQ(h, nullptr);
  ctx.fail_copy = false;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);  // usable again
  m->deleter(m);
  dlb_buffer_release(b);
  dlb_backend_release(be);
  EXPECT_EQ(ctx.frees.load(), 1);
}

TEST_F(Backend, ZeroCopyAccessIsHeldUntilTheDeleterAndReadinessIsAwaitedFirst) {
  TilesCtx ctx;
  dlb_backend* be = make_tiles(&ctx);
  dlb_buffer* b = tiles_buffer(be, DLB_LAYOUT_STRIDED);
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
  EXPECT_EQ(m->flags, 0u);
  EXPECT_EQ(ctx.waits.load(), 1);
  expect_logical_values(m);  // the pending writes were finished before hand-out
  EXPECT_EQ(ctx.acquires.load(), 1);
  EXPECT_EQ(ctx.releases.load(), 0);
  EXPECT_EQ(ctx.copies.load(), 0);
  dlb_buffer_release(b);
  EXPECT_EQ(ctx.frees.load(), 0);  // the export keeps the storage
  DLManagedTensorVersioned* m2 = nullptr;
  (void)m2;
  m->deleter(m);
  EXPECT_EQ(ctx.releases.load(), 1);
  EXPECT_EQ(ctx.frees.load(), 1);
  dlb_backend_release(be);
}

TEST_F(Backend, ReadinessIsAwaitedPerExportOrOnceForImmutableStorages) {
  TilesCtx ctx;
  dlb_backend* be = make_tiles(&ctx);
  dlb_buffer* b = tiles_buffer(be, DLB_LAYOUT_STRIDED);
  dlb_buffer* im = tiles_buffer(be, DLB_LAYOUT_STRIDED, DLB_BUFFER_IMMUTABLE);
  for (int i = 0; i < 3; ++i) {
    DLManagedTensorVersioned* m = nullptr;
    ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
    m->deleter(m);
    ASSERT_EQ(dlb_export_versioned(im, nullptr, &m), DLB_OK);
    expect_logical_values(m);
    m->deleter(m);
  }
  EXPECT_EQ(ctx.waits.load(), 3 + 1);
  EXPECT_EQ(ctx.acquires.load(), 6);
  EXPECT_EQ(ctx.releases.load(), 6);
  dlb_buffer_release(b);
  dlb_buffer_release(im);
  dlb_backend_release(be);
  EXPECT_EQ(ctx.frees.load(), 2);
}

TEST_F(Backend, TiledAndMultiPartStoragesNeedACopy) {
  TilesCtx ctx;
  dlb_backend* be = make_tiles(&ctx);
  for (int32_t layout : {DLB_LAYOUT_TILED, DLB_LAYOUT_MULTI_PART, DLB_LAYOUT_DYNAMIC}) {
    SCOPED_TRACE(layout);
    dlb_buffer* b = tiles_buffer(be, layout);
    const dlb_export_options never = opts(DLB_COPY_NEVER);
    DLManagedTensorVersioned* m = nullptr;
    EXPECT_EQ(dlb_export_versioned(b, &never, &m), DLB_ERR_UNSUPPORTED_LAYOUT);
    EXPECT_TRUE(MessageContains("backend 'tiles' keeps this storage"));
    EXPECT_TRUE(MessageContains("allow a copy"));
    if (layout == DLB_LAYOUT_TILED) {
      EXPECT_TRUE(MessageContains("tiled"));
    }
    if (layout == DLB_LAYOUT_MULTI_PART) {
      EXPECT_TRUE(MessageContains("multi-part"));
    }
    ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
    EXPECT_EQ(m->flags, DLPACK_FLAG_BITMASK_IS_COPIED);
    expect_logical_values(m);  // untiled by the backend's copy
    m->deleter(m);
    dlb_buffer_release(b);
  }
  EXPECT_EQ(ctx.acquires.load(), 0);
  EXPECT_EQ(ctx.copies.load(), 3);
  dlb_backend_release(be);
  EXPECT_EQ(ctx.frees.load(), 3);
}

TEST_F(Backend, CopyAlwaysOnAZeroCopyBackend) {
  TilesCtx ctx;
  dlb_backend* be = make_tiles(&ctx);
  dlb_buffer* b = tiles_buffer(be, DLB_LAYOUT_STRIDED);
  const dlb_export_options always = opts(DLB_COPY_ALWAYS);
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, &always, &m), DLB_OK);
  EXPECT_EQ(m->flags, DLPACK_FLAG_BITMASK_IS_COPIED);
  expect_logical_values(m);
  m->deleter(m);
  dlb_buffer_release(b);
  dlb_backend_release(be);
}

TEST_F(Backend, FailingAcquireOrWaitLeavesNothingBehind) {
  TilesCtx ctx;
  dlb_backend* be = make_tiles(&ctx);
  dlb_buffer* b = tiles_buffer(be, DLB_LAYOUT_STRIDED);
  ctx.fail_acquire = true;
  DLManagedTensorVersioned* m = nullptr;
  EXPECT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_ERR_BACKEND);
  EXPECT_TRUE(MessageContains("backend 'tiles': acquire_access failed (returned 2): device lost"));
  ctx.fail_acquire = false;
  ctx.fail_wait = true;
  EXPECT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_ERR_BACKEND);
  EXPECT_TRUE(MessageContains("wait_ready failed (returned 9)"));
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(ctx.acquires.load(), ctx.releases.load());
  EXPECT_EQ(dlb_buffer_refcount(b), 1);
  dlb_buffer_release(b);
  dlb_backend_release(be);
  EXPECT_EQ(ctx.frees.load(), 1);
}

TEST_F(Backend, BadVtablesAndLayouts) {
  dlb_backend_vtable vt;
  std::memset(&vt, 0, sizeof vt);
  dlb_backend* be = nullptr;
  EXPECT_EQ(dlb_backend_create(&vt, nullptr, &be), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("struct_size"));
  vt.struct_size = sizeof vt;
  EXPECT_EQ(dlb_backend_create(&vt, nullptr, &be), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("name"));
  vt.name = "half";
  vt.acquire_access = tiles_acquire;
  EXPECT_EQ(dlb_backend_create(&vt, nullptr, &be), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("release_access"));
  EXPECT_EQ(be, nullptr);
  vt.acquire_access = nullptr;
  ASSERT_EQ(dlb_backend_create(&vt, nullptr, &be), DLB_OK);  // no callbacks at all is legal
  int64_t bad[1] = {-1};
  DLTensor layout{nullptr, cpu(), 1, f32(), bad, nullptr, 0};
  dlb_buffer* b = nullptr;
  EXPECT_EQ(dlb_buffer_from_backend(be, nullptr, &layout, 0, &b), DLB_ERR_MALFORMED);
  int64_t ok[1] = {2};
  layout.shape = ok;
  EXPECT_EQ(dlb_buffer_from_backend(be, nullptr, &layout, DLB_BUFFER_DELETED, &b), DLB_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(dlb_buffer_from_backend(be, nullptr, &layout, 0, &b), DLB_OK);
  DLManagedTensorVersioned* m = nullptr;
  EXPECT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("backend 'half' has no copy_to_host"));
  dlb_buffer_release(b);
  dlb_backend_release(be);
  dlb_backend_release(nullptr);
  EXPECT_EQ(dlb_backend_retain(nullptr), nullptr);
}

TEST_F(Backend, ManyThreadsExportOneBackendBuffer) {
  TilesCtx tctx;
  RemoteCtx rctx;
  dlb_backend* tiles = make_tiles(&tctx);
  dlb_backend* remote = make_remote(&rctx);
  dlb_buffer* zb = tiles_buffer(tiles, DLB_LAYOUT_STRIDED, DLB_BUFFER_IMMUTABLE);
  dlb_buffer* cb = remote_buffer(remote);
  const int n = static_cast<int>(iterations(4000) / 8 + 1);
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < n; ++i) {
        DLManagedTensorVersioned* a = nullptr;
        DLManagedTensorVersioned* c = nullptr;
        if (dlb_export_versioned(zb, nullptr, &a) != DLB_OK) ++bad;
        if (dlb_export_versioned(cb, nullptr, &c) != DLB_OK) ++bad;
        if (static_cast<float*>(a->dl_tensor.data)[15] != 115.0f) ++bad;
        if (static_cast<float*>(c->dl_tensor.data)[5] != 6.0f) ++bad;
        a->deleter(a);
        c->deleter(c);
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(tctx.acquires.load(), 8 * n);
  EXPECT_EQ(tctx.releases.load(), 8 * n);
  EXPECT_EQ(tctx.waits.load(), 1);  // immutable: awaited once
  dlb_buffer_release(zb);
  dlb_buffer_release(cb);
  dlb_backend_release(tiles);
  dlb_backend_release(remote);
  EXPECT_EQ(tctx.frees.load(), 1);
  EXPECT_EQ(rctx.frees.load(), 1);
}

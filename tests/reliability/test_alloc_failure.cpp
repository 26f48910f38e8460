// Allocation-failure injection: for every allocation a successful call
// makes, a run where exactly that allocation (and every later one) fails.
// Each such run must return DLB_ERR_OUT_OF_MEMORY, leave `out` untouched,
// run no deleter, release callback or backend free twice (or at all, when
// the caller still owns what it passed), leave dlb_live_exports() and the
// buffer's reference count as they were, and leave the buffer usable.
// Leaks show up under valgrind and ASan (scripts/test.d/21-valgrind.sh).
#include <dlbridge/dlbridge.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "core/alloc.hpp"

namespace {

namespace inj = dlb::testing;

int g_deleter_calls = 0;
int g_release_calls = 0;

void count_release(void*) { ++g_release_calls; }

// What one sweep needs: a call that allocates, and how to undo its success.
struct Sweep {
  const char* what;
  std::function<dlb_status()> call;
  std::function<void()> undo;  // after a success
  std::function<void()> after_failure = [] {};
};

// Counts the allocations of one successful call, then fails each of them
// in turn. Returns the count (so callers can assert something was swept).
std::int64_t sweep(const Sweep& s) {
  inj::drop_thread_caches();
  inj::fail_allocation_after(-1);  // count without failing
  const dlb_status first = s.call();
  const std::int64_t count = inj::allocations_attempted();
  inj::fail_allocation_after(0);
  EXPECT_EQ(first, DLB_OK) << s.what << ": " << dlb_last_error_message();
  std::printf("%-26s %lld allocation(s), each failed in turn\n", s.what, static_cast<long long>(count));
  if (first != DLB_OK) return 0;
  s.undo();
  for (std::int64_t n = 1; n <= count + 1; ++n) {
    inj::drop_thread_caches();
    const std::int64_t live = dlb_live_exports();
    dlb_clear_last_error();
    inj::fail_allocation_after(n);
    const dlb_status st = s.call();
    inj::fail_allocation_after(0);
    if (n <= count) {
      EXPECT_EQ(st, DLB_ERR_OUT_OF_MEMORY) << s.what << ": allocation " << n << " of " << count;
      EXPECT_EQ(dlb_last_error_code(), st) << s.what << " n=" << n;
      EXPECT_STRNE(dlb_last_error_message(), "") << s.what << " n=" << n;
      EXPECT_EQ(dlb_live_exports(), live) << s.what << " n=" << n;
      if (st == DLB_OK) s.undo();
      else s.after_failure();
    } else {
      EXPECT_EQ(st, DLB_OK) << s.what << " with " << n << " allowed";
      if (st == DLB_OK) s.undo();
    }
  }
  return count;
}

dlb_buffer* make_host_buffer(std::vector<std::int64_t> shape, DLDataType dt = {kDLFloat, 32, 1}) {
  dlb_buffer* b = nullptr;
  EXPECT_EQ(dlb_buffer_alloc(DLDevice{kDLCPU, 0}, dt, static_cast<std::int32_t>(shape.size()), shape.data(), &b),
            DLB_OK);
  return b;
}

// The buffer still exports, zero-copy, and the export lets go of it.
void expect_usable(dlb_buffer* b) {
  const std::int64_t refs = dlb_buffer_refcount(b);
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK) << dlb_last_error_message();
  DLTensor v;
  ASSERT_EQ(dlb_buffer_dltensor(b, &v), DLB_OK);
  EXPECT_EQ(m->dl_tensor.data, v.data);
  m->deleter(m);
  EXPECT_EQ(dlb_buffer_refcount(b), refs);
}

class AllocFailure : public ::testing::Test {
 protected:
  void SetUp() override {
    g_deleter_calls = 0;
    g_release_calls = 0;
    live_ = dlb_live_exports();
  }
  void TearDown() override {
    inj::fail_allocation_after(0);
    EXPECT_EQ(dlb_live_exports(), live_);
  }
  std::int64_t live_ = 0;
};

TEST_F(AllocFailure, ExportVersionedAndLegacyZeroCopyAndCopied) {
  dlb_buffer* b = make_host_buffer({3, 5});
  ASSERT_NE(b, nullptr);
  for (int copy : {DLB_COPY_IF_NEEDED, DLB_COPY_ALWAYS}) {
    dlb_export_options o;
    dlb_export_options_init(&o);
    o.copy = copy;
    DLManagedTensorVersioned* mv = nullptr;
    DLManagedTensor* ml = nullptr;
    auto check_untouched = [&] {
      EXPECT_EQ(mv, nullptr);
      EXPECT_EQ(ml, nullptr);
      EXPECT_EQ(dlb_buffer_refcount(b), 1);
      expect_usable(b);
    };
    std::int64_t n = sweep({"export_versioned", [&] { return dlb_export_versioned(b, &o, &mv); },
                            [&] {
                              mv->deleter(mv);
                              mv = nullptr;
                            },
                            check_untouched});
    EXPECT_GE(n, 1);
    n = sweep({"export_legacy", [&] { return dlb_export_legacy(b, &o, &ml); },
               [&] {
                 ml->deleter(ml);
                 ml = nullptr;
               },
               check_untouched});
    EXPECT_GE(n, 1);
  }
  dlb_buffer_release(b);
}

// A producer's tensor that counts its deleter; reused across the sweep
// since a failed import leaves it with the caller.
struct Producer {
  std::vector<float> data = std::vector<float>(24, 1.5f);
  std::int64_t shape[3] = {2, 3, 4};
  std::int64_t strides[3] = {1, 2, 6};  // column-major
  DLManagedTensorVersioned v{};
  DLManagedTensor l{};
  Producer() {
    DLTensor t{};
    t.data = data.data();
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = 3;
    t.dtype = DLDataType{kDLFloat, 32, 1};
    t.shape = shape;
    t.strides = strides;
    v.version = DLPackVersion{1, 0};
    v.dl_tensor = t;
    v.deleter = [](DLManagedTensorVersioned*) { ++g_deleter_calls; };
    l.dl_tensor = t;
    l.deleter = [](DLManagedTensor*) { ++g_deleter_calls; };
  }
};

TEST_F(AllocFailure, ImportVersionedAndLegacy) {
  Producer p;
  dlb_buffer* out = nullptr;
  for (bool versioned : {true, false}) {
    std::int64_t n = sweep({versioned ? "import_versioned" : "import_legacy",
                            [&] {
                              return versioned ? dlb_import_versioned(&p.v, nullptr, &out)
                                               : dlb_import_legacy(&p.l, nullptr, &out);
                            },
                            [&] {
                              EXPECT_EQ(g_deleter_calls, 0);
                              // A re-export and a copy of the imported tensor work.
                              expect_usable(out);
                              dlb_buffer_release(out);
                              out = nullptr;
                              EXPECT_EQ(g_deleter_calls, 1);
                              g_deleter_calls = 0;
                            },
                            [&] {
                              EXPECT_EQ(out, nullptr);
                              EXPECT_EQ(g_deleter_calls, 0) << "the caller still owns a failed import";
                            }});
    EXPECT_GE(n, 1);
  }
}

TEST_F(AllocFailure, WrapAllocAndToHost) {
  std::vector<std::int16_t> mem(64);
  for (std::size_t i = 0; i < mem.size(); ++i) mem[i] = static_cast<std::int16_t>(i);
  std::int64_t shape[2] = {4, 3};
  std::int64_t strides[2] = {1, 8};  // transposed-like, strided columns
  DLTensor view{};
  view.data = mem.data() + 3;
  view.device = DLDevice{kDLCPU, 0};
  view.ndim = 2;
  view.dtype = DLDataType{kDLInt, 16, 1};
  view.shape = shape;
  view.strides = strides;
  dlb_buffer* w = nullptr;
  std::int64_t n = sweep({"wrap", [&] { return dlb_buffer_wrap(&view, 0, count_release, nullptr, &w); },
                          [&] {
                            EXPECT_EQ(g_release_calls, 0);
                            dlb_buffer_release(w);
                            w = nullptr;
                            EXPECT_EQ(g_release_calls, 1);
                            g_release_calls = 0;
                          },
                          [&] {
                            EXPECT_EQ(w, nullptr);
                            EXPECT_EQ(g_release_calls, 0);
                          }});
  EXPECT_GE(n, 1);

  dlb_buffer* a = nullptr;
  std::int64_t ashape[3] = {2, 0, 5};
  n = sweep({"alloc",
             [&] { return dlb_buffer_alloc(DLDevice{kDLCPU, 0}, DLDataType{kDLFloat, 64, 1}, 3, ashape, &a); },
             [&] {
               dlb_buffer_release(a);
               a = nullptr;
             },
             [&] { EXPECT_EQ(a, nullptr); }});
  EXPECT_GE(n, 1);

  // to_host of the strided view: the copy must hold the right values after
  // any number of failed attempts.
  const dlb_status ws = dlb_buffer_wrap(&view, DLB_BUFFER_READ_ONLY, count_release, nullptr, &w);
  ASSERT_EQ(ws, DLB_OK) << dlb_last_error_message();
  dlb_buffer* h = nullptr;
  n = sweep({"to_host", [&] { return dlb_buffer_to_host(w, &h); },
             [&] {
               DLTensor t;
               ASSERT_EQ(dlb_buffer_dltensor(h, &t), DLB_OK);
               const auto* got = reinterpret_cast<const std::int16_t*>(static_cast<const char*>(t.data) + t.byte_offset);
               for (int i = 0; i < 4; ++i)
                 for (int j = 0; j < 3; ++j) EXPECT_EQ(got[i * 3 + j], 3 + i + 8 * j);
               dlb_buffer_release(h);
               h = nullptr;
             },
             [&] {
               EXPECT_EQ(h, nullptr);
               EXPECT_EQ(dlb_buffer_refcount(w), 1);
               expect_usable(w);
             }});
  EXPECT_GE(n, 1);
  EXPECT_EQ(g_release_calls, 0);
  dlb_buffer_release(w);
  EXPECT_EQ(g_release_calls, 1);
}

// A backend with no zero-copy access: storages export by copying.
struct CopyOnly {
  int frees = 0;
  int destroys = 0;
  static int32_t copy(void*, void* storage, void* dst, uint64_t dst_size) {
    std::memcpy(dst, storage, static_cast<std::size_t>(dst_size));
    return 0;
  }
  static void free_storage(void* ctx, void*) { ++static_cast<CopyOnly*>(ctx)->frees; }
  static void destroy(void* ctx) { ++static_cast<CopyOnly*>(ctx)->destroys; }
};

TEST_F(AllocFailure, BackendCreateBufferAndCopiedExport) {
  CopyOnly state;
  dlb_backend_vtable vt;
  std::memset(&vt, 0, sizeof(vt));
  vt.struct_size = sizeof(vt);
  vt.name = "copy-only";
  vt.copy_to_host = &CopyOnly::copy;
  vt.free_storage = &CopyOnly::free_storage;
  vt.destroy = &CopyOnly::destroy;

  dlb_backend* be = nullptr;
  std::int64_t n = sweep({"backend_create", [&] { return dlb_backend_create(&vt, &state, &be); },
                          [&] {
                            dlb_backend_release(be);
                            be = nullptr;
                            EXPECT_EQ(state.destroys, 1);
                            state.destroys = 0;
                          },
                          [&] {
                            EXPECT_EQ(be, nullptr);
                            EXPECT_EQ(state.destroys, 0) << "destroy ran for a failed create";
                          }});
  EXPECT_GE(n, 1);
  ASSERT_EQ(dlb_backend_create(&vt, &state, &be), DLB_OK);

  std::vector<std::int32_t> storage(6);
  for (int i = 0; i < 6; ++i) storage[static_cast<std::size_t>(i)] = 10 * i;
  std::int64_t shape[2] = {2, 3};
  DLTensor layout{};
  layout.device = DLDevice{kDLCUDA, 0};
  layout.ndim = 2;
  layout.dtype = DLDataType{kDLInt, 32, 1};
  layout.shape = shape;
  dlb_buffer* b = nullptr;
  n = sweep({"buffer_from_backend", [&] { return dlb_buffer_from_backend(be, storage.data(), &layout, 0, &b); },
             [&] {
               dlb_buffer_release(b);
               b = nullptr;
               EXPECT_EQ(state.frees, 1);
               state.frees = 0;
             },
             [&] {
               EXPECT_EQ(b, nullptr);
               EXPECT_EQ(state.frees, 0) << "a failed call freed the caller's storage";
             }});
  EXPECT_GE(n, 1);

  ASSERT_EQ(dlb_buffer_from_backend(be, storage.data(), &layout, 0, &b), DLB_OK);
  dlb_export_options o;
  dlb_export_options_init(&o);
  o.has_target_device = 1;
  o.target_device = DLDevice{kDLCPU, 0};
  for (bool versioned : {true, false}) {
    DLManagedTensorVersioned* mv = nullptr;
    DLManagedTensor* ml = nullptr;
    n = sweep({versioned ? "backend export_versioned" : "backend export_legacy",
               [&] { return versioned ? dlb_export_versioned(b, &o, &mv) : dlb_export_legacy(b, &o, &ml); },
               [&] {
                 DLTensor& t = versioned ? mv->dl_tensor : ml->dl_tensor;
                 const auto* got = static_cast<const std::int32_t*>(t.data);
                 for (int i = 0; i < 6; ++i) EXPECT_EQ(got[i], 10 * i);
                 if (versioned) {
                   EXPECT_NE(mv->flags & DLPACK_FLAG_BITMASK_IS_COPIED, 0u);
                   mv->deleter(mv);
                 } else {
                   ml->deleter(ml);
                 }
                 mv = nullptr;
                 ml = nullptr;
               },
               [&] {
                 EXPECT_EQ(mv, nullptr);
                 EXPECT_EQ(ml, nullptr);
                 EXPECT_EQ(dlb_buffer_refcount(b), 1);
                 EXPECT_EQ(state.frees, 0);
               }});
    EXPECT_GE(n, 1);
  }
  dlb_buffer_release(b);
  EXPECT_EQ(state.frees, 1);
  dlb_backend_release(be);
  EXPECT_EQ(state.destroys, 1);
}

// An export handed back in (round trip through the library's own deleter).
TEST_F(AllocFailure, ReimportOfOwnExport) {
  dlb_buffer* b = make_host_buffer({7});
  ASSERT_NE(b, nullptr);
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
  dlb_buffer* r = nullptr;
  std::int64_t n = sweep({"reimport", [&] { return dlb_import_versioned(m, nullptr, &r); },
                          [&] {
                            // Releasing the re-import runs the export's deleter;
                            // make a fresh export for the next round.
                            dlb_buffer_release(r);
                            r = nullptr;
                            EXPECT_EQ(dlb_buffer_refcount(b), 1);
                            ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
                          },
                          [&] {
                            EXPECT_EQ(r, nullptr);
                            EXPECT_EQ(dlb_buffer_refcount(b), 2) << "the failed import dropped the export";
                          }});
  EXPECT_GE(n, 1);
  m->deleter(m);
  EXPECT_EQ(dlb_buffer_refcount(b), 1);
  dlb_buffer_release(b);
}

}  // namespace

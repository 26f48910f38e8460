// What the CUDA backend's files share: the loaded driver, its error words,
// the backend and storage objects, the storage table, and stream values.
// cuda_driver.cpp loads the driver, cuda_storage.cpp is the storage table,
// cuda_backend.cpp the entry points.
#ifndef DLBRIDGE_SRC_CUDA_CUDA_INTERNAL_HPP_
#define DLBRIDGE_SRC_CUDA_CUDA_INTERNAL_HPP_

#include <dlbridge/dlbridge.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "core/buffer.hpp"
#include "core/layout.hpp"
#include "cuda_driver.hpp"

namespace dlb {
namespace cuda {

using namespace cu;

// ---- the driver, loaded once (cuda_driver.cpp) ---------------------------

struct Driver {
#define DLB_CUDA_MEMBER(name, type) \
  using name##_fn = type;             \
  name##_fn name = nullptr;
  DLB_CUDA_DRIVER_FUNCTIONS(DLB_CUDA_MEMBER)
#undef DLB_CUDA_MEMBER
  bool usable = false;
  CUresult init_result = kSuccess;
  char why[384] = {0};  // why it is not usable
};

// libcuda.so.1, loaded with dlopen on the first call and kept for the life
// of the process once usable; without a usable driver every call tries
// again. The library names no other file: a test makes its fake driver
// the one found by loading it first (its SONAME is libcuda.so.1).
const Driver& driver() noexcept;

// DLB_ERR_UNSUPPORTED_DEVICE saying why there is no usable driver.
dlb_status no_driver() noexcept;

// For the entry points: the thread's last error, "cuda:N: <call> failed
// with <name> (<code>: <text>)"; DLB_ERR_OUT_OF_MEMORY for the driver's
// out-of-memory, else DLB_ERR_BACKEND.
dlb_status driver_error(std::int32_t device_id, const char* call, CUresult rc) noexcept;

// For the storage verbs: DLB_ERR_BACKEND, "backend 'cuda:N': <verb> failed
// (returned 1): <call> failed with ...".
dlb_status verb_error(const dlb_buffer* b, const char* verb, const char* call, CUresult rc) noexcept;
dlb_status verb_error_text(const dlb_buffer* b, const char* verb, const char* text) noexcept;

// ---- backend and storages -------------------------------------------------

struct CudaBackend {
  std::int32_t device_id = 0;
  CUdevice device = 0;
  CUcontext context = nullptr;
};

struct CudaStorage {
  CUdeviceptr ptr = 0;            // what the layout's byte_offset applies to
  std::int32_t device_type = 0;   // kDLCUDA, kDLCUDAHost, kDLCUDAManaged
  bool owned = false;             // allocated here (else release(ctx))
  dlb_release_fn release = nullptr;
  void* release_ctx = nullptr;
  std::atomic<std::int64_t> stream{1};  // last writer's stream value
  // The interprocess event dlb_buffer_share() records for CUDA IPC
  // receivers, made on the first share and destroyed with the storage.
  std::mutex ipc_mutex;
  CUevent ipc_event = nullptr;
  // The layout, for copy_to_host.
  DLDataType dtype{};
  std::int32_t ndim = 0;
  std::uint64_t byte_offset = 0;
  std::vector<std::int64_t> shape, strides;
  LayoutInfo info;
};

// The storage table of CUDA buffers (kind StorageKind::device), and the
// backend's destroy (releases the primary context).
extern const StorageOps kCudaStorage;
void destroy_backend(void* ctx) noexcept;

inline CudaBackend* cuda_backend_of(const dlb_buffer* b) noexcept {
  return static_cast<CudaBackend*>(b->owner.store.backend->ctx);
}
inline CudaStorage* cuda_storage_of(const dlb_buffer* b) noexcept {
  return static_cast<CudaStorage*>(b->owner.store.storage);
}

// The context made current for the scope of a driver call sequence, and the
// caller's restored after it.
class ContextScope {
 public:
  explicit ContextScope(CUcontext c) noexcept : rc_(driver().cuCtxPushCurrent_v2(c)) {}
  ~ContextScope() {
    if (rc_ == kSuccess) {
      CUcontext popped = nullptr;
      (void)driver().cuCtxPopCurrent_v2(&popped);
    }
  }
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;
  CUresult result() const noexcept { return rc_; }

 private:
  CUresult rc_;
};

// A stream value as a CUstream: 0 and 1 the legacy default stream, 2 the
// per-thread one, others a handle. -1 has no stream.
inline CUstream as_stream(std::int64_t value) noexcept {
  if (value == 0 || value == 1) return legacy_stream();
  if (value == 2) return per_thread_stream();
  return reinterpret_cast<CUstream>(static_cast<std::uintptr_t>(value));
}

}  // namespace cuda
}  // namespace dlb

#endif

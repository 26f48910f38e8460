// The storage table of OpenCL buffers: readiness ordered by the last
// writer's event, zero-copy access to the cl_mem handle, the copy to the
// host (rectangular reads of the compact blocks a strided view is made of,
// the strided copy engine for the rest), the copy from the host, freeing.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "core/alloc.hpp"
#include "core/backend.hpp"
#include "core/buffer.hpp"
#include "core/device.hpp"
#include "core/dtype.hpp"
#include "core/errors.hpp"
#include "opencl_backend.hpp"
#include "opencl_internal.hpp"

namespace dlb {
namespace opencl {

cl_event take_writer(OpenclStorage* s) noexcept {
  std::lock_guard<std::mutex> lock(s->mutex);
  if (s->writer != nullptr) (void)loader().clRetainEvent(s->writer);
  return s->writer;
}

void set_writer(OpenclStorage* s, cl_event event) noexcept {
  if (event != nullptr) (void)loader().clRetainEvent(event);
  cl_event old = nullptr;
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    old = s->writer;
    s->writer = event;
  }
  if (old != nullptr) (void)loader().clReleaseEvent(old);
}

namespace {

// Forgets `done`, a finished writer, unless a newer one replaced it.
void writer_finished(OpenclStorage* s, cl_event done) noexcept {
  bool was_current = false;
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    if (s->writer == done) {
      s->writer = nullptr;
      was_current = true;
    }
  }
  if (was_current) (void)loader().clReleaseEvent(done);
}

dlb_status acquire_access(dlb_buffer* b, void** data, void** ref) noexcept {
  *data = opencl_storage_of(b)->mem;
  *ref = nullptr;
  return DLB_OK;
}

void release_access(dlb_buffer*, void*) noexcept {}

// The consumer's stream of an export: DLB_STREAM_NONE (no stream) makes the
// host wait for the last writer's event; -1 waits for nothing; a
// cl_command_queue handle gets a barrier on that event, so its later
// commands run after the writer without the host waiting.
dlb_status wait_ready(dlb_buffer* b, std::int64_t consumer) noexcept {
  if (consumer == -1) return DLB_OK;
  if (consumer != DLB_STREAM_NONE && consumer <= 2)
    return set_error(DLB_ERR_INVALID_ARGUMENT,
                     "stream %" PRId64 " is not an OpenCL stream value: OpenCL memory takes a cl_command_queue handle "
                     "(its later commands wait for the buffer's last writer), -1 (no synchronisation) or no stream "
                     "(the host waits)",
                     consumer);
  const cl_command_queue queue =
      consumer == DLB_STREAM_NONE ? nullptr : reinterpret_cast<cl_command_queue>(static_cast<std::uintptr_t>(consumer));
  if (queue != nullptr && !live_handle(queue))
    return set_error(DLB_ERR_INVALID_ARGUMENT,
                     "stream 0x%" PRIx64 " is not a live cl_command_queue of an OpenCL platform the ICD loader lists",
                     static_cast<std::uint64_t>(consumer));
  OpenclStorage* s = opencl_storage_of(b);
  cl_event writer = take_writer(s);
  if (writer == nullptr) return DLB_OK;
  const Loader& l = loader();
  dlb_status st = DLB_OK;
  if (queue == nullptr) {
    const cl_int rc = l.clWaitForEvents(1, &writer);
    if (rc == kSuccess)
      writer_finished(s, writer);
    else
      st = verb_error(b, "wait_ready", "clWaitForEvents", rc);
  } else {
    const cl_int rc = l.clEnqueueBarrierWithWaitList(queue, 1, &writer, nullptr);
    if (rc != kSuccess) st = verb_error(b, "wait_ready", "clEnqueueBarrierWithWaitList", rc);
  }
  (void)l.clReleaseEvent(writer);
  return st;
}

// ---- the copy to the host -------------------------------------------------

// One dimension of a view, as the memory lays it out.
struct Dim {
  std::int64_t extent;
  std::int64_t stride;  // in elements
  std::int32_t index;   // its place in the view
};

// The reads of one copy, enqueued on the backend's queue after the writer's
// event; finish() waits for them all.
struct Reads {
  const Loader& l;
  const dlb_buffer* b;
  cl_command_queue queue;
  cl_mem mem;
  cl_event writer;  // or nullptr
  bool enqueued = false;

  // The wait list: the writer's event, or none (a NULL list, as OpenCL
  // asks of an empty one).
  cl_uint waits() const noexcept { return writer != nullptr ? 1u : 0u; }
  const cl_event* wait_list() const noexcept { return writer != nullptr ? &writer : nullptr; }

  dlb_status plain(std::size_t offset, std::size_t bytes, void* dst) noexcept {
    const cl_int rc = l.clEnqueueReadBuffer(queue, mem, kFalse, offset, bytes, dst, waits(), wait_list(), nullptr);
    if (rc != kSuccess) return verb_error(b, "copy_to_host", "clEnqueueReadBuffer", rc);
    count_read();
    enqueued = true;
    return DLB_OK;
  }

  dlb_status rect(std::size_t offset, const std::size_t region[3], std::size_t row_pitch, std::size_t slice_pitch,
                  void* dst) noexcept {
    const std::size_t buffer_origin[3] = {offset, 0, 0};
    const std::size_t host_origin[3] = {0, 0, 0};
    const cl_int rc =
        l.clEnqueueReadBufferRect(queue, mem, kFalse, buffer_origin, host_origin, region, row_pitch, slice_pitch,
                                  region[0], region[0] * region[1], dst, waits(), wait_list(), nullptr);
    if (rc != kSuccess) return verb_error(b, "copy_to_host", "clEnqueueReadBufferRect", rc);
    count_read();
    enqueued = true;
    return DLB_OK;
  }

  // Waits for every read enqueued (also after a failed one: they write
  // into memory the caller is about to free).
  dlb_status finish(dlb_status so_far) noexcept {
    if (!enqueued) return so_far;
    const cl_int rc = l.clFinish(queue);
    if (so_far != DLB_OK) return so_far;
    return rc == kSuccess ? DLB_OK : verb_error(b, "copy_to_host", "clFinish", rc);
  }
};

// The elements of a view whose dimensions `dims` (sorted by stride, nested
// without overlap: each stride at least the extent of the one before) start
// `origin` bytes into the buffer, read compact in that memory order into
// `out`: the innermost dimensions that are contiguous form one block, the
// next two the rows and slices of one rectangular read, and each further
// dimension's index one such read.
dlb_status read_nested(Reads& r, const Dim* dims, std::int32_t n, std::uint64_t elem, std::uint64_t origin,
                       unsigned char* out) noexcept {
  std::int64_t block = 1;
  std::int32_t c = 0;
  while (c < n && dims[c].stride == block) block *= dims[c++].extent;
  const std::size_t block_bytes = static_cast<std::size_t>(block) * elem;
  if (c == n) return r.plain(origin, block_bytes, out);
  // Rows: dims[c]; slices: dims[c + 1] when its stride is a multiple of the
  // rows' (OpenCL's rule for a slice pitch).
  const Dim& row = dims[c];
  const bool slices = c + 1 < n && dims[c + 1].stride % row.stride == 0;
  const std::size_t region[3] = {block_bytes, static_cast<std::size_t>(row.extent),
                                 slices ? static_cast<std::size_t>(dims[c + 1].extent) : 1};
  const std::size_t row_pitch = static_cast<std::size_t>(row.stride) * elem;
  const std::size_t slice_pitch = slices ? static_cast<std::size_t>(dims[c + 1].stride) * elem : 0;
  const std::size_t piece = region[0] * region[1] * region[2];
  // The dimensions outside one rectangle, walked as an odometer.
  const std::int32_t first_outer = c + (slices ? 2 : 1);
  std::int64_t index[DLB_MAX_NDIM] = {0};
  std::uint64_t offset = origin;
  unsigned char* at = out;
  for (;;) {
    DLB_TRY(r.rect(static_cast<std::size_t>(offset), region, row_pitch, slice_pitch, at));
    at += piece;
    std::int32_t k = first_outer;
    for (; k < n; ++k) {
      offset += static_cast<std::uint64_t>(dims[k].stride) * elem;
      if (++index[k] < dims[k].extent) break;
      offset -= static_cast<std::uint64_t>(dims[k].stride * dims[k].extent) * elem;
      index[k] = 0;
    }
    if (k == n) return DLB_OK;
  }
}

// A failure of the strided copy engine, as the verb's failure.
dlb_status engine_error(const dlb_buffer* b) noexcept {
  char text[256];
  std::snprintf(text, sizeof text, "%s", last_error_message());
  return verb_error_text(b, "copy_to_host", text);
}

// The whole storage into `dst`, compact row-major, after the writer.
dlb_status copy_storage(dlb_buffer* b, void* dst) noexcept {
  if (b->nbytes == 0) return DLB_OK;
  const OpenclBackend* be = opencl_backend_of(b);
  OpenclStorage* s = opencl_storage_of(b);
  const DLTensor view = storage_view(b);
  Reads r{loader(), b, be->queue, s->mem, take_writer(s)};
  struct Release {
    cl_event e;
    ~Release() {
      if (e != nullptr) (void)loader().clReleaseEvent(e);
    }
  } release{r.writer};
  const std::uint64_t origin = view.byte_offset;
  if (b->contiguous) return r.finish(r.plain(static_cast<std::size_t>(origin), b->nbytes, dst));
  if (!byte_addressable(view.dtype))
    return verb_error_text(b, "copy_to_host",
                           "a strided view of a sub-byte dtype cannot be copied: its elements do not start on bytes");
  const std::uint64_t elem = element_bits(view.dtype) / 8;

  // The view's dimensions in memory order (extent-1 ones place nothing).
  Dim dims[DLB_MAX_NDIM];
  std::int32_t n = 0;
  bool nested = true;
  for (std::int32_t i = 0; i < view.ndim; ++i) {
    if (view.shape[i] == 1) continue;
    dims[n++] = Dim{view.shape[i], view.strides[i], i};
    if (view.strides[i] <= 0) nested = false;
  }
  std::sort(dims, dims + n, [](const Dim& a, const Dim& b) { return a.stride < b.stride; });
  for (std::int32_t k = 1; k < n && nested; ++k)
    nested = dims[k].stride / dims[k - 1].stride >= dims[k - 1].extent;
  // Is memory order the view's own (innermost last)? Then the compact
  // reads are the compact row-major copy itself.
  bool in_order = nested;
  for (std::int32_t k = 1; k < n && in_order; ++k) in_order = dims[k].index < dims[k - 1].index;
  if (in_order) return r.finish(read_nested(r, dims, n, elem, origin, static_cast<unsigned char*>(dst)));

  // Otherwise host staging memory: the reads land there, and the strided
  // engine makes the copy compact row-major.
  DLTensor staged = view;
  staged.device = DLDevice{kDLCPU, 0};
  std::int64_t strides[DLB_MAX_NDIM];
  std::uint64_t staging_bytes = 0;
  if (nested) {
    // Compact in memory order: each dimension's stride is the product of
    // the extents inside it.
    std::int64_t step = 1;
    for (std::int32_t i = 0; i < view.ndim; ++i) strides[i] = 0;
    for (std::int32_t k = 0; k < n; ++k) {
      strides[dims[k].index] = step;
      step *= dims[k].extent;
    }
    staging_bytes = b->nbytes;
    staged.byte_offset = 0;
  } else {
    // Negative, broadcast or interleaved strides: the span the view
    // reaches, in one read, with the view's own strides.
    for (std::int32_t i = 0; i < view.ndim; ++i) strides[i] = view.strides[i];
    staging_bytes = s->info.span_bytes;
    staged.byte_offset = s->info.below_bytes;
  }
  staged.strides = strides;
  void* staging = mem_alloc_aligned(64, static_cast<std::size_t>(staging_bytes));
  if (staging == nullptr)
    return verb_error_text(b, "copy_to_host", "out of memory allocating host staging memory for a strided copy");
  staged.data = staging;
  dlb_status st = nested ? read_nested(r, dims, n, elem, origin, static_cast<unsigned char*>(staging))
                         : r.plain(static_cast<std::size_t>(origin - s->info.below_bytes),
                                   static_cast<std::size_t>(staging_bytes), staging);
  st = r.finish(st);
  if (st == DLB_OK) {
    LayoutInfo info = s->info;
    info.contiguous = false;
    if (copy_view_to_contiguous(staged, info, dst) != DLB_OK) st = engine_error(b);
  }
  mem_free_aligned(staging);
  return st;
}

// The whole storage into `dst`, compact row-major. A host copy is ordered
// after the writer by its reads' wait list, whatever the consumer's stream.
dlb_status copy_to_host(dlb_buffer* b, void* dst, std::int64_t) noexcept { return copy_storage(b, dst); }

void free_storage(dlb_buffer* b) noexcept {
  OpenclStorage* s = opencl_storage_of(b);
  const Loader& l = loader();
  if (s->writer != nullptr) (void)l.clReleaseEvent(s->writer);
  (void)l.clReleaseMemObject(s->mem);
  if (s->release != nullptr) s->release(s->release_ctx);
  delete s;
  backend_release(b->owner.store.backend);
}

}  // namespace

const StorageOps kOpenclStorage = {StorageKind::device, "opencl",       false,        nullptr,     wait_ready,
                                   acquire_access,      release_access, copy_to_host, free_storage};

void destroy_backend(void* ctx) noexcept {
  auto* be = static_cast<OpenclBackend*>(ctx);
  const Loader& l = loader();
  (void)l.clReleaseCommandQueue(be->queue);
  (void)l.clReleaseContext(be->context);
  delete be;
}

}  // namespace opencl

dlb_status opencl_copy_from_host(dlb_buffer* dst, const DLTensor& src) noexcept {
  using namespace opencl;
  return firewall("the OpenCL backend's copy from the host", [&]() -> dlb_status {
    if (dst->ops != &kOpenclStorage)
      return set_error(DLB_ERR_INTERNAL, "copy from the host into a buffer the OpenCL backend did not make");
    if (dst->nbytes == 0) return DLB_OK;
    LayoutInfo info;
    DLB_TRY(check_layout(&src, Origin::argument, true, &info, (dst->flags & DLB_BUFFER_SUBBYTE_PADDED) != 0));
    const unsigned char* from = static_cast<const unsigned char*>(src.data) + src.byte_offset;
    void* staging = nullptr;
    if (!info.contiguous) {
      staging = mem_alloc_aligned(64, static_cast<std::size_t>(dst->nbytes));
      if (staging == nullptr)
        return set_error(DLB_ERR_OUT_OF_MEMORY, "out of memory allocating %" PRIu64 " bytes of staging memory",
                         dst->nbytes);
      DLTensor t = src;
      t.dtype = storage_view(dst).dtype;
      const dlb_status s = copy_view_to_contiguous(t, info, staging);
      if (s != DLB_OK) {
        mem_free_aligned(staging);
        return s;
      }
      from = static_cast<const unsigned char*>(staging);
    }
    const OpenclBackend* be = opencl_backend_of(dst);
    OpenclStorage* s = opencl_storage_of(dst);
    cl_event writer = take_writer(s);
    const Loader& l = loader();
    const cl_int rc = l.clEnqueueWriteBuffer(be->queue, s->mem, kTrue, static_cast<std::size_t>(dst->tensor.byte_offset),
                                             static_cast<std::size_t>(dst->nbytes), from, writer != nullptr ? 1u : 0u,
                                             writer != nullptr ? &writer : nullptr, nullptr);
    if (staging != nullptr) mem_free_aligned(staging);
    // The blocking write waited for the writer: nothing is pending now.
    if (rc == kSuccess && writer != nullptr) writer_finished(s, writer);
    if (writer != nullptr) (void)l.clReleaseEvent(writer);
    if (rc != kSuccess) return call_error(be->device_id, "clEnqueueWriteBuffer", rc);
    return DLB_OK;
  });
}

}  // namespace dlb

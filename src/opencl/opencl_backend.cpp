// The built-in OpenCL backend's entry points: backends of a device (a
// context and queue the library makes, or a caller's), buffers allocated in
// cl_mem or over a caller's cl_mem, kDLOpenCL tensors taken in from other
// producers, and the event of a buffer's last writer. The ICD loader is
// loaded in opencl_loader.cpp, the storages' verbs are in
// opencl_storage.cpp; nothing links to OpenCL.
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>

#include "core/backend.hpp"
#include "core/buffer.hpp"
#include "core/device.hpp"
#include "core/errors.hpp"
#include "core/import.hpp"
#include "core/layout.hpp"
#include "opencl_backend.hpp"
#include "opencl_internal.hpp"

namespace dlb {
namespace {

using namespace opencl;

// The OpenCL backend behind a handle, or nullptr for another kind.
OpenclBackend* opencl_backend_of(const dlb_backend* backend) noexcept {
  const Backend* be = reinterpret_cast<const Backend*>(backend);
  if (be->ops != &kOpenclStorage) return nullptr;
  return static_cast<OpenclBackend*>(be->ctx);
}

// The storage of an OpenCL buffer, or nullptr for a buffer of another kind.
OpenclStorage* opencl_storage_if(const dlb_buffer* b) noexcept {
  return b->ops == &kOpenclStorage ? opencl_storage_of(b) : nullptr;
}

dlb_status no_such_device(std::int32_t device_id) noexcept {
  const std::int32_t n = loader().device_count;
  return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "OpenCL device %d does not exist; the ICD loader lists %d device%s",
                   static_cast<int>(device_id), static_cast<int>(n), n == 1 ? "" : "s");
}

// A backend over `context` and `queue` (both retained here for it) of
// device `device_id`. On failure both are released.
dlb_status make_backend(std::int32_t device_id, cl_context context, cl_command_queue queue, dlb_backend** out) {
  const Loader& l = loader();
  auto* ctx = new (std::nothrow) OpenclBackend;
  if (ctx == nullptr) {
    (void)l.clReleaseCommandQueue(queue);
    (void)l.clReleaseContext(context);
    return set_error(DLB_ERR_OUT_OF_MEMORY, "out of memory creating the OpenCL backend");
  }
  ctx->device_id = device_id;
  ctx->device = l.devices[device_id];
  ctx->context = context;
  ctx->queue = queue;
  char name[32];
  std::snprintf(name, sizeof name, "opencl:%d", static_cast<int>(device_id));
  const dlb_status s = backend_create_builtin(kOpenclStorage, name, ctx, destroy_backend, out);
  if (s != DLB_OK) destroy_backend(ctx);
  return s;
}

// A queue of the library's own on `device` in `context`.
dlb_status make_queue(std::int32_t device_id, cl_context context, cl_command_queue* out) {
  cl_int rc = kSuccess;
  cl_command_queue queue = loader().clCreateCommandQueue(context, loader().devices[device_id], 0, &rc);
  if (rc != kSuccess || queue == nullptr) return call_error(device_id, "clCreateCommandQueue", rc);
  *out = queue;
  return DLB_OK;
}

dlb_status backend_create_impl(std::int32_t device_id, dlb_backend** out) {
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  const Loader& l = loader();
  if (!l.usable) return no_loader();
  if (device_id < 0 || device_id >= l.device_count) return no_such_device(device_id);
  const cl_context_properties props[] = {kContextPlatform,
                                         reinterpret_cast<cl_context_properties>(l.device_platform[device_id]), 0};
  cl_int rc = kSuccess;
  cl_context context = l.clCreateContext(props, 1, &l.devices[device_id], nullptr, nullptr, &rc);
  if (rc != kSuccess || context == nullptr) return call_error(device_id, "clCreateContext", rc);
  cl_command_queue queue = nullptr;
  const dlb_status s = make_queue(device_id, context, &queue);
  if (s != DLB_OK) {
    (void)l.clReleaseContext(context);
    return s;
  }
  return make_backend(device_id, context, queue, out);
}

dlb_status backend_from_queue_impl(void* context_arg, void* queue_arg, dlb_backend** out) {
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  const Loader& l = loader();
  if (!l.usable) return no_loader();
  if (context_arg == nullptr || queue_arg == nullptr)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "%s is NULL", context_arg == nullptr ? "context" : "queue");
  if (!live_handle(context_arg))
    return set_error(DLB_ERR_INVALID_ARGUMENT, "context %p is not a live cl_context of a platform the ICD loader lists",
                     context_arg);
  if (!live_handle(queue_arg))
    return set_error(DLB_ERR_INVALID_ARGUMENT,
                     "queue %p is not a live cl_command_queue of a platform the ICD loader lists", queue_arg);
  auto* context = static_cast<cl_context>(context_arg);
  auto* queue = static_cast<cl_command_queue>(queue_arg);
  cl_context queue_context = nullptr;
  cl_int rc = l.clGetCommandQueueInfo(queue, kQueueContext, sizeof queue_context, &queue_context, nullptr);
  if (rc != kSuccess)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "queue %p: clGetCommandQueueInfo(CL_QUEUE_CONTEXT) failed with %s (%d)",
                     queue_arg, error_name(rc), static_cast<int>(rc));
  if (queue_context != context)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "queue %p belongs to context %p, not to context %p", queue_arg,
                     static_cast<void*>(queue_context), context_arg);
  cl_device_id device = nullptr;
  rc = l.clGetCommandQueueInfo(queue, kQueueDevice, sizeof device, &device, nullptr);
  if (rc != kSuccess)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "queue %p: clGetCommandQueueInfo(CL_QUEUE_DEVICE) failed with %s (%d)",
                     queue_arg, error_name(rc), static_cast<int>(rc));
  const std::int32_t device_id = device_index(device);
  if (device_id < 0)
    return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "queue %p is on a device the ICD loader does not list", queue_arg);
  rc = l.clRetainContext(context);
  if (rc != kSuccess) return call_error(device_id, "clRetainContext", rc);
  rc = l.clRetainCommandQueue(queue);
  if (rc != kSuccess) {
    (void)l.clReleaseContext(context);
    return call_error(device_id, "clRetainCommandQueue", rc);
  }
  return make_backend(device_id, context, queue, out);
}

dlb_status backend_queue_impl(const dlb_backend* backend, void** context, void** queue) {
  if (backend == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "backend is NULL");
  if (context == nullptr && queue == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "context and queue are NULL");
  const OpenclBackend* be = opencl_backend_of(backend);
  if (be == nullptr)
    return set_error(DLB_ERR_INVALID_ARGUMENT,
                     "backend is not an OpenCL backend (make it with dlb_opencl_backend_create)");
  if (context != nullptr) *context = be->context;
  if (queue != nullptr) *queue = be->queue;
  return DLB_OK;
}

OpenclBackend* checked_backend(dlb_backend* backend, dlb_status* st) noexcept {
  if (backend == nullptr) {
    *st = set_error(DLB_ERR_INVALID_ARGUMENT, "backend is NULL");
    return nullptr;
  }
  OpenclBackend* be = opencl_backend_of(backend);
  if (be == nullptr)
    *st = set_error(DLB_ERR_INVALID_ARGUMENT,
                    "backend is not an OpenCL backend (make it with dlb_opencl_backend_create)");
  return be;
}

dlb_status buffer_alloc_impl(dlb_backend* backend, DLDataType dtype, std::int32_t ndim, const std::int64_t* shape,
                             dlb_buffer** out) {
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  if (!loader().usable) return no_loader();
  dlb_status st = DLB_OK;
  OpenclBackend* be = checked_backend(backend, &st);
  if (be == nullptr) return st;
  DLTensor view;
  std::memset(&view, 0, sizeof view);
  view.device = DLDevice{kDLOpenCL, be->device_id};
  view.dtype = dtype;
  view.ndim = ndim;
  view.shape = const_cast<std::int64_t*>(shape);
  LayoutInfo info;
  DLB_TRY(check_layout(&view, Origin::argument, false, &info));
  const Loader& l = loader();
  // Zero-size tensors get a small allocation too, so that `data` is a real
  // cl_mem.
  const std::size_t bytes = info.nbytes > 0 ? static_cast<std::size_t>(info.nbytes) : 1;
  if (static_cast<std::uint64_t>(bytes) != (info.nbytes > 0 ? info.nbytes : 1))
    return set_error(DLB_ERR_OUT_OF_MEMORY, "cannot allocate %" PRIu64 " bytes", info.nbytes);
  cl_int rc = kSuccess;
  cl_mem mem = l.clCreateBuffer(be->context, kMemReadWrite, bytes, nullptr, &rc);
  if (rc != kSuccess || mem == nullptr) return call_error(be->device_id, "clCreateBuffer", rc);
  // Zero-filled on the backend's queue; the fill is the buffer's first
  // writer, which exports and copies wait for.
  const unsigned char zero = 0;
  cl_event fill = nullptr;
  rc = l.clEnqueueFillBuffer(be->queue, mem, &zero, 1, 0, bytes, 0, nullptr, &fill);
  if (rc == kSuccess) rc = l.clFlush(be->queue);
  if (rc != kSuccess) {
    if (fill != nullptr) {
      (void)l.clWaitForEvents(1, &fill);
      (void)l.clReleaseEvent(fill);
    }
    (void)l.clReleaseMemObject(mem);
    return call_error(be->device_id, fill == nullptr ? "clEnqueueFillBuffer" : "clFlush", rc);
  }
  OpenclStorage* s = new (std::nothrow) OpenclStorage;
  if (s == nullptr) {
    (void)l.clWaitForEvents(1, &fill);
    (void)l.clReleaseEvent(fill);
    (void)l.clReleaseMemObject(mem);
    return set_error(DLB_ERR_OUT_OF_MEMORY, "out of memory creating an OpenCL buffer");
  }
  s->mem = mem;
  s->mem_size = bytes;
  s->info = info;
  s->writer = fill;  // its reference moves to the storage
  const dlb_status st2 = buffer_from_backend(backend, s, &view, 0, StorageKind::device, out);
  if (st2 != DLB_OK) {
    (void)l.clWaitForEvents(1, &fill);
    (void)l.clReleaseEvent(fill);
    (void)l.clReleaseMemObject(mem);
    delete s;
  }
  return st2;
}

// The checks of a handle a caller gave as an event.
dlb_status check_event(const OpenclBackend* be, void* event, const char* what) noexcept {
  if (!live_handle(event))
    return set_error(DLB_ERR_INVALID_ARGUMENT, "%s %p is not a live cl_event of a platform the ICD loader lists", what,
                     event);
  cl_context context = nullptr;
  const cl_int rc =
      loader().clGetEventInfo(static_cast<cl_event>(event), kEventContext, sizeof context, &context, nullptr);
  if (rc != kSuccess)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "%s %p: clGetEventInfo(CL_EVENT_CONTEXT) failed with %s (%d)", what,
                     event, error_name(rc), static_cast<int>(rc));
  if (context != be->context)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "%s %p belongs to context %p, not to the backend's context %p", what,
                     event, static_cast<void*>(context), static_cast<void*>(be->context));
  return DLB_OK;
}

// What a cl_mem is, asked of the driver after the handle check.
struct MemFacts {
  cl_context context = nullptr;
  std::uint64_t size = 0;
};

dlb_status mem_facts(void* handle, Origin origin, MemFacts* out) noexcept {
  const dlb_status bad = origin == Origin::argument ? DLB_ERR_INVALID_ARGUMENT : DLB_ERR_MALFORMED;
  const char* whose = origin == Origin::argument ? "view->data" : "the tensor's data";
  if (!live_handle(handle))
    return set_error(bad,
                     "%s %p is not a live cl_mem of an OpenCL platform the ICD loader lists (released, or not an "
                     "OpenCL handle)",
                     whose, handle);
  const Loader& l = loader();
  auto* mem = static_cast<cl_mem>(handle);
  cl_uint type = 0, refs = 0;
  std::size_t size = 0;
  cl_context context = nullptr;
  cl_int rc = l.clGetMemObjectInfo(mem, kMemType, sizeof type, &type, nullptr);
  if (rc == kSuccess) rc = l.clGetMemObjectInfo(mem, kMemReferenceCount, sizeof refs, &refs, nullptr);
  if (rc == kSuccess) rc = l.clGetMemObjectInfo(mem, kMemSize, sizeof size, &size, nullptr);
  if (rc == kSuccess) rc = l.clGetMemObjectInfo(mem, kMemContext, sizeof context, &context, nullptr);
  if (rc != kSuccess)
    return set_error(bad, "%s %p is not a usable cl_mem: clGetMemObjectInfo failed with %s (%d)", whose, handle,
                     error_name(rc), static_cast<int>(rc));
  if (refs == 0)
    return set_error(bad, "%s %p is a released cl_mem (reference count 0)", whose, handle);
  if (type != kMemObjectBuffer)
    return set_error(bad, "%s %p is an OpenCL memory object of type 0x%x, not a buffer (CL_MEM_OBJECT_BUFFER)", whose,
                     handle, static_cast<unsigned>(type));
  out->context = context;
  out->size = size;
  return DLB_OK;
}

// A view over a caller's cl_mem (view.data) as a buffer of `backend`:
// checked, the cl_mem and `event` (may be NULL) retained for the buffer,
// `release(ctx)` called once at the end (not on failure).
dlb_status wrap_common(dlb_backend* backend, const DLTensor* view, std::uint64_t flags, void* event,
                       dlb_release_fn release, void* ctx, Origin origin, dlb_buffer** out) {
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  if (!loader().usable) return no_loader();
  dlb_status st = DLB_OK;
  OpenclBackend* be = checked_backend(backend, &st);
  if (be == nullptr) return st;
  if (view == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "view is NULL");
  if ((flags & ~DLB_BUFFER_READ_ONLY) != 0)
    return set_error(DLB_ERR_INVALID_ARGUMENT,
                     "flags has bits 0x%" PRIx64 " that dlb_opencl_buffer_wrap does not take",
                     flags & ~DLB_BUFFER_READ_ONLY);
  const dlb_status bad = origin == Origin::argument ? DLB_ERR_INVALID_ARGUMENT : DLB_ERR_MALFORMED;
  LayoutInfo info;
  DLB_TRY(check_layout(view, origin, false, &info));
  const std::int32_t type = device_type_of(view->device);
  if (type != kDLOpenCL)
    return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "the view's device %s:%d is not OpenCL memory (kDLOpenCL)",
                     device_type_name(type), static_cast<int>(view->device.device_id));
  if (view->device.device_id != be->device_id)
    return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "the view's device opencl:%d is not the backend's device %d",
                     static_cast<int>(view->device.device_id), static_cast<int>(be->device_id));
  if (view->data == nullptr)
    return set_error(bad, "%s is NULL: OpenCL memory is a cl_mem handle",
                     origin == Origin::argument ? "view->data" : "the tensor's data");
  MemFacts facts;
  DLB_TRY(mem_facts(view->data, origin, &facts));
  if (facts.context != be->context)
    return set_error(DLB_ERR_INVALID_ARGUMENT,
                     "cl_mem %p belongs to context %p, another context than the backend's (%p): a queue can only "
                     "use memory of its own context",
                     view->data, static_cast<void*>(facts.context), static_cast<void*>(be->context));
  // The bytes the view reaches, [byte_offset - below, ... + span), must lie
  // in the cl_mem.
  if (!info.empty) {
    const std::uint64_t offset = view->byte_offset;
    if (offset < info.below_bytes || offset - info.below_bytes > facts.size ||
        info.span_bytes > facts.size - (offset - info.below_bytes))
      return set_error(bad,
                       "byte_offset %" PRIu64 " with the view's extent (%" PRIu64 " bytes from %" PRIu64
                       " bytes before element 0) reaches past the cl_mem's %" PRIu64 " bytes",
                       offset, info.span_bytes, info.below_bytes, facts.size);
  }
  if (event != nullptr) DLB_TRY(check_event(be, event, "event"));

  const Loader& l = loader();
  auto* s = new OpenclStorage;
  s->mem = static_cast<cl_mem>(view->data);
  s->mem_size = facts.size;
  s->info = info;
  s->release = release;
  s->release_ctx = ctx;
  cl_int rc = l.clRetainMemObject(s->mem);
  if (rc != kSuccess) {
    delete s;
    return call_error(be->device_id, "clRetainMemObject", rc);
  }
  if (event != nullptr) {
    rc = l.clRetainEvent(static_cast<cl_event>(event));
    if (rc != kSuccess) {
      (void)l.clReleaseMemObject(s->mem);
      delete s;
      return call_error(be->device_id, "clRetainEvent", rc);
    }
    s->writer = static_cast<cl_event>(event);
  }
  st = buffer_from_backend(backend, s, view, flags, StorageKind::device, out);
  if (st != DLB_OK) {  // the caller keeps the memory: release is not called
    if (s->writer != nullptr) (void)l.clReleaseEvent(s->writer);
    (void)l.clReleaseMemObject(s->mem);
    delete s;
  }
  return st;
}

dlb_status default_backend(std::int32_t device_id, dlb_backend** out, bool* kept);
constexpr std::int32_t kDefaultBackends = 64;

void release_versioned(void* ctx) noexcept {
  auto* m = static_cast<DLManagedTensorVersioned*>(ctx);
  if (m->deleter != nullptr) m->deleter(m);
}

void release_legacy(void* ctx) noexcept {
  auto* m = static_cast<DLManagedTensor*>(ctx);
  if (m->deleter != nullptr) m->deleter(m);
}

// The producer's stream as the writer's event: a cl_command_queue handle
// (a value above 2) gets a marker, whose event is then the writer's; any
// other value means no pending work. *event is nullptr or a new event.
dlb_status writer_from_stream(std::int64_t stream, std::int32_t device_id, cl_event* event) {
  *event = nullptr;
  if (stream <= 2) return DLB_OK;
  auto* queue = reinterpret_cast<cl_command_queue>(static_cast<std::uintptr_t>(stream));
  if (!live_handle(queue))
    return set_error(DLB_ERR_INVALID_ARGUMENT,
                     "stream 0x%" PRIx64 " is not a live cl_command_queue of a platform the ICD loader lists",
                     static_cast<std::uint64_t>(stream));
  const cl_int rc = loader().clEnqueueMarkerWithWaitList(queue, 0, nullptr, event);
  if (rc != kSuccess) return call_error(device_id, "clEnqueueMarkerWithWaitList", rc);
  return DLB_OK;
}

// A managed tensor of OpenCL memory in, as a buffer of `backend` (NULL: a
// backend of the cl_mem's own context and the tensor's device).
dlb_status import_common(dlb_backend* backend, const DLTensor& t, std::uint64_t flags, std::int64_t stream,
                         dlb_release_fn release, void* managed, dlb_buffer** out) {
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  const Loader& l = loader();
  if (!l.usable) return no_loader();
  if (stream < -1)
    return set_error(DLB_ERR_INVALID_ARGUMENT,
                     "stream %" PRId64 " is not an OpenCL stream value (-1 or 0: no pending work; a cl_command_queue "
                     "handle)",
                     stream);
  dlb_backend* own = nullptr;
  bool kept = true;
  if (backend == nullptr) {
    const std::int32_t type = device_type_of(t.device);
    if (type != kDLOpenCL)
      return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "the tensor is on %s:%d, not OpenCL memory (kDLOpenCL)",
                       device_type_name(type), static_cast<int>(t.device.device_id));
    const std::int32_t id = t.device.device_id;
    if (id < 0 || id >= l.device_count)
      return set_error(DLB_ERR_MALFORMED, "the tensor says opencl:%d; the ICD loader lists %d OpenCL device%s",
                       static_cast<int>(id), static_cast<int>(l.device_count), l.device_count == 1 ? "" : "s");
    MemFacts facts;
    if (t.data != nullptr) DLB_TRY(mem_facts(t.data, Origin::incoming, &facts));
    DLB_TRY(default_backend(id, &own, &kept));
    const OpenclBackend* be = opencl_backend_of(own);
    if (t.data != nullptr && facts.context != be->context) {
      // The cl_mem's own context, with a queue of the library's on the
      // tensor's device, which must be one of the context's.
      if (!kept) dlb_backend_release(own);
      own = nullptr;
      kept = false;
      cl_uint n = 0;
      cl_int rc = l.clGetContextInfo(facts.context, kContextNumDevices, sizeof n, &n, nullptr);
      cl_device_id devices[kMaxDevices];
      if (rc == kSuccess) {
        if (n > static_cast<cl_uint>(kMaxDevices)) n = kMaxDevices;
        rc = l.clGetContextInfo(facts.context, kContextDevices, n * sizeof(cl_device_id), devices, nullptr);
      }
      if (rc != kSuccess) return call_error(id, "clGetContextInfo", rc);
      bool found = false;
      for (cl_uint i = 0; i < n; ++i) found = found || devices[i] == l.devices[id];
      if (!found) {
        char name[128];
        device_name(l.devices[id], name, sizeof name);
        return set_error(DLB_ERR_MALFORMED, "the tensor says opencl:%d (%s), which is not a device of its cl_mem's context",
                         static_cast<int>(id), name);
      }
      rc = l.clRetainContext(facts.context);
      if (rc != kSuccess) return call_error(id, "clRetainContext", rc);
      cl_command_queue queue = nullptr;
      const dlb_status s = make_queue(id, facts.context, &queue);
      if (s != DLB_OK) {
        (void)l.clReleaseContext(facts.context);
        return s;
      }
      DLB_TRY(make_backend(id, facts.context, queue, &own));
    }
    backend = own;
  }
  const OpenclBackend* be = opencl_backend_of(backend);
  cl_event writer = nullptr;
  dlb_status s = be == nullptr ? DLB_OK : writer_from_stream(stream, be->device_id, &writer);
  if (s == DLB_OK) s = wrap_common(backend, &t, flags, writer, release, managed, Origin::incoming, out);
  if (writer != nullptr) (void)l.clReleaseEvent(writer);
  if (own != nullptr && !kept) dlb_backend_release(own);
  return s;
}

dlb_status import_versioned_impl(dlb_backend* backend, DLManagedTensorVersioned* m, std::int64_t stream,
                                 dlb_buffer** out) {
  if (m == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "tensor is NULL");
  std::uint64_t flags = 0;
  DLB_TRY(device_import_flags(*m, kOpenclDeviceBackend.name, &flags));
  return import_common(backend, m->dl_tensor, flags, stream, release_versioned, m, out);
}

dlb_status import_legacy_impl(dlb_backend* backend, DLManagedTensor* m, std::int64_t stream, dlb_buffer** out) {
  if (m == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "tensor is NULL");
  return import_common(backend, m->dl_tensor, 0, stream, release_legacy, m, out);
}

dlb_status set_event_impl(dlb_buffer* buffer, void* event) {
  if (buffer == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "buffer is NULL");
  OpenclStorage* s = opencl_storage_if(buffer);
  if (s == nullptr)
    return set_error(DLB_ERR_INVALID_ARGUMENT,
                     "the buffer is not OpenCL memory of the built-in backend (dlb_opencl_buffer_alloc, "
                     "dlb_opencl_buffer_wrap or an OpenCL import)");
  if (event != nullptr) DLB_TRY(check_event(opencl::opencl_backend_of(buffer), event, "event"));
  set_writer(s, static_cast<cl_event>(event));
  return DLB_OK;
}

dlb_status device_index_impl(void* device_arg, std::int32_t* out) {
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  if (device_arg == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "device is NULL");
  const Loader& l = loader();
  if (!l.usable) return no_loader();
  // Compared with the listed handles only: a foreign pointer is never followed.
  const std::int32_t index = device_index(static_cast<cl_device_id>(device_arg));
  if (index < 0)
    return set_error(DLB_ERR_UNSUPPORTED_DEVICE,
                     "device %p is not one of the %" PRId32 " OpenCL devices the ICD loader lists (a sub-device, "
                     "or a handle of another loader)",
                     device_arg, l.device_count);
  *out = index;
  return DLB_OK;
}

dlb_status queue_device_index_impl(void* queue_arg, std::int32_t* out) {
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  if (queue_arg == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "queue is NULL");
  const Loader& l = loader();
  if (!l.usable) return no_loader();
  if (!live_handle(queue_arg))
    return set_error(DLB_ERR_INVALID_ARGUMENT,
                     "queue %p is not a live cl_command_queue of a platform the ICD loader lists", queue_arg);
  cl_device_id device = nullptr;
  const cl_int rc =
      l.clGetCommandQueueInfo(static_cast<cl_command_queue>(queue_arg), kQueueDevice, sizeof device, &device, nullptr);
  if (rc != kSuccess)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "queue %p: clGetCommandQueueInfo(CL_QUEUE_DEVICE) failed with %s (%d)",
                     queue_arg, error_name(rc), static_cast<int>(rc));
  const std::int32_t index = device_index(device);
  if (index < 0)
    return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "queue %p is on a device the ICD loader does not list", queue_arg);
  *out = index;
  return DLB_OK;
}

dlb_status device_count_impl(std::int32_t* out) {
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  const Loader& l = loader();
  if (!l.usable) return no_loader();
  *out = l.device_count;
  return DLB_OK;
}

// The backends dlb_buffer_alloc() and the imports use, one per device index
// below kDefaultBackends, made on first use and kept for the life of the
// process. Other indices get a backend per call (*kept false).
dlb_status default_backend(std::int32_t device_id, dlb_backend** out, bool* kept) {
  static std::mutex mutex;
  static dlb_backend* backends[kDefaultBackends] = {};
  *kept = device_id >= 0 && device_id < kDefaultBackends;
  if (!*kept) return backend_create_impl(device_id, out);
  std::lock_guard<std::mutex> lock(mutex);
  if (backends[device_id] == nullptr) DLB_TRY(backend_create_impl(device_id, &backends[device_id]));
  *out = backends[device_id];
  return DLB_OK;
}

}  // namespace

dlb_status opencl_take_in(const DLTensor& t, std::uint64_t flags, std::int64_t stream, bool versioned, void* managed,
                          dlb_buffer** out) noexcept {
  // Called from inside the import, behind its entry point's firewall, but
  // from a noexcept function: its own firewall keeps allocation failures a
  // status.
  return firewall("the OpenCL backend's import", [&] {
    // An empty tensor may come without a cl_mem (DLPack lets its data be
    // NULL): it comes in as it is, with nothing to read.
    if (t.data == nullptr)
      return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "an OpenCL tensor without a cl_mem (NULL data) has no memory to take in");
    return import_common(nullptr, t, flags, stream, versioned ? release_versioned : release_legacy, managed, out);
  });
}

dlb_status opencl_default_alloc(DLDevice device, DLDataType dtype, std::int32_t ndim, const std::int64_t* shape,
                                dlb_buffer** out) {
  if (!loader().usable) {
    char why[sizeof(opencl::Loader::why)];
    why_unusable(why, sizeof why);
    return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "dlb_buffer_alloc cannot allocate opencl:%d memory: %s",
                     static_cast<int>(device.device_id), why);
  }
  dlb_backend* backend = nullptr;
  bool kept = true;
  DLB_TRY(default_backend(device.device_id, &backend, &kept));
  const dlb_status s = buffer_alloc_impl(backend, dtype, ndim, shape, out);
  if (!kept) dlb_backend_release(backend);
  return s;
}

}  // namespace dlb

extern "C" {

DLB_API dlb_status dlb_opencl_device_count(int32_t* out) {
  return dlb::firewall(__func__, [&] { return dlb::device_count_impl(out); });
}

DLB_API dlb_status dlb_opencl_device_index(void* device, int32_t* out) {
  return dlb::firewall(__func__, [&] { return dlb::device_index_impl(device, out); });
}

DLB_API dlb_status dlb_opencl_queue_device_index(void* queue, int32_t* out) {
  return dlb::firewall(__func__, [&] { return dlb::queue_device_index_impl(queue, out); });
}

DLB_API dlb_status dlb_opencl_backend_create(int32_t device_id, dlb_backend** out) {
  return dlb::firewall(__func__, [&] { return dlb::backend_create_impl(device_id, out); });
}

DLB_API dlb_status dlb_opencl_backend_from_queue(void* context, void* queue, dlb_backend** out) {
  return dlb::firewall(__func__, [&] { return dlb::backend_from_queue_impl(context, queue, out); });
}

DLB_API dlb_status dlb_opencl_backend_queue(const dlb_backend* backend, void** context, void** queue) {
  return dlb::firewall(__func__, [&] { return dlb::backend_queue_impl(backend, context, queue); });
}

DLB_API dlb_status dlb_opencl_buffer_alloc(dlb_backend* backend, DLDataType dtype, int32_t ndim, const int64_t* shape,
                                           dlb_buffer** out) {
  return dlb::firewall(__func__, [&] { return dlb::buffer_alloc_impl(backend, dtype, ndim, shape, out); });
}

DLB_API dlb_status dlb_opencl_buffer_wrap(dlb_backend* backend, const DLTensor* view, uint64_t flags, void* event,
                                          dlb_release_fn release, void* ctx, dlb_buffer** out) {
  return dlb::firewall(__func__, [&] {
    return dlb::wrap_common(backend, view, flags, event, release, ctx, dlb::Origin::argument, out);
  });
}

DLB_API dlb_status dlb_opencl_import_versioned(dlb_backend* backend, DLManagedTensorVersioned* tensor, int64_t stream,
                                              dlb_buffer** out) {
  return dlb::firewall(__func__, [&] { return dlb::import_versioned_impl(backend, tensor, stream, out); });
}

DLB_API dlb_status dlb_opencl_import_legacy(dlb_backend* backend, DLManagedTensor* tensor, int64_t stream,
                                           dlb_buffer** out) {
  return dlb::firewall(__func__, [&] { return dlb::import_legacy_impl(backend, tensor, stream, out); });
}

DLB_API dlb_status dlb_opencl_buffer_set_event(dlb_buffer* buffer, void* event) {
  return dlb::firewall(__func__, [&] { return dlb::set_event_impl(buffer, event); });
}

}  // extern "C"

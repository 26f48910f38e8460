// The exporter: buffers out as DLManagedTensorVersioned / DLManagedTensor,
// and the deleter that ends every export.
#include "export.hpp"

#include <cinttypes>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <new>

#include "alloc.hpp"
#include "buffer.hpp"
#include "device.hpp"
#include "device_backend.hpp"
#include "errors.hpp"
#include "layout.hpp"
#include "streams.hpp"
#include "thread_cache.hpp"


namespace dlb {
namespace {

alignas(64) const unsigned char kEmptyData[64] = {0};

// One allocation per export: the managed struct, the bookkeeping, then
// shape[capacity] and strides[capacity].
struct ExportBlock {
  union {
    DLManagedTensorVersioned versioned;
    DLManagedTensor legacy;
  } managed;
  dlb_buffer* buffer;   // reference held (zero-copy exports), or null
  void* copy;           // memory of a copy export, or null
  void* access_ref;     // backend access reference (zero-copy backend export)
  bool has_access;
  std::int32_t capacity;

  std::int64_t* dims() noexcept { return reinterpret_cast<std::int64_t*>(this + 1); }
};
static_assert(sizeof(ExportBlock) % alignof(std::int64_t) == 0);

// Blocks for up to kCachedNdim dimensions are recycled through the
// per-thread cache, so the hot path allocates nothing. A block freed on
// another thread joins that thread's cache.
constexpr std::int32_t kCachedNdim = 8;

std::size_t block_size(std::int32_t capacity) noexcept {
  return sizeof(ExportBlock) + 2 * static_cast<std::size_t>(capacity) * sizeof(std::int64_t);
}

ExportBlock* take_block(std::int32_t ndim) noexcept {
  const std::int32_t capacity = ndim <= kCachedNdim ? kCachedNdim : ndim;
  if (capacity == kCachedNdim) {
    if (void* cached = cache_take(BlockClass::export_block, block_size(kCachedNdim))) {
      ExportBlock* b = static_cast<ExportBlock*>(cached);
      b->capacity = capacity;
      return b;
    }
  }
  // Room for the cache's link (only blocks of kCachedNdim go to a cache;
  // the larger ones carry the 8 bytes unused).
  void* mem = mem_alloc(cached_block_bytes(block_size(capacity)));
  if (mem == nullptr) {
    set_error(DLB_ERR_OUT_OF_MEMORY, "out of memory allocating an export of %d dimensions", ndim);
    return nullptr;
  }
  ExportBlock* b = static_cast<ExportBlock*>(mem);
  b->capacity = capacity;
  return b;
}

void give_back_block(ExportBlock* b) noexcept {
  if (b->capacity == kCachedNdim && cache_give(BlockClass::export_block, b, block_size(kCachedNdim))) return;
  mem_free(b);
}

// Undoes everything an export holds. Runs exactly once per export, from
// its deleter (or from a failed export before it was handed out).
void finish(ExportBlock* b) noexcept {
  if (b->has_access) b->buffer->ops->release_access(b->buffer, b->access_ref);
  if (b->buffer != nullptr) buffer_release(b->buffer);
  if (b->copy != nullptr) mem_free_aligned(b->copy);
  give_back_block(b);
}

// The deleters are entry points too (consumers call them through the
// managed struct), so they run behind the firewall.
void deleter_versioned(DLManagedTensorVersioned* m) noexcept {
  firewall_void("deleter of an exported DLManagedTensorVersioned", [&] {
    if (m == nullptr) return;
    finish(static_cast<ExportBlock*>(m->manager_ctx));
    live_add(-1);
  });
}

void deleter_legacy(DLManagedTensor* m) noexcept {
  firewall_void("deleter of an exported DLManagedTensor", [&] {
    if (m == nullptr) return;
    finish(static_cast<ExportBlock*>(m->manager_ctx));
    live_add(-1);
  });
}

constexpr std::uint64_t kKnownExportFlags =
    DLB_EXPORT_READ_ONLY | DLB_EXPORT_ALLOW_READ_ONLY_LEGACY | DLB_EXPORT_STREAM_GIVEN;

dlb_status read_options(const dlb_export_options* options, dlb_export_options* opt) noexcept {
  *opt = dlb_export_options{sizeof(dlb_export_options), DLB_COPY_IF_NEEDED, 0, {kDLCPU, 0}, DLB_STREAM_NONE, 0};
  if (options == nullptr) return DLB_OK;
  if (options->struct_size < offsetof(dlb_export_options, copy) + sizeof(options->copy))
    return set_error(DLB_ERR_INVALID_ARGUMENT,
                     "options->struct_size is %zu; call dlb_export_options_init() first", options->struct_size);
  std::memcpy(opt, options, options->struct_size < sizeof *opt ? options->struct_size : sizeof *opt);
  opt->struct_size = sizeof *opt;
  if (opt->copy != DLB_COPY_IF_NEEDED && opt->copy != DLB_COPY_NEVER && opt->copy != DLB_COPY_ALWAYS)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "options->copy is %d (must be DLB_COPY_IF_NEEDED, DLB_COPY_NEVER or "
                     "DLB_COPY_ALWAYS)", static_cast<int>(opt->copy));
  if ((opt->flags & ~kKnownExportFlags) != 0)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "options->flags has unknown bits 0x%" PRIx64,
                     opt->flags & ~kKnownExportFlags);
  return DLB_OK;
}

bool same_device(DLDevice a, DLDevice b) noexcept {
  return device_type_of(a) == device_type_of(b) && a.device_id == b.device_id;
}

// What a caller refused under DLB_COPY_NEVER can do instead. `on_device`:
// the memory itself can be handed over, on its own device (the CPU device
// was asked for, which needs a copy); else no export of it is zero-copy,
// and only a copy helps (the CPU device would need one too).
void copy_remedy(const DLDevice& dev, bool on_device, char* out, std::size_t size) noexcept {
  if (!on_device) {
    std::snprintf(out, size, "allow a copy (DLB_COPY_IF_NEEDED; copy=None in Python): this memory reaches a "
                  "consumer, on the CPU device or its own, only as a copy");
    return;
  }
  const std::int32_t type = device_type_of(dev);
  std::snprintf(out, size,
                "allow a copy (DLB_COPY_IF_NEEDED; copy=None in Python), or take the memory on its own device "
                "%s:%d (no target device, or target_device {%d, %d}; dl_device=(%d, %d) in Python)",
                device_type_name(type), static_cast<int>(dev.device_id), static_cast<int>(type),
                static_cast<int>(dev.device_id), static_cast<int>(type), static_cast<int>(dev.device_id));
}

// A refusal of the planner: with `report` the thread's error is set, else
// only the status is returned.
#define DLB_REFUSE(report, code, ...) return (report) ? set_error((code), __VA_ARGS__) : (code)

// Says why an export needs a copy it may not make: copy forbidden, or a
// target device other than the CPU. Out of the planner's way (it runs only
// for a refusal); returns the status the planner refuses with.
__attribute__((noinline, cold)) dlb_status refuse_copy(const dlb_buffer* b, const dlb_export_options& opt,
                                                       dlb_status share) noexcept {
  const DLDevice dev = b->tensor.device;
  const std::int32_t dev_type = device_type_of(dev);
  char why[200];
  why[0] = '\0';
  if (share != DLB_OK) {
    bool stable = true;
    b->ops->shareable(b, why, sizeof why, &stable);
  } else if (opt.copy != DLB_COPY_ALWAYS && (b->flags & DLB_BUFFER_BACKEND) != 0) {
    std::snprintf(why, sizeof why,
                  "the buffer is %s:%d memory of backend '%s', which the host cannot read, and the CPU device was "
                  "asked for",
                  device_type_name(dev_type), static_cast<int>(dev.device_id), b->owner.store.backend->name);
  } else if (opt.copy != DLB_COPY_ALWAYS) {
    std::snprintf(why, sizeof why, "the buffer is on %s:%d and the CPU device was asked for",
                  device_type_name(dev_type), static_cast<int>(dev.device_id));
  }
  if (why[0] != '\0' && opt.copy == DLB_COPY_NEVER) {
    char remedy[240];
    copy_remedy(dev, share == DLB_OK, remedy, sizeof remedy);
    return set_error(share != DLB_OK ? share : DLB_ERR_NOT_ZERO_COPY,
                     "%s, and copy was forbidden (DLB_COPY_NEVER); %s", why, remedy);
  }
  return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "%s%sa copy can only be made to host memory, but %s:%d was asked for",
                   why, why[0] != '\0' ? "; " : "", device_type_name(device_type_of(opt.target_device)),
                   static_cast<int>(opt.target_device.device_id));
}

// The export planner: the one place that decides what an export with given
// options does. Everything it reads of the buffer is fixed when the buffer
// is made, except what the storage's shareable() reports as unstable, so
// its answer for the default options is computed by the first default
// export (plan_default) and reused by every later one. Inlined, so that for
// the default options (a constant) the compiler folds away what they leave
// undecided.
__attribute__((always_inline)) inline dlb_status make_plan(const dlb_buffer* b, const dlb_export_options& opt, bool legacy,
                                                           bool report, Plan* plan, bool* stable) noexcept {
  const StorageOps& ops = *b->ops;
  const DLDevice dev = b->tensor.device;
  const std::int32_t dev_type = device_type_of(dev);
  const bool want_cpu = opt.has_target_device != 0 && device_type_of(opt.target_device) == kDLCPU;
  *stable = true;

  if (opt.has_target_device != 0) {
    const DLDevice t = opt.target_device;
    if (!device_type_known(device_type_of(t)) || t.device_id < 0)
      DLB_REFUSE(report, DLB_ERR_UNSUPPORTED_DEVICE, "target device %d:%d is not a DLPack device",
                 static_cast<int>(device_type_of(t)), static_cast<int>(t.device_id));
    if (!same_device(t, dev) && !(want_cpu && t.device_id == 0))
      DLB_REFUSE(report, DLB_ERR_UNSUPPORTED_DEVICE,
                 "the buffer is on %s:%d and cannot be exported to %s:%d; dlbridge moves data only to the CPU "
                 "device {kDLCPU, 0}",
                 device_type_name(dev_type), static_cast<int>(dev.device_id), device_type_name(device_type_of(t)),
                 static_cast<int>(t.device_id));
  }
  // A move is needed when the consumer asked for the CPU and the host
  // cannot read the memory (host-readable memory, pinned or managed, is
  // handed over as CPU memory).
  const bool move_to_cpu = want_cpu && dev_type != kDLCPU && !device_is_host_readable(dev_type);

  // The legacy struct has no flag to say the sub-byte elements are padded
  // either: a legacy consumer would read the bytes as packed elements.
  if (legacy && (b->flags & DLB_BUFFER_SUBBYTE_PADDED) != 0)
    DLB_REFUSE(report, DLB_ERR_UNSUPPORTED_DTYPE,
               "the buffer's %u-bit elements are padded to a byte each, and a legacy DLManagedTensor has no flag "
               "to say so (its consumer would read them as packed); export a DLManagedTensorVersioned "
               "(max_version=(1, 1) or later)",
               static_cast<unsigned>(element_bits(b->tensor.dtype)));

  // Can the buffer's memory be handed out as it is? (The reason, when
  // not, is only put into words if a refusal is reported.)
  dlb_status share = DLB_OK;
  if (ops.shareable != nullptr) share = ops.shareable(b, nullptr, 0, stable);
  bool zero_copy = share == DLB_OK && !move_to_cpu;

  // The legacy struct has no flag to say READ_ONLY. Asked for explicitly
  // (DLB_EXPORT_READ_ONLY), it cannot be honoured, copy or not. Read-only
  // memory cannot go out zero-copy in it (the consumer would take it for
  // writable): a copy, the consumer's own, is made where copying is allowed
  // and lands where the export would (on the CPU), as for any copy the
  // export needs; DLB_EXPORT_ALLOW_READ_ONLY_LEGACY shares it anyway.
  if (legacy && (opt.flags & DLB_EXPORT_ALLOW_READ_ONLY_LEGACY) == 0) {
    if ((opt.flags & DLB_EXPORT_READ_ONLY) != 0)
      DLB_REFUSE(report, DLB_ERR_READ_ONLY,
                 "DLB_EXPORT_READ_ONLY was asked for and a legacy DLManagedTensor has no flag to carry it; export "
                 "a DLManagedTensorVersioned");
    if (zero_copy && (b->flags & DLB_BUFFER_READ_ONLY) != 0 && opt.copy != DLB_COPY_ALWAYS) {
      if (opt.copy == DLB_COPY_NEVER)
        DLB_REFUSE(report, DLB_ERR_READ_ONLY,
                   "the buffer is read-only, a legacy DLManagedTensor has no flag to say so, and copy was "
                   "forbidden (DLB_COPY_NEVER); allow a copy (DLB_COPY_IF_NEEDED; copy=None in Python), export a "
                   "DLManagedTensorVersioned (max_version=(1, 0)), or pass DLB_EXPORT_ALLOW_READ_ONLY_LEGACY if "
                   "the consumer will not write");
      if (dev_type != kDLCPU && !want_cpu)
        DLB_REFUSE(report, DLB_ERR_READ_ONLY,
                   "the buffer is read-only on %s:%d and a legacy DLManagedTensor has no flag to say so; a copy "
                   "would move it to the CPU, which was not asked for: ask for the CPU device (dl_device=(1, 0)), "
                   "export a DLManagedTensorVersioned, or pass DLB_EXPORT_ALLOW_READ_ONLY_LEGACY if the consumer "
                   "will not write",
                   device_type_name(dev_type), static_cast<int>(dev.device_id));
      zero_copy = false;
    }
  }

  const bool copy = opt.copy == DLB_COPY_ALWAYS || !zero_copy;
  if (copy) {
    const bool forbidden = !zero_copy && opt.copy == DLB_COPY_NEVER;
    if (forbidden || (opt.has_target_device != 0 && !want_cpu)) {
      if (report) return refuse_copy(b, opt, share);
      return forbidden ? (share != DLB_OK ? share : DLB_ERR_NOT_ZERO_COPY) : DLB_ERR_UNSUPPORTED_DEVICE;
    }
  }

  // The export's device: {kDLCPU, 0} for a copy or when the CPU was asked
  // for, else the buffer's own.
  const bool to_cpu = copy || want_cpu;
  // The stream rule of the Python protocol (streams.hpp), on the export's
  // device. Absent (stream=None): nothing to check. A storage that waits on
  // streams itself (a backend's wait callback) gets a given stream whatever
  // its device, so "no streams" does not apply to it.
  const bool stream_given = opt.stream != DLB_STREAM_NONE || (opt.flags & DLB_EXPORT_STREAM_GIVEN) != 0;
  if (stream_given) {
    const bool waits = ops.wait_ready != nullptr;
    StreamFault fault = consumer_stream_fault(to_cpu && !waits ? std::int32_t{kDLCPU} : dev_type, opt.stream);
    if (fault == StreamFault::no_streams && waits) fault = StreamFault::none;
    if (fault != StreamFault::none) {
      if (!report) return DLB_ERR_INVALID_ARGUMENT;
      return stream_refusal(fault, to_cpu && !waits ? DLDevice{kDLCPU, 0} : dev, opt.stream);
    }
  }

  // IS_COPIED only on an export that makes its copy itself: the consumer
  // then solely owns the memory. A zero-copy export of memory that was a
  // copy once (an imported IS_COPIED tensor) shares it, so it says nothing.
  std::uint64_t flags = 0;
  if (copy) {
    flags = DLPACK_FLAG_BITMASK_IS_COPIED;
    if ((opt.flags & DLB_EXPORT_READ_ONLY) != 0) flags |= DLPACK_FLAG_BITMASK_READ_ONLY;
  } else if ((b->flags & DLB_BUFFER_READ_ONLY) != 0 || (opt.flags & DLB_EXPORT_READ_ONLY) != 0) {
    flags |= DLPACK_FLAG_BITMASK_READ_ONLY;
  }
  if ((b->flags & DLB_BUFFER_SUBBYTE_PADDED) != 0) flags |= DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
  std::uint64_t bits = flags << Plan::kFlagsShift;
  if (copy) bits |= Plan::kCopy;
  if (to_cpu) bits |= Plan::kToCpu;
  if (!copy && ops.wait_ready != nullptr) bits |= Plan::kWait;
  if (!copy && ops.acquire_access != nullptr) bits |= Plan::kAccess;
  // Devices whose data is an address get byte_offset folded into data
  // (consumers such as torch ignore byte_offset); opaque handles keep it.
  if (!copy && device_data_is_address(dev_type)) bits |= Plan::kFoldOffset;
  plan->bits = bits;
  return DLB_OK;
}

#undef DLB_REFUSE

constexpr dlb_export_options kDefaultOptions = {sizeof(dlb_export_options), DLB_COPY_IF_NEEDED, 0, {kDLCPU, 0},
                                                DLB_STREAM_NONE, 0};

// The planner's default decisions as kept in dlb_buffer::default_plan: the
// Plan bits and two bits the planner leaves free saying for which kinds of
// export they hold (a read-only buffer's legacy export is a copy, its
// versioned one is not). One word, so that threads making the first default
// exports of a buffer at once may each store it without a lock (each stores
// a decision the planner made); 0: nothing cached.
constexpr std::uint64_t kCachedVersioned = 32;
constexpr std::uint64_t kCachedLegacy = 64;
static_assert((kCachedVersioned | kCachedLegacy) < (std::uint64_t{1} << Plan::kFlagsShift) &&
              ((kCachedVersioned | kCachedLegacy) &
               (Plan::kCopy | Plan::kWait | Plan::kAccess | Plan::kFoldOffset | Plan::kToCpu)) == 0);

// A default-options export whose decision is not cached: the planner for
// the default options, its decision kept in the buffer when the storage
// says it never changes, for the other kind of export too when the planner
// decides the same for it. Inlined: the planner for constant options is
// short, and a call would cost the first export of every buffer more.
__attribute__((always_inline)) inline dlb_status plan_default(dlb_buffer* b, bool versioned, Plan* plan) noexcept {
  bool stable = true;
  DLB_TRY(make_plan(b, kDefaultOptions, !versioned, true, plan, &stable));
  if (!stable) return DLB_OK;
  // For the default options the two kinds differ only for read-only memory
  // (make_plan's legacy step); for any other buffer the plan holds for both
  // without planning again (a second plan costs every fresh buffer's first
  // export, the import + re-export path).
  bool same = true;
  if ((b->flags & (DLB_BUFFER_READ_ONLY | DLB_BUFFER_SUBBYTE_PADDED)) != 0) {
    Plan other;
    bool other_stable = true;
    same = make_plan(b, kDefaultOptions, versioned, false, &other, &other_stable) == DLB_OK && other_stable &&
           other.bits == plan->bits;
  }
  const std::uint64_t kinds = same ? (kCachedVersioned | kCachedLegacy) : versioned ? kCachedVersioned : kCachedLegacy;
  b->default_plan.store(plan->bits | kinds, std::memory_order_relaxed);
  return DLB_OK;
}

// Builds the export. On failure nothing is left allocated and no reference
// is taken.
dlb_status build(dlb_buffer* b, const dlb_export_options* options, bool versioned, ExportBlock** out) noexcept {
  // Default options: the planner's decision cached by an earlier default
  // export. Other options, or nothing cached yet: the planner itself.
  Plan plan;
  bool cached = false;
  if (options == nullptr) {
    const std::uint64_t word = b->default_plan.load(std::memory_order_relaxed);
    if ((word & (versioned ? kCachedVersioned : kCachedLegacy)) != 0) {
      plan.bits = word & ~(kCachedVersioned | kCachedLegacy);
      cached = true;
    }
  }
  dlb_export_options opt;
  if (!cached && options != nullptr) DLB_TRY(read_options(options, &opt));
  if (b->deleted.load(std::memory_order_acquire))
    return set_error(DLB_ERR_DELETED,
                     "buffer was deleted (donated) and cannot be exported; exports made before stay valid");
  std::int64_t stream = DLB_STREAM_NONE;
  if (!cached) {
    if (options == nullptr) {
      DLB_TRY(plan_default(b, versioned, &plan));
    } else {
      bool stable = true;
      DLB_TRY(make_plan(b, opt, !versioned, true, &plan, &stable));
      stream = opt.stream;
    }
  }

  const std::int32_t ndim = b->tensor.ndim;
  ExportBlock* blk = take_block(ndim);
  if (blk == nullptr) return DLB_ERR_OUT_OF_MEMORY;
  blk->buffer = nullptr;
  blk->copy = nullptr;
  blk->access_ref = nullptr;
  blk->has_access = false;
  std::int64_t* shape = blk->dims();
  std::int64_t* strides = shape + blk->capacity;

  DLTensor t;
  t.device = plan.to_cpu() ? DLDevice{kDLCPU, 0} : b->tensor.device;
  t.ndim = ndim;
  t.dtype = b->tensor.dtype;
  t.shape = shape;
  t.strides = strides;
  if (plan.copy()) {
    void* mem = mem_alloc_aligned(64, static_cast<std::size_t>(b->nbytes));
    if (mem == nullptr) {
      give_back_block(blk);
      return set_error(DLB_ERR_OUT_OF_MEMORY, "out of memory allocating a copy of %" PRIu64 " bytes", b->nbytes);
    }
    const dlb_status s = buffer_copy_out(b, mem, b->nbytes, stream);
    if (s != DLB_OK) {
      mem_free_aligned(mem);
      give_back_block(blk);
      return s;
    }
    blk->copy = mem;
    for (std::int32_t i = 0; i < ndim; ++i) shape[i] = b->tensor.shape[i];
    compact_strides(ndim, shape, strides);
    t.data = mem;
    t.byte_offset = 0;
  } else {
    const std::int64_t* from_shape = b->tensor.shape;
    const std::int64_t* from_strides = b->tensor.strides;
    for (std::int32_t i = 0; i < ndim; ++i) {
      shape[i] = from_shape[i];
      strides[i] = from_strides[i];
    }
    void* data = b->tensor.data;
    if (plan.wait() || plan.access()) {
      dlb_status s = plan.wait() ? b->ops->wait_ready(b, stream) : DLB_OK;
      if (s == DLB_OK && plan.access()) s = b->ops->acquire_access(b, &data, &blk->access_ref);
      if (s != DLB_OK) {
        give_back_block(blk);
        return s;
      }
      blk->has_access = plan.access();
    }
    t.data = data;
    t.byte_offset = b->tensor.byte_offset;
    if (plan.fold_offset()) {
      // An empty tensor's data and offset are never read: no arithmetic on them.
      if (data != nullptr && b->nbytes != 0) t.data = static_cast<unsigned char*>(data) + t.byte_offset;
      t.byte_offset = 0;
    }
    // DLPack lets a zero-size tensor's data be NULL, but some consumers
    // (torch 1.13) then never call the deleter: hand them a valid address.
    if (t.data == nullptr && b->nbytes == 0) t.data = const_cast<unsigned char*>(kEmptyData);
    buffer_retain(b);
    blk->buffer = b;
  }

  if (versioned) {
    DLManagedTensorVersioned& m = blk->managed.versioned;
    m.version.major = DLB_DLPACK_MAJOR;
    m.version.minor = DLB_DLPACK_MINOR;
    m.manager_ctx = blk;
    m.deleter = deleter_versioned;
    m.flags = plan.flags();
    m.dl_tensor = t;
  } else {
    DLManagedTensor& m = blk->managed.legacy;
    m.dl_tensor = t;
    m.manager_ctx = blk;
    m.deleter = deleter_legacy;
  }
  live_add(1);
  *out = blk;
  return DLB_OK;
}

}  // namespace

dlb_status export_versioned(dlb_buffer* b, const dlb_export_options* options, DLManagedTensorVersioned** out) noexcept {
  if (b == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "buffer is NULL");
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  ExportBlock* blk = nullptr;
  DLB_TRY(build(b, options, true, &blk));
  *out = &blk->managed.versioned;
  return DLB_OK;
}

dlb_status export_legacy(dlb_buffer* b, const dlb_export_options* options, DLManagedTensor** out) noexcept {
  if (b == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "buffer is NULL");
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  ExportBlock* blk = nullptr;
  DLB_TRY(build(b, options, false, &blk));
  *out = &blk->managed.legacy;
  return DLB_OK;
}

std::int64_t live_exports() noexcept { return live_total(); }

bool own_legacy_export(const DLManagedTensor* m, std::uint64_t* dl_flags) noexcept {
  if (m->deleter != deleter_legacy) return false;
  const ExportBlock* blk = static_cast<const ExportBlock*>(m->manager_ctx);
  std::uint64_t f = 0;
  if (blk->copy != nullptr)
    f = DLPACK_FLAG_BITMASK_IS_COPIED;
  else if (blk->buffer != nullptr && (blk->buffer->flags & DLB_BUFFER_READ_ONLY) != 0)
    f = DLPACK_FLAG_BITMASK_READ_ONLY;
  *dl_flags = f;
  return true;
}

namespace {

// What a zero-copy export to the CPU hands out, as a buffer: the same
// memory, strides and offset on {kDLCPU, 0}, after the storage's wait and
// under its zero-copy access, both kept until the view goes.
dlb_status relabel_to_cpu(dlb_buffer* b, const Plan& plan, std::int64_t stream, dlb_buffer** out) noexcept {
  void* data = b->tensor.data;
  void* ref = nullptr;
  if (plan.wait()) DLB_TRY(b->ops->wait_ready(b, stream));
  if (plan.access()) DLB_TRY(b->ops->acquire_access(b, &data, &ref));
  DLTensor view = b->tensor;
  view.data = data;
  view.device = DLDevice{kDLCPU, 0};
  LayoutInfo info;
  info.nbytes = b->nbytes;
  info.contiguous = b->contiguous;
  StorageState state{};
  state.relabelled.parent = b;
  state.relabelled.ref = ref;
  std::uint64_t flags = (plan.flags() & DLPACK_FLAG_BITMASK_READ_ONLY) != 0 ? DLB_BUFFER_READ_ONLY : 0;
  flags |= b->flags & DLB_BUFFER_SUBBYTE_PADDED;
  dlb_buffer* r = buffer_create(view, info, kRelabelledStorage, flags, state);
  if (r == nullptr) {
    if (plan.access()) b->ops->release_access(b, ref);
    return DLB_ERR_OUT_OF_MEMORY;
  }
  buffer_retain(b);
  *out = r;
  return DLB_OK;
}

// A copy of `b` on `opt.target_device`, a device whose built-in backend
// takes host data: allocated there, filled from `b`'s host-readable memory
// (its own, or a host copy of it).
dlb_status resolve_to_device(dlb_buffer* b, const dlb_export_options& opt, const DeviceBackend& be,
                             dlb_buffer** out) noexcept {
  const DLDevice t = opt.target_device;
  if (opt.copy == DLB_COPY_NEVER)
    return set_error(DLB_ERR_NOT_ZERO_COPY,
                     "the buffer is on %s:%d and %s:%d was asked for, which takes a copy, and copy was forbidden "
                     "(DLB_COPY_NEVER)",
                     device_type_name(device_type_of(b->tensor.device)), static_cast<int>(b->tensor.device.device_id),
                     device_type_name(device_type_of(t)), static_cast<int>(t.device_id));
  if ((b->flags & DLB_BUFFER_SUBBYTE_PADDED) != 0)
    return set_error(DLB_ERR_UNSUPPORTED_DTYPE,
                     "the buffer's sub-byte elements are padded to a byte each; the %s backend takes packed ones only",
                     be.name);
  dlb_export_options host_opt = opt;
  host_opt.target_device = DLDevice{kDLCPU, 0};
  host_opt.copy = DLB_COPY_IF_NEEDED;
  host_opt.stream = DLB_STREAM_NONE;  // the stream is the target device's, not the host's
  host_opt.flags &= ~(DLB_EXPORT_READ_ONLY | DLB_EXPORT_STREAM_GIVEN);
  dlb_buffer* host = nullptr;
  DLB_TRY(buffer_resolve(b, &host_opt, &host));
  dlb_buffer* dst = nullptr;
  dlb_status s = be.alloc(t, b->tensor.dtype, b->tensor.ndim, b->tensor.shape, &dst);
  if (s == DLB_OK) s = be.copy_from_host(dst, host->tensor);
  buffer_release(host);
  if (s != DLB_OK) {
    if (dst != nullptr) buffer_release(dst);
    return s;
  }
  // Nobody else holds the new buffer yet: its flags are still ours to set.
  dst->flags |= DLB_BUFFER_COPIED;
  if ((opt.flags & DLB_EXPORT_READ_ONLY) != 0) dst->flags |= DLB_BUFFER_READ_ONLY;
  *out = dst;
  return DLB_OK;
}

}  // namespace

dlb_status buffer_resolve(dlb_buffer* b, const dlb_export_options* options, dlb_buffer** out) noexcept {
  if (b == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "buffer is NULL");
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  dlb_export_options opt;
  DLB_TRY(read_options(options, &opt));
  if (b->deleted.load(std::memory_order_acquire))
    return set_error(DLB_ERR_DELETED, "buffer was deleted (donated) and cannot be resolved");
  // Another device than the buffer's, whose built-in backend takes host
  // data: a copy there.
  if (opt.has_target_device != 0 && device_type_of(opt.target_device) != kDLCPU &&
      !same_device(opt.target_device, b->tensor.device) && opt.target_device.device_id >= 0) {
    const DeviceBackend* be = device_backend(device_type_of(opt.target_device));
    if (be != nullptr && be->copy_from_host != nullptr) return resolve_to_device(b, opt, *be, out);
  }
  Plan plan;
  bool stable = true;
  DLB_TRY(make_plan(b, opt, false, true, &plan, &stable));
  if (!plan.copy() && (!plan.to_cpu() || same_device(b->tensor.device, DLDevice{kDLCPU, 0}))) {
    buffer_retain(b);
    *out = b;
    return DLB_OK;
  }
  if (!plan.copy()) return relabel_to_cpu(b, plan, opt.stream, out);
  std::uint64_t flags = DLB_BUFFER_COPIED;
  if ((plan.flags() & DLPACK_FLAG_BITMASK_READ_ONLY) != 0) flags |= DLB_BUFFER_READ_ONLY;
  return buffer_to_host(b, opt.stream, flags, out);
}


}  // namespace dlb

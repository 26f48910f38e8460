/**
 * @file share.h
 * dlbridge: sharing tensors with other processes (Linux).
 *
 * A shared buffer's memory is an anonymous memory file (memfd_create),
 * sealed against shrinking and growing, so nothing is left behind in
 * /dev/shm when a process dies. Its descriptor is a file descriptor plus a
 * small versioned, self-checking description of the tensor laid over the
 * file (dtype, shape, strides, byte offset, flags). Another process that
 * receives both (over a Unix socket, dlb_share_send()/dlb_share_recv(), or
 * across fork()) maps the file with dlb_buffer_open_shared() and gets an
 * ordinary dlb_buffer over the same memory: writes on either side are seen
 * by the other.
 *
 * CUDA device memory of the built-in CUDA backend (kDLCUDA) is shared
 * through CUDA IPC instead: its descriptor carries no file (fd -1) but a
 * CUDA IPC memory handle of the allocation and an IPC event handle that
 * orders the receiver after the producer's last write (DLB_SHARE_KIND_CUDA_IPC).
 *
 * This header is included by dlbridge.h and may also be included alone; it
 * compiles as C99 and as C++.
 */
#ifndef DLBRIDGE_SHARE_H_
#define DLBRIDGE_SHARE_H_

#include <stddef.h>
#include <stdint.h>

#include "dlbridge/buffer.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup dlb_share Sharing with other processes
 * @brief Buffers in shared memory, their descriptors, and passing them on.
 * @{
 */

/** Version of the description format that this library writes and reads. */
#define DLB_SHARE_DESCRIPTION_VERSION 1
/** Bytes of a description's fixed part (before shape and strides). */
#define DLB_SHARE_DESCRIPTION_HEADER 56
/** Bytes a CUDA IPC description adds after the strides: a CUDA IPC memory
 *  handle and a CUDA IPC event handle, 64 bytes each. */
#define DLB_SHARE_CUDA_HANDLES 128
/** Largest description: the fixed part, shape and strides of DLB_MAX_NDIM
 *  dimensions (8 bytes each), and the CUDA IPC handles. */
#define DLB_SHARE_DESCRIPTION_MAX (DLB_SHARE_DESCRIPTION_HEADER + 16 * DLB_MAX_NDIM + DLB_SHARE_CUDA_HANDLES)
/** Description kind (bits 8-15 of its flags field, bytes 16-23): host
 *  memory in the descriptor's file. */
#define DLB_SHARE_KIND_HOST 0
/** Description kind: CUDA device memory named by the CUDA IPC handles the
 *  description carries; the descriptor has no file (fd -1). */
#define DLB_SHARE_KIND_CUDA_IPC 1

/** dlb_buffer_share() flag: memory that is not shared yet is copied once
 *  into new shared memory (else DLB_ERR_NOT_ZERO_COPY). */
#define DLB_SHARE_COPY_IF_NEEDED (UINT64_C(1) << 0)
/** dlb_buffer_share() flag: the receiver gets read-only access (the
 *  descriptor's file descriptor is opened read-only). Implied for a
 *  read-only buffer. dlb_buffer_open_shared() flag: map read-only even when
 *  the descriptor allows writing. */
#define DLB_SHARE_READ_ONLY (UINT64_C(1) << 1)
/** dlb_buffer_open_shared() flag: the file descriptor is the library's from
 *  the call on, on success (the buffer keeps it, no duplicate is made) and
 *  on failure (it is closed). For a receiver that has no other use for it;
 *  its close-on-exec flag is left as it is (pidfd_getfd() and
 *  dlb_share_recv() give close-on-exec descriptors). */
#define DLB_SHARE_TAKE_FD (UINT64_C(1) << 2)

/**
 * What a receiving process needs to map a shared buffer.
 *
 * `description` holds `size` bytes in the format of
 * DLB_SHARE_DESCRIPTION_VERSION: plain bytes that may be copied, stored and
 * sent as they are (they hold no pointer). `fd` is the memory file; -1
 * when the descriptor holds none (always for DLB_SHARE_KIND_CUDA_IPC).
 */
typedef struct dlb_share_descriptor {
  int32_t fd;        /**< the memory file, or -1 */
  uint32_t size;     /**< bytes of `description` in use */
  unsigned char description[DLB_SHARE_DESCRIPTION_MAX]; /**< the layout description */
} dlb_share_descriptor;

/**
 * Allocates a zero-filled compact row-major host tensor in shared memory.
 *
 * The memory is a sealed anonymous memory file, mapped readable and
 * writable, page-aligned. It goes away (unmapped, file closed) when the
 * last reference and the last export of the buffer are gone; another
 * process that opened it keeps its own mapping.
 * @param device must be {kDLCPU, 0}.
 * @param dtype element type; must pass dlb_dtype_check().
 * @param ndim 0 to DLB_MAX_NDIM.
 * @param shape `ndim` extents, read during the call; NULL only when ndim is 0.
 * @param out on success receives a new buffer with one reference, owned by
 *        the caller (dlb_buffer_release). Untouched on failure, when nothing
 *        is left allocated or open.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (NULL out or shape, ndim out of
 *         range); DLB_ERR_MALFORMED (negative extent);
 *         DLB_ERR_UNSUPPORTED_DTYPE; DLB_ERR_UNSUPPORTED_DEVICE (not the
 *         CPU); DLB_ERR_OVERFLOW; DLB_ERR_OUT_OF_MEMORY (also when the
 *         system refuses the memory file or its mapping, with its reason).
 * Thread-safe.
 */
DLB_API dlb_status dlb_buffer_alloc_shared(DLDevice device, DLDataType dtype, int32_t ndim,
                                           const int64_t* shape, dlb_buffer** out);

/**
 * A new shared buffer holding a copy of a buffer's elements.
 *
 * The result is what dlb_buffer_alloc_shared() makes (host memory another
 * process can map, shared without a further copy by dlb_buffer_share()),
 * with `buffer`'s dtype and shape, compact row-major, and its elements
 * copied once from wherever `buffer` lies (host, or backend memory the
 * library can copy from). Prefer it to dlb_buffer_share() with
 * DLB_SHARE_COPY_IF_NEEDED when this process keeps the tensor: its mapping
 * stays the one the copy wrote through, which also spares receivers work
 * (docs/sharing.md, "A copy's pages").
 * @param buffer the source; not consumed (its reference stays the caller's).
 * @param flags 0 or DLB_SHARE_READ_ONLY. The copy is read-only when asked
 *        for or when `buffer` is: then it is mapped PROT_READ here and its
 *        file is held open read-only, so no descriptor of it can write.
 * @param out on success receives the new buffer, owned by the caller
 *        (release with dlb_buffer_release()); untouched on failure, when
 *        nothing is left allocated or mapped.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (NULL buffer or out, unknown
 *         flag bits); DLB_ERR_DELETED; DLB_ERR_UNSUPPORTED_DEVICE (the copy
 *         cannot reach the memory); DLB_ERR_OVERFLOW;
 *         DLB_ERR_OUT_OF_MEMORY (also when the system refuses the memory
 *         file or its mapping, with its reason) and the statuses of a copy.
 * Thread-safe.
 */
DLB_API dlb_status dlb_buffer_copy_shared(dlb_buffer* buffer, uint64_t flags, dlb_buffer** out);

/**
 * The descriptor of a buffer for another process.
 *
 * A buffer whose elements lie in shared memory of this library (made by
 * dlb_buffer_alloc_shared() or dlb_buffer_open_shared(), or any buffer
 * viewing such memory, e.g. one imported back from a framework's view of
 * it) is shared without a copy: the receiver sees the same memory. Other
 * host-readable or backend memory is refused unless
 * DLB_SHARE_COPY_IF_NEEDED is given; then it is copied once into new
 * shared memory, which lives on in the descriptor's file only.
 *
 * CUDA device memory (kDLCUDA) of the built-in CUDA backend is shared
 * without a copy through CUDA IPC (DLB_SHARE_KIND_CUDA_IPC): the
 * description carries cuIpcGetMemHandle() of the allocation's base, the
 * data's offset in it, and the handle of an interprocess event recorded on
 * the buffer's stream (dlb_cuda_buffer_stream()) after its last write; `fd`
 * is -1. The buffer keeps the event until it is freed. The memory stays
 * the producer's: keep the buffer alive until every receiver has released
 * what it opened. Pinned host and managed CUDA memory have no IPC handle
 * and go the host way (a copy when allowed).
 * @param buffer the buffer; not consumed (its reference stays the caller's).
 * @param flags 0, DLB_SHARE_COPY_IF_NEEDED, DLB_SHARE_READ_ONLY.
 * @param out on success receives the description and a new file
 *        descriptor (close-on-exec) that the caller owns: close it with
 *        dlb_share_descriptor_close() once it is sent or no longer needed.
 *        Untouched on failure, when no file descriptor is left open.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (NULL buffer or out, unknown
 *         flag bits, or the system refused a file descriptor);
 *         DLB_ERR_DELETED; DLB_ERR_NOT_ZERO_COPY (memory not shared and no
 *         copy allowed: the message says what the memory is);
 *         DLB_ERR_UNSUPPORTED_DEVICE (the copy cannot reach the memory);
 *         DLB_ERR_OUT_OF_MEMORY and the statuses of a copy;
 *         DLB_ERR_BACKEND (CUDA: a driver call failed, the message names
 *         it).
 * Thread-safe.
 */
DLB_API dlb_status dlb_buffer_share(dlb_buffer* buffer, uint64_t flags, dlb_share_descriptor* out);

/**
 * Whether dlb_buffer_share() would share the buffer without a copy: its
 * elements lie in shared memory this library mapped (a file of its own or
 * a pool slot), or it is CUDA device memory of the built-in backend.
 * Unlike dlb_buffer_share() it makes no descriptor and marks no pool slot.
 * @param buffer the buffer; not consumed.
 * @param out on success receives 1 or 0; untouched on failure.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (NULL buffer or out);
 *         DLB_ERR_DELETED. Thread-safe.
 */
DLB_API dlb_status dlb_buffer_is_shared(dlb_buffer* buffer, int32_t* out);

/**
 * Maps a shared buffer that another process (or this one) described.
 *
 * The description is checked completely before anything is mapped: its
 * magic, version, declared size and checksum, its flags, dtype, shape and
 * strides, and that every byte its layout reaches lies inside the file,
 * whose size (fstat) must be the one it declares and which must be sealed
 * against shrinking. The mapping is read-only when the description says
 * read-only, when `flags` has DLB_SHARE_READ_ONLY, and then the buffer is
 * DLB_BUFFER_READ_ONLY.
 *
 * A CUDA IPC description (DLB_SHARE_KIND_CUDA_IPC) is opened with the
 * driver in the library's CUDA backend of its device: cuIpcOpenMemHandle()
 * (CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), whose allocation must be at least
 * the size the description declares (cuMemGetAddressRange() of the opened
 * address), then the event handle,
 * on which the legacy default stream is made to wait. The result is a CUDA
 * buffer (dlb_cuda_buffer_stream() 1) whose release calls
 * cuIpcCloseMemHandle() once. CUDA refuses to open a handle in the process
 * that made it (DLB_ERR_INVALID_ARGUMENT here).
 * @param fd the memory file. Without DLB_SHARE_TAKE_FD it stays the
 *        caller's, who may close it right after the call, on success or
 *        failure (the buffer keeps a duplicate of its own, for sharing it
 *        on); with DLB_SHARE_TAKE_FD the call takes it, on success (the
 *        buffer keeps it) and on failure (closed). -1 for a CUDA IPC
 *        description.
 * @param description `size` bytes of description, read during the call.
 * @param size bytes at `description` (the descriptor's `size` field).
 * @param flags 0, DLB_SHARE_READ_ONLY, DLB_SHARE_TAKE_FD.
 * @param out on success receives a new buffer with one reference, owned by
 *        the caller; the mapping goes when the last reference and the last
 *        export are gone. Untouched on failure, when nothing is mapped or
 *        left open.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (NULL description or out, fd
 *         negative or not a sealed memory file, unknown flag bits);
 *         DLB_ERR_MALFORMED (truncated or oversized, not a description,
 *         checksum mismatch, unknown description flags, a file size other
 *         than the file's, a negative extent, a layout reaching outside the
 *         file); DLB_ERR_VERSION (another description version);
 *         DLB_ERR_UNSUPPORTED_DTYPE; DLB_ERR_UNSUPPORTED_DEVICE (not host
 *         memory); DLB_ERR_UNSUPPORTED_LAYOUT (strided sub-byte elements);
 *         DLB_ERR_OVERFLOW (extents or strides whose bytes pass 64 bits);
 *         DLB_ERR_READ_ONLY (a writable description over a file descriptor
 *         opened read-only, without DLB_SHARE_READ_ONLY);
 *         DLB_ERR_OUT_OF_MEMORY (the mapping was refused).
 *         For CUDA IPC: DLB_ERR_INVALID_ARGUMENT (fd not -1; the handle
 *         was made in this process); DLB_ERR_UNSUPPORTED_DEVICE (no CUDA
 *         driver, built without CUDA, no such device); DLB_ERR_MALFORMED
 *         (the opened allocation is smaller than declared);
 *         DLB_ERR_BACKEND (the driver refused the handles, e.g. of memory
 *         already freed: the message names the call and its error).
 * Thread-safe.
 */
DLB_API dlb_status dlb_buffer_open_shared(int32_t fd, const void* description, size_t size, uint64_t flags,
                                          dlb_buffer** out);

/**
 * The kind of a description: DLB_SHARE_KIND_HOST (memory in the
 * descriptor's file) or DLB_SHARE_KIND_CUDA_IPC (CUDA device memory named
 * by handle; the descriptor carries no file, fd -1). For bindings and
 * callers that must know which before opening or passing a descriptor on,
 * without reading the format themselves.
 *
 * The description is checked as dlb_buffer_open_shared() checks it before
 * it looks at a file or a driver (magic, version, declared size,
 * checksum, flags, dtype, shape and strides against the declared size).
 * @param description `size` bytes of description, read during the call.
 * @param size bytes at `description`.
 * @param kind on success receives the kind; untouched on failure.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (NULL description or kind);
 *         DLB_ERR_MALFORMED, DLB_ERR_VERSION, DLB_ERR_UNSUPPORTED_DTYPE,
 *         DLB_ERR_UNSUPPORTED_DEVICE, DLB_ERR_UNSUPPORTED_LAYOUT,
 *         DLB_ERR_OVERFLOW as dlb_buffer_open_shared() refuses the same
 *         bytes.
 * Thread-safe.
 */
DLB_API dlb_status dlb_share_description_kind(const void* description, size_t size, uint32_t* kind);

/**
 * Closes the descriptor's file descriptor (when it is not -1) and sets it
 * to -1. NULL-safe; calling it twice is harmless.
 */
DLB_API void dlb_share_descriptor_close(dlb_share_descriptor* descriptor);

/**
 * Sends a descriptor over a connected Unix socket (stream, seqpacket or
 * datagram): the description bytes, with the file descriptor attached
 * (SCM_RIGHTS) to the first byte; a CUDA IPC description goes without one.
 * Blocks until all is written; EINTR is retried; no SIGPIPE is raised.
 * @param socket_fd the socket; not closed.
 * @param descriptor read during the call; its fd stays the caller's (the
 *        receiver gets a duplicate): close it after sending.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (NULL descriptor, no fd for a
 *         host description or one for a CUDA IPC description, a size out
 *         of range, or the socket failed: the message has the system's
 *         reason).
 * Thread-safe (one sender per socket at a time).
 */
DLB_API dlb_status dlb_share_send(int32_t socket_fd, const dlb_share_descriptor* descriptor);

/**
 * Receives one descriptor sent by dlb_share_send().
 *
 * Only the bytes of the framing are checked here (a description's declared
 * size, a file descriptor attached); dlb_buffer_open_shared() checks the
 * rest.
 * @param socket_fd the socket; not closed.
 * @param out on success receives the description and a new file descriptor
 *        (close-on-exec) owned by the caller (-1 for a CUDA IPC
 *        description, which arrives without one); at the end of a stream (the
 *        peer closed before sending another byte) DLB_OK with `out->fd` -1
 *        and `out->size` 0. Untouched on failure, when every file
 *        descriptor that arrived has been closed.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (NULL out, or the socket failed:
 *         the message has the system's reason); DLB_ERR_MALFORMED (a
 *         message cut short, too large, a host description without a file
 *         descriptor, a CUDA IPC one with one, or more than one).
 * Thread-safe (one receiver per socket at a time).
 */
DLB_API dlb_status dlb_share_recv(int32_t socket_fd, dlb_share_descriptor* out);

/**
 * Shared-memory mappings this library holds in this process (made by
 * dlb_buffer_alloc_shared() or dlb_buffer_open_shared() and not yet
 * unmapped). For leak checks. Thread-safe.
 */
DLB_API int64_t dlb_shared_mappings(void);

/*
 * The small-tensor pool.
 *
 * Small tensors handed to another process one by one (a data loader's
 * batches, a queue of requests) cost a memory file each: the receiver takes
 * the file, maps it, faults its page in, then unmaps and closes it, which
 * costs more than copying a few KiB. The pool puts small writable tensors
 * into slots of shared "slabs" (one memory file of 64 equal slots) instead.
 * A process that receives a tensor of a slab for the first time maps the
 * whole slab once and keeps it; every later tensor of that slab is opened
 * from the kept mapping without a system call.
 *
 * Each slot has a reference count in the slab's header (in the shared
 * memory itself, changed atomically by every process that holds the slot);
 * the process that made the slab reuses a slot only when its count is 0.
 * A ticket (dlb_share_pool_issue()) holds one reference until a process
 * opens it (dlb_share_pool_open()), which adopts that reference and drops
 * it when its buffer is released; a ticket opens once (a cell in the
 * header holds its random token, taken atomically). A ticket never opened,
 * and a reference held by a process that died, keep their slot from reuse
 * until the slab's owner exits (the memory stays valid: nothing is ever
 * reused under a holder). After fork() neither process reuses a slot of a
 * slab that existed before it: the child may hold the same slots through
 * the buffers it inherited.
 *
 * A pooled buffer shared with dlb_buffer_share() gives the whole slab's
 * file (its description's byte offset is the slot's); that slot is then
 * never reused, since the descriptor's receiver holds no reference. Any
 * process that maps a slab can read and write all of its slots: pool only
 * tensors that processes of the same user may see.
 */

/** dlb_buffer_copy_shared() flag: a writable copy of at most
 *  DLB_SHARE_POOL_MAX_BYTES bytes goes into a slot of this process's
 *  pool; a larger or read-only one gets a file of its own as without it. */
#define DLB_SHARE_POOLED (UINT64_C(1) << 3)
/** Largest tensor the pool takes (bytes). */
#define DLB_SHARE_POOL_MAX_BYTES (64 * 1024)
/** Largest ticket in bytes (its fixed part and a description). */
#define DLB_SHARE_POOL_TICKET_MAX (64 + DLB_SHARE_DESCRIPTION_MAX)

/**
 * A ticket for one pooled tensor: plain bytes that may be copied and sent
 * as they are (they hold no pointer and no file descriptor), versioned,
 * checksummed, valid on this machine only: the issuing process's pid and
 * the number of the slab's file descriptor there, the slab file's device
 * and inode, the slot, the ticket's cell and token, and the tensor's
 * description (DLB_SHARE_DESCRIPTION_VERSION) over the slab's file.
 */
typedef struct dlb_share_pool_ticket {
  uint32_t size;                                    /**< bytes used in `bytes` */
  unsigned char bytes[DLB_SHARE_POOL_TICKET_MAX];   /**< the ticket */
} dlb_share_pool_ticket;

/**
 * A ticket for a pooled buffer (one made with DLB_SHARE_POOLED, or opened
 * from a ticket): one more reference to its slot, held by the ticket until
 * it is opened.
 * @param buffer the buffer; not consumed (its reference stays the caller's).
 * @param out on success receives the ticket (owns nothing; a ticket that
 *        is never opened keeps its slot from reuse until the slab's owner
 *        exits). Untouched on failure, when no reference was taken.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (NULL buffer or out);
 *         DLB_ERR_DELETED; DLB_ERR_NOT_ZERO_COPY (the buffer's elements do
 *         not lie in one slot of a slab this process maps: share it with
 *         dlb_buffer_share()); DLB_ERR_OUT_OF_MEMORY (every ticket cell of
 *         its slab is held by a ticket not yet opened).
 * Thread-safe.
 */
DLB_API dlb_status dlb_share_pool_issue(dlb_buffer* buffer, dlb_share_pool_ticket* out);

/**
 * Who issued a ticket and under which descriptor number the slab's file is
 * open there, for a receiver that must take the file
 * (pidfd_getfd(), or /proc/PID/fd/N) before dlb_share_pool_open(). The
 * ticket is checked (magic, version, size, checksum) first.
 * @param ticket the ticket, read during the call.
 * @param pid receives the issuing process's pid (may be NULL).
 * @param fd receives the slab's file descriptor number in it (may be NULL).
 * @param dev receives the slab file's device (may be NULL).
 * @param ino receives the slab file's inode (may be NULL).
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (NULL ticket); DLB_ERR_MALFORMED
 *         (not a ticket, cut short, checksum mismatch); DLB_ERR_VERSION.
 *         Outputs untouched on failure. Thread-safe.
 */
DLB_API dlb_status dlb_share_pool_ticket_source(const dlb_share_pool_ticket* ticket, int32_t* pid, int32_t* fd,
                                                uint64_t* dev, uint64_t* ino);

/**
 * Opens a ticket: a buffer over its slot, which adopts the ticket's
 * reference. When this process maps the ticket's slab already (it made it,
 * or opened a ticket of it before and kept it), nothing else is needed and
 * no system call is made. Otherwise the slab's file is needed: with `fd`
 * -1 the call returns DLB_OK with `*out` NULL (take the file, then call
 * again with it); with a file descriptor it checks that it is the slab the
 * ticket names (device and inode), a sealed memory file of a slab's size
 * whose header is a slab's, maps the whole slab and keeps it.
 * @param ticket the ticket, read during the call.
 * @param fd -1, or the slab's file. With DLB_SHARE_TAKE_FD the call takes
 *        it, on success (kept with the slab's mapping, or closed when the
 *        slab was mapped meanwhile) and on failure (closed); without it, it
 *        stays the caller's.
 * @param flags 0, DLB_SHARE_READ_ONLY (the buffer is DLB_BUFFER_READ_ONLY;
 *        the slab stays mapped writable), DLB_SHARE_TAKE_FD.
 * @param out on success receives a new buffer with one reference, owned by
 *        the caller, or NULL when the slab's file is needed (fd -1 only);
 *        the slot's reference goes when its last reference and last export
 *        are gone. Untouched on failure, when the ticket's reference was
 *        not taken.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (NULL ticket or out, unknown
 *         flags, a file that is not the ticket's slab or not a sealed
 *         memory file); DLB_ERR_MALFORMED (not a ticket, cut short,
 *         checksum mismatch, a layout outside its slot, a slab header or
 *         size that is not a slab's); DLB_ERR_VERSION; DLB_ERR_DELETED (the
 *         ticket was opened already); DLB_ERR_OUT_OF_MEMORY; and the
 *         statuses of dlb_buffer_open_shared() for its description.
 * Thread-safe.
 */
DLB_API dlb_status dlb_share_pool_open(const dlb_share_pool_ticket* ticket, int32_t fd, uint64_t flags,
                                       dlb_buffer** out);

/**
 * The slab file with device `dev` and inode `ino`, if this process maps
 * it: a descriptor with a new file descriptor (close-on-exec) owned by the
 * caller and a description of the whole slab as bytes, for handing the
 * file to a process that cannot take it itself (dlb_share_send()).
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (NULL out); DLB_ERR_DELETED (no
 *         such slab is mapped here). `out` untouched on failure.
 * Thread-safe.
 */
DLB_API dlb_status dlb_share_pool_file(uint64_t dev, uint64_t ino, dlb_share_descriptor* out);

/** What the pool holds in this process (dlb_share_pool_stats()). */
typedef struct dlb_share_pool_state {
  int64_t slabs;        /**< slabs mapped: made here, or kept after opening a ticket */
  int64_t references;   /**< slot references held by this process's buffers */
} dlb_share_pool_state;

/**
 * The pool's state in this process, for leak checks.
 * @param out on success receives the counts (plain values; nothing to
 *        release); untouched on failure.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (NULL out). Thread-safe.
 */
DLB_API dlb_status dlb_share_pool_stats(dlb_share_pool_state* out);

/**
 * Unmaps (and closes the file of) every slab in which this process holds no reference
 * and of which it issued no ticket still to be opened (its receiver may
 * need this process's file descriptor). Other processes that hold slots of
 * such a slab keep their own mappings, so their memory stays valid; a slab
 * made here is not taken slots from again once unmapped. A process keeps
 * up to 8 slabs it holds nothing in without this call; it gives their
 * memory back at once. Buffers, tickets and other processes' mappings are
 * not touched.
 * @return the number of slabs unmapped. Thread-safe.
 */
DLB_API int64_t dlb_share_pool_trim(void);
/** @} */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DLBRIDGE_SHARE_H_ */

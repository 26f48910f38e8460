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
/** Read-only: what the call makes is read-only, and it is implied when
 *  what the call starts from (a buffer, a description) is read-only. The
 *  descriptor or ticket of dlb_buffer_share() and dlb_share_ticket_issue()
 *  (its file descriptor opened read-only, so receivers map it PROT_READ),
 *  the copy of dlb_buffer_copy_shared(), the mapping of
 *  dlb_buffer_open_shared() and dlb_share_ticket_open(). */
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
 * elements lie in shared memory this library mapped, or it is CUDA device
 * memory of the built-in backend. Unlike dlb_buffer_share() it makes no
 * descriptor.
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
 * Tickets: handing a buffer to a process of this machine through any
 * channel that carries bytes (a multiprocessing queue, a pipe, a file).
 *
 * dlb_share_ticket_issue() shares the buffer as dlb_buffer_share() does and
 * keeps the descriptor's file in this process, with a library thread (the
 * ticket server) that holds it until the ticket is opened; the ticket
 * names this process, its server, the file's device and inode, a random
 * token, and holds the description. dlb_share_ticket_open() in the
 * receiver connects to the issuer's server (an abstract Unix socket:
 * nothing on disk), checks that it is the process the ticket names, and
 * asks for the file by the token; the server decides at that moment: the
 * first request with the token gets the file (SCM_RIGHTS) and the ticket is
 * forgotten, so a ticket opens once. The server answers processes of its
 * own user (or root) only. A CUDA IPC ticket holds its description only (no
 * file, no server). The server is started by the first ticket and takes no
 * signal. After fork() the child has no server: its copies of the server's
 * descriptors are closed, and it starts its own with its first ticket.
 *
 * A ticket that is never opened keeps its file open in the issuing process
 * until it is withdrawn: by dlb_share_ticket_withdraw(); when the process
 * holds half its file descriptor limit (RLIMIT_NOFILE) in unopened tickets,
 * the oldest then; or when the process exits. A process about to exit may
 * wait for its receivers with dlb_share_ticket_wait().
 */

/** Largest ticket in bytes: 64 bytes of source and a description. */
#define DLB_SHARE_TICKET_MAX (64 + DLB_SHARE_DESCRIPTION_MAX)
/** dlb_share_ticket_open() flag, accepted for compatibility: every open
 *  asks the sender's server for the file. */
#define DLB_SHARE_VIA_SERVER (UINT64_C(1) << 3)

/** A ticket: plain bytes that may be copied and sent as they are (no
 *  pointer, no file descriptor), valid on this machine only. */
typedef struct dlb_share_ticket {
  uint32_t size;                                /**< bytes used in `bytes` */
  unsigned char bytes[DLB_SHARE_TICKET_MAX];    /**< the ticket */
} dlb_share_ticket;

/**
 * A ticket for a buffer, for one process that opens it once.
 * @param buffer the buffer; not consumed (its reference stays the caller's).
 * @param flags 0, DLB_SHARE_COPY_IF_NEEDED, DLB_SHARE_READ_ONLY, as for
 *        dlb_buffer_share().
 * @param out on success receives the ticket (owns nothing: the file it
 *        names is kept by this process's ticket server until the ticket is
 *        opened or withdrawn, or this process exits). Untouched on
 *        failure, when no file descriptor is left open.
 * @return DLB_OK; the statuses of dlb_buffer_share(); DLB_ERR_OUT_OF_MEMORY
 *         (the ticket server could not start or record the file: the
 *         message says why).
 * Thread-safe.
 */
DLB_API dlb_status dlb_share_ticket_issue(dlb_buffer* buffer, uint64_t flags, dlb_share_ticket* out);

/**
 * Opens a ticket: takes the file it names from its issuer's server (see
 * above) and maps it as
 * dlb_buffer_open_shared() does; a CUDA IPC ticket opens its description.
 * @param ticket `size` bytes of ticket (a dlb_share_ticket's `bytes`),
 *        read during the call. Opens once: the issuer's server decides
 *        which request is first; any other open of the same ticket, at
 *        once or later, fails with DLB_ERR_DELETED.
 * @param size bytes at `ticket` (a dlb_share_ticket's `size`).
 * @param flags 0, DLB_SHARE_READ_ONLY, DLB_SHARE_VIA_SERVER.
 * @param out on success receives a new buffer with one reference, owned
 *        by the caller. Untouched on failure, when nothing is mapped or
 *        left open.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (NULL ticket or out, unknown
 *         flag bits; "permission denied": the issuer belongs to another
 *         user, the message names both); DLB_ERR_MALFORMED, DLB_ERR_VERSION
 *         (not a ticket, cut short, checksum mismatch, and what
 *         dlb_buffer_open_shared() refuses in its description; a server
 *         that sends another file than the ticket names);
 *         DLB_ERR_DELETED (the issuer has exited, did not answer within 20
 *         s, or holds no such ticket: opened already, withdrawn, or a
 *         token it never issued; the message names its pid and which);
 *         and the statuses of dlb_buffer_open_shared().
 * Thread-safe; waits for the issuer's server's answer (up to 20 s).
 */
DLB_API dlb_status dlb_share_ticket_open(const void* ticket, size_t size, uint64_t flags, dlb_buffer** out);

/**
 * This process's ticket server, for leak checks and tests.
 * @param held receives the files it keeps for tickets not yet opened
 *        (may be NULL).
 * @param connections receives the connections it is answering at this
 *        moment, 0 or 1 (may be NULL).
 * @param links receives 0: this process keeps no connection to other
 *        issuers' servers, each open makes its own (may be NULL).
 * @return 1 when the server runs, 0 when it does not (yet).
 * Thread-safe.
 */
DLB_API int32_t dlb_share_ticket_server(int64_t* held, int64_t* connections, int64_t* links);

/**
 * Takes tickets back: their files are closed in this process, and opening
 * them fails with DLB_ERR_DELETED ("withdrew its ticket").
 * @param ticket `size` bytes of a ticket this process issued, read during
 *        the call; NULL: every ticket of this process not yet opened.
 * @param size bytes at `ticket` (ignored when it is NULL).
 * @param withdrawn receives how many tickets were withdrawn (may be NULL);
 *        untouched on failure.
 * @return DLB_OK; DLB_ERR_DELETED (the ticket was opened or withdrawn
 *         already); DLB_ERR_INVALID_ARGUMENT (a ticket of another process,
 *         or of CUDA memory, which holds no file); DLB_ERR_MALFORMED,
 *         DLB_ERR_VERSION (not a ticket).
 * Thread-safe.
 */
DLB_API dlb_status dlb_share_ticket_withdraw(const void* ticket, size_t size, int64_t* withdrawn);

/**
 * Waits until this process holds no unopened ticket (each was opened or
 * withdrawn), or until `timeout_ms` milliseconds have passed: for a process
 * about to exit whose receivers may not have opened what it sent yet (its
 * files go when it exits).
 * @param timeout_ms the longest wait; 0 or less: none.
 * @return the number of unopened tickets still held (0: all were taken);
 *         the tickets stay this process's either way (withdraw them with
 *         dlb_share_ticket_withdraw()). Thread-safe.
 */
DLB_API int64_t dlb_share_ticket_wait(int64_t timeout_ms);

/** @} */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DLBRIDGE_SHARE_H_ */

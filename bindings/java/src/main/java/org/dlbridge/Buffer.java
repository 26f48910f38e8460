package org.dlbridge;

import java.lang.ref.Cleaner;
import java.lang.ref.Reference;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A handle on a {@code dlb_buffer}: memory dlbridge allocated, a direct
 * {@link ByteBuffer} of this program, shared memory, or a tensor imported
 * from a native library. Each handle is one reference; exports and views
 * hold their own, so the memory lives until the last handle is closed, the
 * last export's deleter has run and the last view was collected.
 * {@link #close()} drops the handle's reference; a handle dropped without
 * it is released by a {@link java.lang.ref.Cleaner}, as a backstop. Every
 * refusal, a closed handle included ({@link Status#ERR_INVALID_ARGUMENT}),
 * throws {@link DlbridgeException}. Not for concurrent use (a handle closed
 * on one thread while another uses it).
 */
public final class Buffer implements AutoCloseable {
  /** The copy policy of an export ({@code dlb_copy_policy}). */
  public enum Copy {
    /** Zero-copy when possible, else a host copy. */
    IF_NEEDED(Abi.COPY_IF_NEEDED),
    /** Never copy: refuse (DLB_ERR_NOT_ZERO_COPY, DLB_ERR_READ_ONLY) instead. */
    NEVER(Abi.COPY_NEVER),
    /** Always a fresh compact copy. */
    ALWAYS(Abi.COPY_ALWAYS);

    final int code;

    Copy(int code) {
      this.code = code;
    }
  }

  /** The cleaning action: drops the handle's reference once. */
  private static final class Handle implements Runnable {
    volatile long buffer;

    Handle(long buffer) {
      this.buffer = buffer;
    }

    @Override
    public void run() {
      long b = buffer;
      buffer = 0;
      Lib.release(b);
    }
  }

  // Direct ByteBuffers wrapped by a live dlb_buffer, by the key passed as the
  // release callback's context: reachable from here until the library says
  // that nothing uses their memory any more (on any thread).
  private static final Map<Long, ByteBuffer> KEPT = new ConcurrentHashMap<>();
  private static final AtomicLong NEXT_KEY = new AtomicLong();

  private final Handle handle;
  private final Cleaner.Cleanable cleanable;

  private Buffer(long buffer) {
    handle = new Handle(buffer);
    cleanable = Dlbridge.CLEANER.register(this, handle);
  }

  /** The release callback of {@link #wrap}: the library is done with that memory. */
  static void releaseKept(long key) {
    KEPT.remove(key);
  }

  /**
   * New zero-filled host memory, compact row-major, 64-byte aligned.
   *
   * @param dtype the element type's name ("float32", "int64", "bool", ...)
   * @param shape the extents (none for a 0-d tensor)
   * @return a new handle, owned by the caller
   * @throws DlbridgeException ERR_UNSUPPORTED_DTYPE for an unknown name,
   *     ERR_MALFORMED for a negative extent, ERR_OVERFLOW for a size that
   *     does not fit
   */
  public static Buffer allocate(String dtype, long... shape) {
    return new Buffer(Lib.alloc(false, Lib.dtypeFromName(dtype), shape));
  }

  /**
   * New zero-filled memory another process can map ({@link #issueTicket}).
   *
   * @param dtype the element type's name
   * @param shape the extents
   * @return a new handle, owned by the caller
   * @throws DlbridgeException as {@link #allocate}, and when shared memory
   *     cannot be made
   */
  public static Buffer allocateShared(String dtype, long... shape) {
    return new Buffer(Lib.alloc(true, Lib.dtypeFromName(dtype), shape));
  }

  /**
   * Wraps a direct ByteBuffer's memory, from its position on, without a
   * copy: a compact row-major tensor of {@code dtype} and {@code shape},
   * read-only when the ByteBuffer is. The ByteBuffer is kept reachable until
   * the library releases the memory (the last handle and the last export's
   * deleter gone), so the collector cannot free it under a native consumer.
   *
   * @param memory a direct ByteBuffer
   * @param dtype the element type's name
   * @param shape the extents
   * @return a new handle, owned by the caller
   * @throws IllegalArgumentException for a heap ByteBuffer (the collector
   *     moves its memory), or one with fewer bytes remaining than the tensor
   *     needs
   * @throws DlbridgeException for a dtype or shape the library refuses
   */
  public static Buffer wrap(ByteBuffer memory, String dtype, long... shape) {
    if (!memory.isDirect()) {
      throw new IllegalArgumentException("dlbridge wraps direct ByteBuffers only (ByteBuffer.allocateDirect): "
          + "the collector may move a heap buffer's memory");
    }
    int dt = Lib.dtypeFromName(dtype);
    long key = NEXT_KEY.incrementAndGet();
    KEPT.put(key, memory);
    long b;
    try {
      b = Lib.wrap(Lib.address(memory), memory.position(), dt, shape,
          memory.isReadOnly() ? Abi.BUFFER_READ_ONLY : 0, key);
    } catch (RuntimeException e) {
      KEPT.remove(key); // the callback does not run on failure: the memory is still ours
      throw e;
    }
    Buffer buffer = new Buffer(b);
    long need = Lib.nbytes(b);
    if (need > memory.remaining()) {
      buffer.close();
      throw new IllegalArgumentException("the tensor needs " + need + " bytes and the ByteBuffer has "
          + memory.remaining() + " remaining");
    }
    return buffer;
  }

  /**
   * Takes a managed tensor in: on success the buffer owns it (its deleter
   * runs once, when the last handle and export are gone) and {@code tensor}
   * is spent; on failure {@code tensor} still owns it.
   *
   * @param tensor an owned managed tensor
   * @return a new handle, owned by the caller
   * @throws DlbridgeException ERR_INVALID_ARGUMENT when {@code tensor} was
   *     closed or handed on; the library's refusal of a malformed tensor
   */
  public static Buffer importTensor(ManagedTensor tensor) {
    long t = tensor.address();
    try {
      long b = Lib.importTensor(t, tensor.isVersioned());
      tensor.disown();
      return new Buffer(b);
    } finally {
      Reference.reachabilityFence(tensor);
    }
  }

  /**
   * Opens a ticket another process issued ({@code dlb_share_ticket_issue}):
   * the same memory, mapped here. A ticket opens once.
   *
   * @param ticket the ticket's bytes
   * @return a new handle, owned by the caller
   * @throws DlbridgeException ERR_MALFORMED for bytes that are no ticket,
   *     ERR_DELETED for a ticket opened already or whose issuer is gone
   */
  public static Buffer openTicket(byte[] ticket) {
    return new Buffer(Lib.ticketOpen(ticket));
  }

  long ptr() {
    long b = handle.buffer;
    if (b == 0) {
      throw new DlbridgeException(Status.ERR_INVALID_ARGUMENT.code(), Lib.statusName(Status.ERR_INVALID_ARGUMENT.code()),
          "the Buffer is closed");
    }
    return b;
  }

  private TensorInfo tensor() {
    try {
      return Lib.dltensor(ptr());
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  /**
   * The extents.
   *
   * @return a fresh array, empty for a 0-d tensor
   */
  public long[] shape() {
    return tensor().shape;
  }

  /**
   * The strides, in elements (always present, also for compact tensors).
   *
   * @return a fresh array, empty for a 0-d tensor
   */
  public long[] strides() {
    return tensor().strides;
  }

  /**
   * The dtype's name, as the library writes it.
   *
   * @return e.g. "float32", "int64"
   */
  public String dtype() {
    return Lib.dtypeName(tensor().dtype);
  }

  /**
   * Bytes the elements occupy, compact.
   *
   * @return the size in bytes
   */
  public long nbytes() {
    try {
      return Lib.nbytes(ptr());
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  /**
   * Whether the memory must not be written.
   *
   * @return true for read-only memory
   */
  public boolean isReadOnly() {
    try {
      return (Lib.flags(ptr()) & Abi.BUFFER_READ_ONLY) != 0;
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  /**
   * Whether {@link #delete()} was called (on any handle of this buffer).
   *
   * @return true once deleted
   */
  public boolean isDeleted() {
    try {
      return (Lib.flags(ptr()) & Abi.BUFFER_DELETED) != 0;
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  /**
   * The address of the first element (data plus byte offset), for native
   * code; the memory is valid while this handle is open.
   *
   * @return the address (0 for a backend's storage, reached by export only)
   */
  public long address() {
    TensorInfo t = tensor();
    return t.data == 0 ? 0 : t.data + t.byteOffset;
  }

  /**
   * A direct ByteBuffer over the elements, without a copy, in the
   * platform's byte order; read-only unless the library says the memory may
   * be written. Whether the elements can be viewed is the library's
   * decision ({@code dlb_buffer_host_view}). The view holds a reference of
   * its own on the buffer, dropped when the view (and every slice of it) is
   * collected, so it stays valid after {@link #close()}.
   *
   * @return the view
   * @throws DlbridgeException ERR_DELETED, ERR_NOT_ZERO_COPY (a backend's
   *     storage), ERR_UNSUPPORTED_DEVICE, ERR_UNSUPPORTED_LAYOUT (strided),
   *     ERR_MALFORMED, with the library's message
   * @throws UnsupportedOperationException for more than 2 GiB
   */
  public ByteBuffer asByteBuffer() {
    return view(Abi.HOST_VIEW_READ);
  }

  /**
   * The same view, writable: refused for read-only memory.
   *
   * @return a writable view
   * @throws DlbridgeException ERR_READ_ONLY for read-only memory, and the
   *     refusals of {@link #asByteBuffer()}
   * @throws UnsupportedOperationException for more than 2 GiB
   */
  public ByteBuffer asWritableByteBuffer() {
    return view(Abi.HOST_VIEW_WRITE);
  }

  private ByteBuffer view(int access) {
    long b = ptr();
    try {
      HostView v = Lib.hostView(b, access);
      if (v.nbytes > Integer.MAX_VALUE) {
        throw new UnsupportedOperationException("a ByteBuffer holds at most 2 GiB; the tensor has "
            + v.nbytes + " bytes");
      }
      if (v.nbytes == 0) return ByteBuffer.allocateDirect(0).order(ByteOrder.nativeOrder());
      ByteBuffer view = Lib.byteBuffer(v.data, v.nbytes);
      Lib.retain(b);
      Dlbridge.CLEANER.register(view, () -> Lib.release(b));
      if (!v.writable) view = view.asReadOnlyBuffer();
      return view.order(ByteOrder.nativeOrder());
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  /**
   * Exports as a {@code DLManagedTensorVersioned}, zero-copy when possible.
   *
   * @return the export, owned by the caller
   * @throws DlbridgeException ERR_DELETED, and the library's other refusals
   */
  public ManagedTensor exportVersioned() {
    return export(true, -1, 0);
  }

  /**
   * Exports as a {@code DLManagedTensorVersioned} with a copy policy.
   *
   * @param copy the copy policy
   * @param readOnly sets READ_ONLY on the export even for writable memory
   * @return the export, owned by the caller
   * @throws DlbridgeException ERR_NOT_ZERO_COPY with {@link Copy#NEVER} where
   *     a copy is needed, and the refusals of {@link #exportVersioned()}
   */
  public ManagedTensor exportVersioned(Copy copy, boolean readOnly) {
    return export(true, copy.code, readOnly ? Abi.EXPORT_READ_ONLY : 0);
  }

  /**
   * Exports as a legacy {@code DLManagedTensor} (read-only memory: a copy).
   *
   * @return the export, owned by the caller
   * @throws DlbridgeException ERR_DELETED, and the library's other refusals
   */
  public ManagedTensor exportLegacy() {
    return export(false, -1, 0);
  }

  /**
   * Exports as a legacy {@code DLManagedTensor} with a copy policy.
   *
   * @param copy the copy policy
   * @return the export, owned by the caller
   * @throws DlbridgeException ERR_READ_ONLY for read-only memory with
   *     {@link Copy#NEVER}, and the refusals of {@link #exportLegacy()}
   */
  public ManagedTensor exportLegacy(Copy copy) {
    return export(false, copy.code, 0);
  }

  private ManagedTensor export(boolean versioned, int copy, long flags) {
    try {
      return new ManagedTensor(Lib.export(ptr(), versioned, copy, flags), versioned);
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  /**
   * Deletes (donates) the buffer: later exports and views fail with
   * ERR_DELETED; exports and views made before stay valid. The handle still
   * needs {@link #close()}.
   */
  public void delete() {
    try {
      Lib.delete(ptr());
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  /**
   * A ticket for another process of this machine, which opens it once
   * ({@code dlb_share_ticket_open}, or {@link #openTicket} in Java) and maps
   * the same memory: plain bytes to send any way.
   *
   * @return the ticket's bytes
   * @throws DlbridgeException ERR_NOT_ZERO_COPY for memory that is not
   *     shared: allocate it with {@link #allocateShared}
   */
  public byte[] issueTicket() {
    try {
      return Lib.ticketIssue(ptr());
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  /** Drops this handle's reference. Calling it again does nothing. */
  @Override
  public void close() {
    cleanable.clean();
  }

  /** Direct ByteBuffers kept for the library now (for leak checks in tests). */
  static int keptByteBuffers() {
    return KEPT.size();
  }
}

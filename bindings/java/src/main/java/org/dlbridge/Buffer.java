package org.dlbridge;

import com.sun.jna.Memory;
import com.sun.jna.Native;
import com.sun.jna.Pointer;
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
 * from a native library. Each handle is one reference; exports hold their
 * own, so the memory lives until the last handle is closed and the last
 * export's deleter has run. {@link #close()} drops the handle's reference;
 * a handle dropped without it is released by a {@link java.lang.ref.Cleaner},
 * as a backstop. Using a closed handle throws {@link IllegalStateException};
 * the library's refusals throw {@link DlbridgeException}. Not for concurrent
 * use (a handle closed on one thread while another uses it).
 */
public final class Buffer implements AutoCloseable {
  /** The copy policy of an export ({@code dlb_copy_policy}, in its order). */
  public enum Copy {
    /** Zero-copy when possible, else a host copy. */
    IF_NEEDED,
    /** Never copy: refuse (DLB_ERR_NOT_ZERO_COPY, DLB_ERR_READ_ONLY) instead. */
    NEVER,
    /** Always a fresh compact copy. */
    ALWAYS
  }

  /** The cleaning action: drops the handle's reference once. */
  private static final class Handle implements Runnable {
    volatile Pointer buffer;

    Handle(Pointer buffer) {
      this.buffer = buffer;
    }

    @Override
    public void run() {
      Pointer b = buffer;
      buffer = null;
      Lib.dlb_buffer_release(b);
    }
  }

  // Direct ByteBuffers wrapped by a live dlb_buffer, by the key passed as the
  // release callback's context: reachable from here until the library says
  // that nothing uses their memory any more (on any thread).
  private static final Map<Long, ByteBuffer> KEPT = new ConcurrentHashMap<>();
  private static final AtomicLong NEXT_KEY = new AtomicLong();
  private static final Lib.ReleaseFn RELEASE = ctx -> KEPT.remove(Pointer.nativeValue(ctx));

  private final Handle handle;
  private final Cleaner.Cleanable cleanable;

  private Buffer(long buffer) {
    handle = new Handle(new Pointer(buffer));
    cleanable = Dlbridge.CLEANER.register(this, handle);
  }

  private static Lib.DataType.ByValue dtype(String name) {
    Lib.DataType.ByValue dt = new Lib.DataType.ByValue();
    Lib.check(Lib.dlb_dtype_from_name(name, dt));
    dt.read();
    return dt;
  }

  /** New zero-filled host memory, compact row-major, 64-byte aligned. */
  public static Buffer allocate(String dtype, long... shape) {
    long[] out = new long[1];
    Lib.check(Lib.dlb_buffer_alloc(Lib.CPU, dtype(dtype), shape.length, shape, out));
    return new Buffer(out[0]);
  }

  /**
   * New zero-filled memory another process can map ({@link #issueTicket}).
   */
  public static Buffer allocateShared(String dtype, long... shape) {
    long[] out = new long[1];
    Lib.check(Lib.dlb_buffer_alloc_shared(Lib.CPU, dtype(dtype), shape.length, shape, out));
    return new Buffer(out[0]);
  }

  /**
   * Wraps a direct ByteBuffer's memory, from its position on, without a
   * copy: a compact row-major tensor of {@code dtype} and {@code shape},
   * read-only when the ByteBuffer is. The ByteBuffer is kept reachable until
   * the library releases the memory (the last handle and the last export's
   * deleter gone), so the collector cannot free it under a native consumer.
   * @throws IllegalArgumentException for a heap ByteBuffer (the collector
   *     moves its memory), or one with fewer bytes remaining than the tensor needs.
   */
  public static Buffer wrap(ByteBuffer memory, String dtype, long... shape) {
    if (!memory.isDirect()) {
      throw new IllegalArgumentException("dlbridge wraps direct ByteBuffers only (ByteBuffer.allocateDirect): "
          + "the collector may move a heap buffer's memory");
    }
    Lib.DataType dt = dtype(dtype);
    Lib.DLTensor view = new Lib.DLTensor();
    view.data = Native.getDirectBufferPointer(memory);
    view.deviceType = Lib.CPU.deviceType;
    view.ndim = shape.length;
    view.code = dt.code;
    view.bits = dt.bits;
    view.lanes = dt.lanes;
    Memory extents = shape.length > 0 ? new Memory(8L * shape.length) : null;
    if (extents != null) extents.write(0, shape, 0, shape.length);
    view.shape = extents;
    view.byteOffset = memory.position();
    long key = NEXT_KEY.incrementAndGet();
    KEPT.put(key, memory);
    long[] out = new long[1];
    int status = Lib.dlb_buffer_wrap(view, memory.isReadOnly() ? Lib.BUFFER_READ_ONLY : 0, RELEASE,
        new Pointer(key), out);
    Reference.reachabilityFence(extents);
    if (status != 0) KEPT.remove(key); // not called on failure: the memory is still ours
    Lib.check(status);
    Buffer b = new Buffer(out[0]);
    if (b.nbytes() > memory.remaining()) {
      long need = b.nbytes();
      b.close();
      throw new IllegalArgumentException("the tensor needs " + need + " bytes and the ByteBuffer has "
          + memory.remaining() + " remaining");
    }
    return b;
  }

  /**
   * Takes a managed tensor in: on success the buffer owns it (its deleter
   * runs once, when the last handle and export are gone) and {@code tensor}
   * is spent; on failure {@code tensor} still owns it.
   * @throws IllegalStateException when {@code tensor} was closed or handed on.
   */
  public static Buffer importTensor(ManagedTensor tensor) {
    Pointer t = tensor.pointer();
    long[] out = new long[1];
    try {
      Lib.check(tensor.isVersioned() ? Lib.dlb_import_versioned(t, null, out) : Lib.dlb_import_legacy(t, null, out));
      tensor.disown();
    } finally {
      Reference.reachabilityFence(tensor);
    }
    return new Buffer(out[0]);
  }

  /**
   * Opens a ticket another process issued ({@code dlb_share_ticket_issue}):
   * the same memory, mapped here. A ticket opens once.
   */
  public static Buffer openTicket(byte[] ticket) {
    long[] out = new long[1];
    Lib.check(Lib.dlb_share_ticket_open(ticket, ticket.length, 0, out));
    return new Buffer(out[0]);
  }

  Pointer ptr() {
    Pointer b = handle.buffer;
    if (b == null) throw new IllegalStateException("the buffer is closed");
    return b;
  }

  private Lib.DLTensor tensor() {
    Lib.DLTensor t = new Lib.DLTensor();
    Lib.check(Lib.dlb_buffer_dltensor(ptr(), t));
    t.read();
    return t;
  }

  /** The extents. */
  public long[] shape() {
    try {
      Lib.DLTensor t = tensor();
      return t.ndim == 0 ? new long[0] : t.shape.getLongArray(0, t.ndim);
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  /** The strides, in elements (always present, also for compact tensors). */
  public long[] strides() {
    try {
      Lib.DLTensor t = tensor();
      return t.ndim == 0 ? new long[0] : t.strides.getLongArray(0, t.ndim);
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  /** The dtype's name, as the library writes it ("float32", "int64", ...). */
  public String dtype() {
    Lib.DLTensor t = tensor();
    Lib.DataType.ByValue dt = new Lib.DataType.ByValue();
    dt.code = t.code;
    dt.bits = t.bits;
    dt.lanes = t.lanes;
    byte[] name = new byte[64];
    Lib.check(Lib.dlb_dtype_name(dt, name, name.length));
    return Native.toString(name);
  }

  /** Bytes the elements occupy, compact. */
  public long nbytes() {
    return Lib.dlb_buffer_nbytes(ptr());
  }

  /** Whether the memory must not be written. */
  public boolean isReadOnly() {
    return (Lib.dlb_buffer_flags(ptr()) & Lib.BUFFER_READ_ONLY) != 0;
  }

  /** Whether {@link #delete()} was called (on any handle of this buffer). */
  public boolean isDeleted() {
    return (Lib.dlb_buffer_flags(ptr()) & Lib.BUFFER_DELETED) != 0;
  }

  /** The address of the first element (data plus byte offset). */
  public long address() {
    try {
      Lib.DLTensor t = tensor();
      return Pointer.nativeValue(t.data) + t.byteOffset;
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  /**
   * A direct ByteBuffer over the elements, without a copy, in the
   * platform's byte order, read-only for read-only memory. The view holds a
   * reference of its own on the buffer, dropped when the view (and every
   * slice of it) is collected, so it stays valid after {@link #close()}.
   * @throws DlbridgeException DLB_ERR_UNSUPPORTED_DEVICE for memory the CPU
   *     cannot read, DLB_ERR_UNSUPPORTED_LAYOUT for a strided tensor.
   * @throws UnsupportedOperationException for more than 2 GiB.
   */
  public ByteBuffer asByteBuffer() {
    Pointer b = ptr();
    try {
      Lib.DLTensor t = tensor();
      Lib.DeviceInfo device = new Lib.DeviceInfo();
      Lib.check(Lib.dlb_device_type_info(t.deviceType, device));
      device.read();
      if ((device.flags & Lib.DEVICE_HOST_READABLE) == 0) {
        throw new DlbridgeException(Lib.ERR_UNSUPPORTED_DEVICE, Lib.dlb_status_name(Lib.ERR_UNSUPPORTED_DEVICE),
            "the buffer is on device '" + device.name + "', which the CPU cannot read; export it instead");
      }
      Lib.LayoutInfo layout = new Lib.LayoutInfo();
      Lib.check(Lib.dlb_layout_describe(t, layout));
      layout.read();
      if (layout.contiguous == 0) {
        throw new DlbridgeException(Lib.ERR_UNSUPPORTED_LAYOUT, Lib.dlb_status_name(Lib.ERR_UNSUPPORTED_LAYOUT),
            "a ByteBuffer view needs a compact row-major tensor; export it, or import it with a copy");
      }
      if (layout.nbytes > Integer.MAX_VALUE) {
        throw new UnsupportedOperationException("a ByteBuffer holds at most 2 GiB; the tensor has "
            + layout.nbytes + " bytes");
      }
      if (layout.nbytes == 0) return ByteBuffer.allocateDirect(0).order(ByteOrder.nativeOrder());
      ByteBuffer view = t.data.getByteBuffer(t.byteOffset, layout.nbytes);
      Lib.dlb_buffer_retain(b);
      Dlbridge.CLEANER.register(view, () -> Lib.dlb_buffer_release(b));
      if ((Lib.dlb_buffer_flags(b) & Lib.BUFFER_READ_ONLY) != 0) view = view.asReadOnlyBuffer();
      return view.order(ByteOrder.nativeOrder());
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  /** Exports as a {@code DLManagedTensorVersioned}, zero-copy when possible. */
  public ManagedTensor exportVersioned() {
    return export(true, null, false);
  }

  /**
   * Exports as a {@code DLManagedTensorVersioned} with a copy policy;
   * {@code readOnly} sets READ_ONLY on the export even for writable memory.
   */
  public ManagedTensor exportVersioned(Copy copy, boolean readOnly) {
    return export(true, copy, readOnly);
  }

  /** Exports as a legacy {@code DLManagedTensor} (read-only memory: a copy). */
  public ManagedTensor exportLegacy() {
    return export(false, null, false);
  }

  /** Exports as a legacy {@code DLManagedTensor} with a copy policy. */
  public ManagedTensor exportLegacy(Copy copy) {
    return export(false, copy, false);
  }

  private ManagedTensor export(boolean versioned, Copy copy, boolean readOnly) {
    Lib.ExportOptions options = null;
    if (copy != null || readOnly) {
      options = new Lib.ExportOptions();
      Lib.dlb_export_options_init(options);
      options.read();
      options.copy = (copy == null ? Copy.IF_NEEDED : copy).ordinal();
      options.flags = readOnly ? Lib.EXPORT_READ_ONLY : 0;
    }
    long[] out = new long[1];
    try {
      Pointer b = ptr();
      Lib.check(versioned ? Lib.dlb_export_versioned(b, options, out) : Lib.dlb_export_legacy(b, options, out));
    } finally {
      Reference.reachabilityFence(this);
    }
    return new ManagedTensor(new Pointer(out[0]), versioned);
  }

  /**
   * Deletes (donates) the buffer: later exports and views fail with
   * DLB_ERR_DELETED; exports made before stay valid. The handle still needs
   * {@link #close()}.
   */
  public void delete() {
    try {
      Lib.check(Lib.dlb_buffer_delete(ptr()));
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  /**
   * A ticket for another process of this machine, which opens it once
   * ({@code dlb_share_ticket_open}, or {@link #openTicket} in Java) and maps
   * the same memory: plain bytes to send any way. Memory that is not shared
   * yet is refused (DLB_ERR_NOT_ZERO_COPY): allocate it with
   * {@link #allocateShared}.
   */
  public byte[] issueTicket() {
    Memory ticket = new Memory(4 + Lib.TICKET_MAX);
    try {
      Lib.check(Lib.dlb_share_ticket_issue(ptr(), 0, ticket));
    } finally {
      Reference.reachabilityFence(this);
    }
    return ticket.getByteArray(4, ticket.getInt(0));
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

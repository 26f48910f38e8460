package org.dlbridge;

import com.sun.jna.Callback;
import com.sun.jna.Memory;
import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;

/**
 * The library's functions as this package calls them, through JNA's direct
 * mapping (one JNI call each, no proxy): Java 17 to 21. On Java 22 and
 * newer the jar's META-INF/versions/22 holds a class of the same name and
 * methods that calls through the Foreign Function &amp; Memory API instead.
 * Handles and addresses are {@code long}s; every status other than DLB_OK
 * becomes a {@link DlbridgeException}; struct layouts and constants come
 * from {@link Abi}. The library is the file {@link LibraryFile} finds.
 */
final class Lib {
  private Lib() {}

  /**
   * Which implementation this is, for {@link Dlbridge#implementation()} (a
   * method: a constant would be folded into its callers at compile time).
   */
  static String implementation() {
    return "JNA";
  }

  /** The path the library was loaded from ({@code null}: by name). */
  static final String PATH = LibraryFile.locate();

  static {
    Native.register(Lib.class, NativeLibrary.getInstance(PATH != null ? PATH : "dlbridge"));
  }

  /** dlb_release_fn: runs on whichever thread drops the last reference. */
  interface ReleaseFn extends Callback {
    void invoke(long ctx);
  }

  private static final ReleaseFn RELEASE = ctx -> {
    try {
      Buffer.releaseKept(ctx);
    } catch (Throwable e) {
      // Nothing may unwind into C; the map removal does not throw.
    }
  };

  // Pointers are passed as long (LP64), DLDataType (4 bytes) as an int and
  // DLDevice (8 bytes) as a long: small aggregates of integers travel in
  // one integer register, as an integer of their size would, on x86-64 and
  // aarch64 (the platforms the jar carries a library for).
  private static native String dlb_version_string();
  private static native String dlb_status_name(int status);
  private static native String dlb_last_error_message();
  private static native long dlb_live_exports();
  private static native int dlb_dtype_from_name(String name, int[] out);
  private static native int dlb_dtype_name(int dtype, byte[] out, long outSize);
  private static native int dlb_buffer_alloc(long device, int dtype, int ndim, long[] shape, long[] out);
  private static native int dlb_buffer_alloc_shared(long device, int dtype, int ndim, long[] shape, long[] out);
  private static native int dlb_buffer_wrap(long view, long flags, ReleaseFn release, long ctx, long[] out);
  private static native long dlb_buffer_retain(long buffer);
  private static native void dlb_buffer_release(long buffer);
  private static native int dlb_buffer_delete(long buffer);
  private static native int dlb_buffer_dltensor(long buffer, long out);
  private static native long dlb_buffer_flags(long buffer);
  private static native long dlb_buffer_nbytes(long buffer);
  private static native int dlb_buffer_host_view(long buffer, int access, long out);
  private static native void dlb_export_options_init(long options);
  private static native int dlb_export_versioned(long buffer, long options, long[] out);
  private static native int dlb_export_legacy(long buffer, long options, long[] out);
  private static native int dlb_import_versioned(long tensor, long options, long[] out);
  private static native int dlb_import_legacy(long tensor, long options, long[] out);
  private static native void dlb_managed_free_versioned(long tensor);
  private static native void dlb_managed_free_legacy(long tensor);
  private static native int dlb_share_ticket_issue(long buffer, long flags, long out);
  private static native int dlb_share_ticket_open(byte[] ticket, long size, long flags, long[] out);

  private static final long CPU = Abi.DEVICE_CPU; // DLDevice {kDLCPU, 0}

  /** Throws the calling thread's last error when {@code status} is not DLB_OK. */
  static void check(int status) {
    if (status != 0) throw new DlbridgeException(status, dlb_status_name(status), dlb_last_error_message());
  }

  static String versionString() {
    return dlb_version_string();
  }

  static String statusName(int status) {
    return dlb_status_name(status);
  }

  static long liveExports() {
    return dlb_live_exports();
  }

  static int dtypeFromName(String name) {
    int[] out = new int[1];
    check(dlb_dtype_from_name(name, out));
    return out[0];
  }

  static String dtypeName(int dtype) {
    byte[] name = new byte[64];
    check(dlb_dtype_name(dtype, name, name.length));
    return Native.toString(name, "US-ASCII");
  }

  static long alloc(boolean shared, int dtype, long[] shape) {
    long[] out = new long[1];
    check(shared ? dlb_buffer_alloc_shared(CPU, dtype, shape.length, shape, out)
        : dlb_buffer_alloc(CPU, dtype, shape.length, shape, out));
    return out[0];
  }

  /** dlb_buffer_wrap of host memory; the release callback gets {@code key}. */
  static long wrap(long data, long byteOffset, int dtype, long[] shape, long flags, long key) {
    try (Memory view = new Memory(Abi.DLTENSOR_SIZE);
        Memory extents = new Memory(8L * Math.max(1, shape.length))) {
      view.clear();
      extents.write(0, shape, 0, shape.length);
      view.setLong(Abi.DLTENSOR_DATA, data);
      view.setInt(Abi.DLTENSOR_DEVICE, Abi.DEVICE_CPU);
      view.setInt(Abi.DLTENSOR_NDIM, shape.length);
      view.setInt(Abi.DLTENSOR_DTYPE, dtype);
      view.setPointer(Abi.DLTENSOR_SHAPE, shape.length > 0 ? extents : null);
      view.setLong(Abi.DLTENSOR_BYTE_OFFSET, byteOffset);
      long[] out = new long[1];
      check(dlb_buffer_wrap(Pointer.nativeValue(view), flags, RELEASE, key, out));
      return out[0];
    }
  }

  static void retain(long buffer) {
    dlb_buffer_retain(buffer);
  }

  static void release(long buffer) {
    dlb_buffer_release(buffer);
  }

  static void delete(long buffer) {
    check(dlb_buffer_delete(buffer));
  }

  static long flags(long buffer) {
    return dlb_buffer_flags(buffer);
  }

  static long nbytes(long buffer) {
    return dlb_buffer_nbytes(buffer);
  }

  static TensorInfo dltensor(long buffer) {
    try (Memory t = new Memory(Abi.DLTENSOR_SIZE)) {
      check(dlb_buffer_dltensor(buffer, Pointer.nativeValue(t)));
      TensorInfo info = new TensorInfo();
      info.data = t.getLong(Abi.DLTENSOR_DATA);
      info.byteOffset = t.getLong(Abi.DLTENSOR_BYTE_OFFSET);
      info.deviceType = t.getInt(Abi.DLTENSOR_DEVICE);
      info.deviceId = t.getInt(Abi.DLTENSOR_DEVICE + Abi.DLDEVICE_DEVICE_ID);
      info.dtype = t.getInt(Abi.DLTENSOR_DTYPE);
      int ndim = t.getInt(Abi.DLTENSOR_NDIM);
      Pointer shape = t.getPointer(Abi.DLTENSOR_SHAPE);
      Pointer strides = t.getPointer(Abi.DLTENSOR_STRIDES);
      info.shape = ndim == 0 ? new long[0] : shape.getLongArray(0, ndim);
      info.strides = ndim == 0 ? new long[0] : strides.getLongArray(0, ndim);
      return info;
    }
  }

  static HostView hostView(long buffer, int access) {
    try (Memory v = new Memory(Abi.HOST_VIEW_SIZE)) {
      v.clear();
      v.setLong(0, Abi.HOST_VIEW_SIZE); // struct_size
      check(dlb_buffer_host_view(buffer, access, Pointer.nativeValue(v)));
      HostView view = new HostView();
      view.data = v.getLong(Abi.HOST_VIEW_DATA);
      view.nbytes = v.getLong(Abi.HOST_VIEW_NBYTES);
      view.numel = v.getLong(Abi.HOST_VIEW_NUMEL);
      view.dtype = v.getInt(Abi.HOST_VIEW_DTYPE);
      view.writable = v.getInt(Abi.HOST_VIEW_WRITABLE) != 0;
      return view;
    }
  }

  /** A direct ByteBuffer over {@code nbytes} at {@code address} (no lifetime of its own). */
  static java.nio.ByteBuffer byteBuffer(long address, long nbytes) {
    return new Pointer(address).getByteBuffer(0, nbytes);
  }

  /** The address of a direct ByteBuffer's memory. */
  static long address(java.nio.ByteBuffer direct) {
    return Pointer.nativeValue(Native.getDirectBufferPointer(direct));
  }

  /** dlb_export_versioned / dlb_export_legacy; copy &lt; 0: the library's defaults. */
  static long export(long buffer, boolean versioned, int copy, long flags) {
    long[] out = new long[1];
    if (copy < 0 && flags == 0) {
      check(versioned ? dlb_export_versioned(buffer, 0, out) : dlb_export_legacy(buffer, 0, out));
      return out[0];
    }
    try (Memory o = new Memory(Abi.EXPORT_OPTIONS_SIZE)) {
      long options = Pointer.nativeValue(o);
      dlb_export_options_init(options);
      if (copy >= 0) o.setInt(Abi.EXPORT_OPTIONS_COPY, copy);
      o.setLong(Abi.EXPORT_OPTIONS_FLAGS, flags);
      check(versioned ? dlb_export_versioned(buffer, options, out) : dlb_export_legacy(buffer, options, out));
      return out[0];
    }
  }

  static void managedFree(long tensor, boolean versioned) {
    if (versioned) {
      dlb_managed_free_versioned(tensor);
    } else {
      dlb_managed_free_legacy(tensor);
    }
  }

  static long importTensor(long tensor, boolean versioned) {
    long[] out = new long[1];
    check(versioned ? dlb_import_versioned(tensor, 0, out) : dlb_import_legacy(tensor, 0, out));
    return out[0];
  }

  static byte[] ticketIssue(long buffer) {
    try (Memory ticket = new Memory(Abi.TICKET_SIZE)) {
      check(dlb_share_ticket_issue(buffer, 0, Pointer.nativeValue(ticket)));
      return ticket.getByteArray(Abi.TICKET_BYTES, ticket.getInt(0));
    }
  }

  static long ticketOpen(byte[] ticket) {
    long[] out = new long[1];
    check(dlb_share_ticket_open(ticket, ticket.length, 0, out));
    return out[0];
  }
}

package org.dlbridge;

import com.sun.jna.Callback;
import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;
import com.sun.jna.Structure;

/**
 * The C functions of libdlbridge this package calls, bound by JNA's direct
 * mapping (one JNI call each, no proxy), and the C structs they take. Out
 * pointers are {@code long[1]}: JNA passes a primitive array without
 * allocating native memory. The library is the file named by the system
 * property {@code dlbridge.library}, else by the environment variable
 * {@code DLBRIDGE_LIBRARY}, else {@code libdlbridge} on the system's library
 * path (and {@code jna.library.path}).
 */
final class Lib {
  private Lib() {}

  static {
    String path = System.getProperty("dlbridge.library", System.getenv("DLBRIDGE_LIBRARY"));
    Native.register(Lib.class, NativeLibrary.getInstance(path != null && !path.isEmpty() ? path : "dlbridge"));
  }

  // Constants of the C headers (common.h, buffer.h, devices.h, share.h).
  static final int ERR_UNSUPPORTED_DEVICE = 6;
  static final int ERR_UNSUPPORTED_LAYOUT = 7;
  static final long BUFFER_READ_ONLY = 1L;
  static final long BUFFER_DELETED = 1L << 8;
  static final long EXPORT_READ_ONLY = 1L;
  static final int DEVICE_HOST_READABLE = 1 << 1;
  static final int TICKET_MAX = 64 + 56 + 16 * 64 + 128; // DLB_SHARE_TICKET_MAX

  /** DLDataType (by reference: an out argument). */
  @Structure.FieldOrder({"code", "bits", "lanes"})
  public static class DataType extends Structure {
    public byte code;
    public byte bits;
    public short lanes;

    /** The same, passed by value. */
    public static class ByValue extends DataType implements Structure.ByValue {}
  }

  /** DLDevice, by value. */
  @Structure.FieldOrder({"deviceType", "deviceId"})
  public static class Device extends Structure implements Structure.ByValue {
    public int deviceType;
    public int deviceId;
  }

  static final Device CPU = new Device();

  static {
    CPU.deviceType = 1; // kDLCPU
  }

  /** DLTensor, its DLDevice and DLDataType members laid out inline. */
  @Structure.FieldOrder({"data", "deviceType", "deviceId", "ndim", "code", "bits", "lanes", "shape", "strides",
      "byteOffset"})
  public static class DLTensor extends Structure {
    public Pointer data;
    public int deviceType;
    public int deviceId;
    public int ndim;
    public byte code;
    public byte bits;
    public short lanes;
    public Pointer shape;
    public Pointer strides;
    public long byteOffset;
  }

  /** dlb_export_options. */
  @Structure.FieldOrder({"structSize", "copy", "hasTargetDevice", "targetType", "targetId", "stream", "flags"})
  public static class ExportOptions extends Structure {
    public long structSize;
    public int copy;
    public int hasTargetDevice;
    public int targetType;
    public int targetId;
    public long stream;
    public long flags;
  }

  /** dlb_layout_info. */
  @Structure.FieldOrder({"structSize", "numel", "nbytes", "elementBits", "contiguous", "minOffset", "maxOffset"})
  public static class LayoutInfo extends Structure {
    public long structSize;
    public long numel;
    public long nbytes;
    public int elementBits;
    public int contiguous;
    public long minOffset;
    public long maxOffset;

    LayoutInfo() {
      structSize = size();
    }
  }

  /** dlb_device_info. */
  @Structure.FieldOrder({"structSize", "deviceType", "flags", "name"})
  public static class DeviceInfo extends Structure {
    public long structSize;
    public int deviceType;
    public int flags;
    public String name;

    DeviceInfo() {
      structSize = size();
    }
  }

  /** dlb_release_fn: runs on whichever thread drops the last reference. */
  interface ReleaseFn extends Callback {
    void invoke(Pointer ctx);
  }

  static native String dlb_version_string();
  static native String dlb_status_name(int status);
  static native String dlb_last_error_message();
  static native long dlb_live_exports();
  static native int dlb_dtype_from_name(String name, DataType out);
  static native int dlb_dtype_name(DataType.ByValue dtype, byte[] out, long outSize);

  static native int dlb_buffer_alloc(Device device, DataType.ByValue dtype, int ndim, long[] shape, long[] out);
  static native int dlb_buffer_wrap(DLTensor view, long flags, ReleaseFn release, Pointer ctx, long[] out);
  static native Pointer dlb_buffer_retain(Pointer buffer);
  static native void dlb_buffer_release(Pointer buffer);
  static native int dlb_buffer_delete(Pointer buffer);
  static native int dlb_buffer_dltensor(Pointer buffer, DLTensor out);
  static native long dlb_buffer_flags(Pointer buffer);
  static native long dlb_buffer_nbytes(Pointer buffer);
  static native int dlb_layout_describe(DLTensor layout, LayoutInfo out);
  static native int dlb_device_type_info(int deviceType, DeviceInfo out);

  static native void dlb_export_options_init(ExportOptions options);
  static native int dlb_export_versioned(Pointer buffer, ExportOptions options, long[] out);
  static native int dlb_export_legacy(Pointer buffer, ExportOptions options, long[] out);
  static native int dlb_import_versioned(Pointer tensor, Pointer options, long[] out);
  static native int dlb_import_legacy(Pointer tensor, Pointer options, long[] out);
  static native void dlb_managed_free_versioned(Pointer tensor);
  static native void dlb_managed_free_legacy(Pointer tensor);

  static native int dlb_buffer_alloc_shared(Device device, DataType.ByValue dtype, int ndim, long[] shape, long[] out);
  static native int dlb_share_ticket_issue(Pointer buffer, long flags, Pointer out);
  static native int dlb_share_ticket_open(byte[] ticket, long size, long flags, long[] out);

  /** Throws the calling thread's last error when {@code status} is not DLB_OK. */
  static void check(int status) {
    if (status != 0) {
      throw new DlbridgeException(status, dlb_status_name(status), dlb_last_error_message());
    }
  }
}

package org.dlbridge;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.nio.ByteBuffer;
import java.nio.file.Path;

/**
 * The library's functions as this package calls them, through the Foreign
 * Function &amp; Memory API (Java 22 and newer; this class replaces the JNA
 * one of the same name in a multi-release jar). The same methods, the same
 * rules: handles and addresses are {@code long}s, every status other than
 * DLB_OK becomes a {@link DlbridgeException}, layouts and constants come
 * from {@link Abi}, the library is the file {@link LibraryFile} finds.
 */
@SuppressWarnings("restricted") // the whole class is the binding's native boundary
final class Lib {
  private Lib() {}

  /**
   * Which implementation this is, for {@link Dlbridge#implementation()} (a
   * method: a constant would be folded into its callers at compile time).
   */
  static String implementation() {
    return "FFM";
  }

  /** The path the library was loaded from ({@code null}: by name). */
  static final String PATH = LibraryFile.locate();

  private static final Linker LINKER = Linker.nativeLinker();
  private static final SymbolLookup SYMBOLS;

  static {
    try {
      SYMBOLS = PATH != null ? SymbolLookup.libraryLookup(Path.of(PATH), Arena.global())
          : SymbolLookup.libraryLookup(System.mapLibraryName("dlbridge"), Arena.global());
    } catch (IllegalArgumentException e) {
      // The lookup's message does not say why; the dynamic loader's does
      // (not an ELF file, a missing dependency, a glibc too old).
      String why = e.getMessage();
      try {
        if (PATH != null) System.load(PATH);
      } catch (UnsatisfiedLinkError loader) {
        why = loader.getMessage();
      }
      UnsatisfiedLinkError error = new UnsatisfiedLinkError("cannot load libdlbridge ("
          + (PATH != null ? PATH : System.mapLibraryName("dlbridge") + " on the system's library path") + "): "
          + why);
      error.initCause(e);
      throw error;
    }
  }

  private static final MemoryLayout DLDEVICE = MemoryLayout.structLayout(JAVA_INT.withName("device_type"),
      JAVA_INT.withName("device_id"));
  private static final MemoryLayout DLDATATYPE = MemoryLayout.structLayout(JAVA_BYTE.withName("code"),
      JAVA_BYTE.withName("bits"), JAVA_SHORT.withName("lanes"));

  static {
    if (DLDEVICE.byteSize() != Abi.DLDEVICE_SIZE || DLDATATYPE.byteSize() != Abi.DLDATATYPE_SIZE
        || DLDEVICE.byteOffset(MemoryLayout.PathElement.groupElement("device_id")) != Abi.DLDEVICE_DEVICE_ID
        || DLDATATYPE.byteOffset(MemoryLayout.PathElement.groupElement("lanes")) != Abi.DLDATATYPE_LANES) {
      throw new AssertionError("the FFM layouts of DLDevice and DLDataType disagree with Abi");
    }
  }

  private static MethodHandle fn(String name, FunctionDescriptor descriptor, Linker.Option... options) {
    MemorySegment symbol = SYMBOLS.find(name)
        .orElseThrow(() -> new UnsatisfiedLinkError("libdlbridge has no symbol " + name + " (" + PATH + ")"));
    return LINKER.downcallHandle(symbol, descriptor, options);
  }

  private static final MethodHandle VERSION_STRING = fn("dlb_version_string", FunctionDescriptor.of(ADDRESS));
  private static final MethodHandle STATUS_NAME = fn("dlb_status_name", FunctionDescriptor.of(ADDRESS, JAVA_INT));
  private static final MethodHandle LAST_ERROR_MESSAGE = fn("dlb_last_error_message",
      FunctionDescriptor.of(ADDRESS));
  private static final MethodHandle LIVE_EXPORTS = fn("dlb_live_exports", FunctionDescriptor.of(JAVA_LONG));
  private static final MethodHandle DTYPE_FROM_NAME = fn("dlb_dtype_from_name",
      FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
  private static final MethodHandle DTYPE_NAME = fn("dlb_dtype_name",
      FunctionDescriptor.of(JAVA_INT, DLDATATYPE, ADDRESS, JAVA_LONG));
  private static final MethodHandle ALLOC = fn("dlb_buffer_alloc",
      FunctionDescriptor.of(JAVA_INT, DLDEVICE, DLDATATYPE, JAVA_INT, ADDRESS, ADDRESS));
  private static final MethodHandle ALLOC_SHARED = fn("dlb_buffer_alloc_shared",
      FunctionDescriptor.of(JAVA_INT, DLDEVICE, DLDATATYPE, JAVA_INT, ADDRESS, ADDRESS));
  private static final MethodHandle WRAP = fn("dlb_buffer_wrap",
      FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, ADDRESS, ADDRESS, ADDRESS));
  private static final MethodHandle RETAIN = fn("dlb_buffer_retain", FunctionDescriptor.of(ADDRESS, ADDRESS));
  private static final MethodHandle RELEASE = fn("dlb_buffer_release", FunctionDescriptor.ofVoid(ADDRESS));
  private static final MethodHandle DELETE = fn("dlb_buffer_delete", FunctionDescriptor.of(JAVA_INT, ADDRESS));
  private static final MethodHandle DLTENSOR = fn("dlb_buffer_dltensor",
      FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
  private static final MethodHandle FLAGS = fn("dlb_buffer_flags", FunctionDescriptor.of(JAVA_LONG, ADDRESS));
  private static final MethodHandle NBYTES = fn("dlb_buffer_nbytes", FunctionDescriptor.of(JAVA_LONG, ADDRESS));
  private static final MethodHandle HOST_VIEW = fn("dlb_buffer_host_view",
      FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, ADDRESS));
  private static final MethodHandle EXPORT_OPTIONS_INIT = fn("dlb_export_options_init",
      FunctionDescriptor.ofVoid(ADDRESS));
  private static final MethodHandle EXPORT_VERSIONED = fn("dlb_export_versioned",
      FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS));
  private static final MethodHandle EXPORT_LEGACY = fn("dlb_export_legacy",
      FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS));
  // The default export of the hot path as a critical call (no thread-state
  // change): it never calls back into Java (no Java backend exists), and
  // it copies only a backend's storage; exports with options, which may
  // ask for a copy of any size, keep the ordinary handles above.
  private static final MethodHandle EXPORT_VERSIONED_CRITICAL = fn("dlb_export_versioned",
      FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS), Linker.Option.critical(false));
  private static final MethodHandle IMPORT_VERSIONED = fn("dlb_import_versioned",
      FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS));
  private static final MethodHandle IMPORT_LEGACY = fn("dlb_import_legacy",
      FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS));
  // The deleters may run a wrap's release callback (an upcall into Java).
  private static final MethodHandle FREE_VERSIONED = fn("dlb_managed_free_versioned",
      FunctionDescriptor.ofVoid(ADDRESS));
  private static final MethodHandle FREE_LEGACY = fn("dlb_managed_free_legacy", FunctionDescriptor.ofVoid(ADDRESS));
  private static final MethodHandle TICKET_ISSUE = fn("dlb_share_ticket_issue",
      FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, ADDRESS));
  private static final MethodHandle TICKET_OPEN = fn("dlb_share_ticket_open",
      FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG, ADDRESS));

  /** The release callback of dlb_buffer_wrap; may run on any thread, also a native one. */
  private static void onRelease(MemorySegment ctx) {
    try {
      Buffer.releaseKept(ctx.address());
    } catch (Throwable e) {
      // Nothing may unwind into C; the map removal does not throw.
    }
  }

  private static final MemorySegment RELEASE_STUB;

  static {
    try {
      MethodHandle target = MethodHandles.lookup().findStatic(Lib.class, "onRelease",
          MethodType.methodType(void.class, MemorySegment.class));
      RELEASE_STUB = LINKER.upcallStub(target, FunctionDescriptor.ofVoid(ADDRESS), Arena.global());
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  /** One out slot per thread, for the handle or tensor a call writes. */
  private static final ThreadLocal<MemorySegment> OUT =
      ThreadLocal.withInitial(() -> Arena.ofAuto().allocate(JAVA_LONG));

  private static RuntimeException rethrow(Throwable e) {
    if (e instanceof RuntimeException r) return r;
    if (e instanceof Error err) throw err;
    return new IllegalStateException(e);
  }

  private static String string(MemorySegment s) {
    return s.reinterpret(Long.MAX_VALUE).getString(0);
  }

  private static MemorySegment at(long address) {
    return MemorySegment.ofAddress(address);
  }

  /** Throws the calling thread's last error when {@code status} is not DLB_OK. */
  static void check(int status) {
    if (status != 0) {
      String message;
      try {
        message = string((MemorySegment) LAST_ERROR_MESSAGE.invokeExact());
      } catch (Throwable e) {
        throw rethrow(e);
      }
      throw new DlbridgeException(status, statusName(status), message);
    }
  }

  static String versionString() {
    try {
      return string((MemorySegment) VERSION_STRING.invokeExact());
    } catch (Throwable e) {
      throw rethrow(e);
    }
  }

  static String statusName(int status) {
    try {
      return string((MemorySegment) STATUS_NAME.invokeExact(status));
    } catch (Throwable e) {
      throw rethrow(e);
    }
  }

  static long liveExports() {
    try {
      return (long) LIVE_EXPORTS.invokeExact();
    } catch (Throwable e) {
      throw rethrow(e);
    }
  }

  private static MemorySegment dtypeSegment(Arena arena, int dtype) {
    MemorySegment s = arena.allocate(DLDATATYPE);
    s.set(JAVA_BYTE, 0, (byte) dtype);
    s.set(JAVA_BYTE, Abi.DLDATATYPE_BITS, (byte) (dtype >>> 8));
    s.set(JAVA_SHORT, Abi.DLDATATYPE_LANES, (short) (dtype >>> 16));
    return s;
  }

  private static int dtypeAt(MemorySegment s, long offset) {
    return (s.get(JAVA_BYTE, offset) & 0xff) | (s.get(JAVA_BYTE, offset + Abi.DLDATATYPE_BITS) & 0xff) << 8
        | (s.get(JAVA_SHORT, offset + Abi.DLDATATYPE_LANES) & 0xffff) << 16;
  }

  static int dtypeFromName(String name) {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment out = arena.allocate(DLDATATYPE);
      check((int) DTYPE_FROM_NAME.invokeExact(arena.allocateFrom(name), out));
      return dtypeAt(out, 0);
    } catch (Throwable e) {
      throw rethrow(e);
    }
  }

  static String dtypeName(int dtype) {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment name = arena.allocate(64);
      check((int) DTYPE_NAME.invokeExact(dtypeSegment(arena, dtype), name, name.byteSize()));
      return name.getString(0);
    } catch (Throwable e) {
      throw rethrow(e);
    }
  }

  static long alloc(boolean shared, int dtype, long[] shape) {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment device = arena.allocate(DLDEVICE);
      device.set(JAVA_INT, 0, Abi.DEVICE_CPU);
      MemorySegment extents = arena.allocateFrom(JAVA_LONG, shape);
      MemorySegment out = arena.allocate(JAVA_LONG);
      MethodHandle h = shared ? ALLOC_SHARED : ALLOC;
      check((int) h.invokeExact(device, dtypeSegment(arena, dtype), shape.length, extents, out));
      return out.get(JAVA_LONG, 0);
    } catch (Throwable e) {
      throw rethrow(e);
    }
  }

  /** dlb_buffer_wrap of host memory; the release callback gets {@code key}. */
  static long wrap(long data, long byteOffset, int dtype, long[] shape, long flags, long key) {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment view = arena.allocate(Abi.DLTENSOR_SIZE, 8);
      view.set(JAVA_LONG, Abi.DLTENSOR_DATA, data);
      view.set(JAVA_INT, Abi.DLTENSOR_DEVICE, Abi.DEVICE_CPU);
      view.set(JAVA_INT, Abi.DLTENSOR_NDIM, shape.length);
      MemorySegment.copy(dtypeSegment(arena, dtype), 0, view, Abi.DLTENSOR_DTYPE, Abi.DLDATATYPE_SIZE);
      view.set(ADDRESS, Abi.DLTENSOR_SHAPE, shape.length > 0 ? arena.allocateFrom(JAVA_LONG, shape)
          : MemorySegment.NULL);
      view.set(JAVA_LONG, Abi.DLTENSOR_BYTE_OFFSET, byteOffset);
      MemorySegment out = arena.allocate(JAVA_LONG);
      check((int) WRAP.invokeExact(view, flags, RELEASE_STUB, at(key), out));
      return out.get(JAVA_LONG, 0);
    } catch (Throwable e) {
      throw rethrow(e);
    }
  }

  static void retain(long buffer) {
    try {
      MemorySegment ignored = (MemorySegment) RETAIN.invokeExact(at(buffer));
    } catch (Throwable e) {
      throw rethrow(e);
    }
  }

  static void release(long buffer) {
    try {
      RELEASE.invokeExact(at(buffer));
    } catch (Throwable e) {
      throw rethrow(e);
    }
  }

  static void delete(long buffer) {
    try {
      check((int) DELETE.invokeExact(at(buffer)));
    } catch (Throwable e) {
      throw rethrow(e);
    }
  }

  static long flags(long buffer) {
    try {
      return (long) FLAGS.invokeExact(at(buffer));
    } catch (Throwable e) {
      throw rethrow(e);
    }
  }

  static long nbytes(long buffer) {
    try {
      return (long) NBYTES.invokeExact(at(buffer));
    } catch (Throwable e) {
      throw rethrow(e);
    }
  }

  static TensorInfo dltensor(long buffer) {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment t = arena.allocate(Abi.DLTENSOR_SIZE, 8);
      check((int) DLTENSOR.invokeExact(at(buffer), t));
      TensorInfo info = new TensorInfo();
      info.data = t.get(JAVA_LONG, Abi.DLTENSOR_DATA);
      info.byteOffset = t.get(JAVA_LONG, Abi.DLTENSOR_BYTE_OFFSET);
      info.deviceType = t.get(JAVA_INT, Abi.DLTENSOR_DEVICE);
      info.deviceId = t.get(JAVA_INT, Abi.DLTENSOR_DEVICE + Abi.DLDEVICE_DEVICE_ID);
      info.dtype = dtypeAt(t, Abi.DLTENSOR_DTYPE);
      int ndim = t.get(JAVA_INT, Abi.DLTENSOR_NDIM);
      info.shape = ndim == 0 ? new long[0]
          : t.get(ADDRESS, Abi.DLTENSOR_SHAPE).reinterpret(8L * ndim).toArray(JAVA_LONG);
      info.strides = ndim == 0 ? new long[0]
          : t.get(ADDRESS, Abi.DLTENSOR_STRIDES).reinterpret(8L * ndim).toArray(JAVA_LONG);
      return info;
    } catch (Throwable e) {
      throw rethrow(e);
    }
  }

  static HostView hostView(long buffer, int access) {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment v = arena.allocate(Abi.HOST_VIEW_SIZE, 8);
      v.set(JAVA_LONG, 0, Abi.HOST_VIEW_SIZE); // struct_size
      check((int) HOST_VIEW.invokeExact(at(buffer), access, v));
      HostView view = new HostView();
      view.data = v.get(JAVA_LONG, Abi.HOST_VIEW_DATA);
      view.nbytes = v.get(JAVA_LONG, Abi.HOST_VIEW_NBYTES);
      view.numel = v.get(JAVA_LONG, Abi.HOST_VIEW_NUMEL);
      view.dtype = dtypeAt(v, Abi.HOST_VIEW_DTYPE);
      view.writable = v.get(JAVA_INT, Abi.HOST_VIEW_WRITABLE) != 0;
      return view;
    } catch (Throwable e) {
      throw rethrow(e);
    }
  }

  /** A direct ByteBuffer over {@code nbytes} at {@code address} (no lifetime of its own). */
  static ByteBuffer byteBuffer(long address, long nbytes) {
    return at(address).reinterpret(nbytes).asByteBuffer();
  }

  /** The address of a direct ByteBuffer's memory (its start, not its position). */
  static long address(ByteBuffer direct) {
    return MemorySegment.ofBuffer(direct).address() - direct.position();
  }

  /** dlb_export_versioned / dlb_export_legacy; copy &lt; 0: the library's defaults. */
  static long export(long buffer, boolean versioned, int copy, long flags) {
    try {
      MemorySegment out = OUT.get();
      if (copy < 0 && flags == 0) {
        check(versioned ? (int) EXPORT_VERSIONED_CRITICAL.invokeExact(at(buffer), MemorySegment.NULL, out)
            : (int) EXPORT_LEGACY.invokeExact(at(buffer), MemorySegment.NULL, out));
        return out.get(JAVA_LONG, 0);
      }
      try (Arena arena = Arena.ofConfined()) {
        MemorySegment o = arena.allocate(Abi.EXPORT_OPTIONS_SIZE, 8);
        EXPORT_OPTIONS_INIT.invokeExact(o);
        if (copy >= 0) o.set(JAVA_INT, Abi.EXPORT_OPTIONS_COPY, copy);
        o.set(JAVA_LONG, Abi.EXPORT_OPTIONS_FLAGS, flags);
        check(versioned ? (int) EXPORT_VERSIONED.invokeExact(at(buffer), o, out)
            : (int) EXPORT_LEGACY.invokeExact(at(buffer), o, out));
        return out.get(JAVA_LONG, 0);
      }
    } catch (Throwable e) {
      throw rethrow(e);
    }
  }

  static void managedFree(long tensor, boolean versioned) {
    try {
      if (versioned) {
        FREE_VERSIONED.invokeExact(at(tensor));
      } else {
        FREE_LEGACY.invokeExact(at(tensor));
      }
    } catch (Throwable e) {
      throw rethrow(e);
    }
  }

  static long importTensor(long tensor, boolean versioned) {
    try {
      MemorySegment out = OUT.get();
      check(versioned ? (int) IMPORT_VERSIONED.invokeExact(at(tensor), MemorySegment.NULL, out)
          : (int) IMPORT_LEGACY.invokeExact(at(tensor), MemorySegment.NULL, out));
      return out.get(JAVA_LONG, 0);
    } catch (Throwable e) {
      throw rethrow(e);
    }
  }

  static byte[] ticketIssue(long buffer) {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment ticket = arena.allocate(Abi.TICKET_SIZE, 8);
      check((int) TICKET_ISSUE.invokeExact(at(buffer), 0L, ticket));
      return ticket.asSlice(Abi.TICKET_BYTES, ticket.get(JAVA_INT, 0)).toArray(JAVA_BYTE);
    } catch (Throwable e) {
      throw rethrow(e);
    }
  }

  static long ticketOpen(byte[] ticket) {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment bytes = arena.allocateFrom(JAVA_BYTE, ticket);
      MemorySegment out = arena.allocate(JAVA_LONG);
      check((int) TICKET_OPEN.invokeExact(bytes, (long) ticket.length, 0L, out));
      return out.get(JAVA_LONG, 0);
    } catch (Throwable e) {
      throw rethrow(e);
    }
  }
}

package org.dlbridge;

import static org.dlbridge.Checks.check;
import static org.dlbridge.Checks.collect;
import static org.dlbridge.Checks.equal;
import static org.dlbridge.Checks.raises;
import static org.dlbridge.Checks.refused;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.DoubleBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;

/**
 * The binding's behaviour against the library and tests/lang's native
 * library (a DLPack consumer and producer that knows nothing of dlbridge):
 * values, pointer identity, deleter counts, errors with their status, and
 * nothing left behind. Run by Surefire (against target/classes) and by
 * Failsafe (against the packaged jar: FFM on JDK 22+).
 */
class BindingTest {
  private static double[] doubles(ByteBuffer b) {
    DoubleBuffer d = b.asDoubleBuffer();
    double[] out = new double[d.remaining()];
    d.get(out);
    return out;
  }

  @Test
  void implementationAndLibrary() {
    String want = System.getProperty("dlbridge.implementation");
    if (want != null) equal(Dlbridge.implementation(), want, "implementation");
    equal(Dlbridge.version(), "0.1.0", "version");
    if (System.getProperty("dlbridge.library") == null && System.getenv("DLBRIDGE_LIBRARY") == null) {
      String path = Dlbridge.libraryPath();
      check(path != null && path.startsWith(System.getProperty("java.io.tmpdir")),
          "the library comes from the class path's linux-x86-64/libdlbridge.so: " + path);
    }
  }

  @Test
  void allocateViewExport() {
    long live = Dlbridge.liveExports();
    try (Buffer b = Buffer.allocate("float64", 2, 3)) {
      equal(b.shape(), new long[] {2, 3}, "shape");
      equal(b.strides(), new long[] {3, 1}, "strides");
      equal(b.dtype(), "float64", "dtype");
      equal(b.nbytes(), 48L, "nbytes");
      ByteBuffer view = b.asWritableByteBuffer();
      equal(view.order(), ByteOrder.nativeOrder(), "byte order");
      equal(view.capacity(), 48, "view size");
      check(!b.asByteBuffer().isReadOnly(), "writable memory gives a writable view");
      for (int i = 0; i < 6; i++) view.putDouble(8 * i, i + 0.5);
      ManagedTensor t = b.exportVersioned();
      equal(Dlbridge.liveExports(), live + 1, "one live export");
      equal(t.dltensorAddress() - t.address(), 32L, "the DLTensor of a versioned struct");
      equal(NativeLibrary.sum(t), 18.0, "the native library reads what Java wrote");
      check(NativeLibrary.nl_store_f64(NativeLibrary.dltensor(t), 5, -1.0) == 0, "nl_store_f64");
      equal(view.getDouble(40), -1.0, "Java sees the native library's write");
      equal(NativeLibrary.consume(t), 11.5, "consumed");
      equal(Dlbridge.liveExports(), live, "the consumer ran the deleter");
      t.close(); // handed on: does nothing
      equal(Dlbridge.liveExports(), live, "still no export");
    }
  }

  @Test
  void wrapZeroCopy() {
    ByteBuffer mem = ByteBuffer.allocateDirect(8 * 4 + 16).order(ByteOrder.nativeOrder());
    mem.position(16); // from the position on
    for (int i = 0; i < 4; i++) mem.putDouble(16 + 8 * i, 10 + i);
    long address = com.sun.jna.Pointer.nativeValue(com.sun.jna.Native.getDirectBufferPointer(mem)) + 16;
    try (Buffer b = Buffer.wrap(mem, "float64", 4)) {
      equal(b.address(), address, "the buffer is the ByteBuffer's memory");
      try (ManagedTensor t = b.exportLegacy()) {
        equal(com.sun.jna.Pointer.nativeValue(NativeLibrary.dltensor(t).getPointer(0)), address,
            "the export's data pointer (the byte offset folded in)");
        equal(NativeLibrary.sum(t), 46.0, "sum");
        check(NativeLibrary.nl_store_f64(NativeLibrary.dltensor(t), 2, 7.5) == 0, "nl_store_f64");
      }
      equal(mem.getDouble(16 + 16), 7.5, "the write landed in the ByteBuffer");
      try (ManagedTensor t = b.exportVersioned(); Buffer back = Buffer.importTensor(t)) {
        equal(back.address(), address, "a round trip keeps the memory");
        equal(doubles(back.asByteBuffer()), new double[] {10, 11, 7.5, 13}, "values");
      }
    }
  }

  @Test
  void wrappedKeptAlive() throws Exception {
    ManagedTensor t;
    {
      ByteBuffer mem = ByteBuffer.allocateDirect(8 * 1000).order(ByteOrder.nativeOrder());
      for (int i = 0; i < 1000; i++) mem.putDouble(8 * i, 1.0);
      try (Buffer b = Buffer.wrap(mem, "float64", 1000)) {
        t = b.exportVersioned();
      }
    }
    // No Java reference to the ByteBuffer or the handle is left: only the export.
    for (int i = 0; i < 5; i++) {
      System.gc();
      byte[] churn = new byte[1 << 20];
      churn[0] = 1;
    }
    equal(NativeLibrary.sum(t), 1000.0, "the memory is intact after collections");
    NativeLibrary.consume(t);
  }

  @Test
  void importNative() throws Exception {
    long calls = NativeLibrary.nl_deleter_calls();
    try (Buffer b = Buffer.importTensor(ManagedTensor.adoptVersioned(NativeLibrary.nl_make_versioned(5, 10.0)))) {
      equal(b.shape(), new long[] {5}, "shape");
      equal(b.dtype(), "float64", "dtype");
      check(NativeLibrary.nl_live() >= 1, "alive while the buffer is");
    }
    equal(NativeLibrary.nl_deleter_calls(), calls + 1, "closing the buffer ran the deleter, once");
    ManagedTensor legacy = ManagedTensor.adoptLegacy(NativeLibrary.nl_make_legacy(3, -1.0));
    Buffer b = Buffer.importTensor(legacy);
    legacy.close(); // spent: does nothing
    ByteBuffer view = b.asByteBuffer();
    b.close();
    equal(NativeLibrary.nl_deleter_calls(), calls + 1, "the view holds the tensor");
    equal(doubles(view), new double[] {-1, 0, 1}, "the library's values, read after close");
    view = null;
    collect(() -> NativeLibrary.nl_deleter_calls() >= calls + 2);
    equal(NativeLibrary.nl_deleter_calls(), calls + 2, "released with the view");
    // A tensor adopted and closed without import: its deleter, once.
    ManagedTensor.adoptVersioned(NativeLibrary.nl_make_versioned(2, 0)).close();
    equal(NativeLibrary.nl_deleter_calls(), calls + 3, "close runs the deleter");
  }

  @Test
  void reexportImported() {
    long calls = NativeLibrary.nl_deleter_calls();
    ManagedTensor out;
    try (Buffer b = Buffer.importTensor(ManagedTensor.adoptLegacy(NativeLibrary.nl_make_legacy(4, 1.0)))) {
      out = b.exportVersioned();
    }
    equal(NativeLibrary.nl_deleter_calls(), calls, "the export holds the library's tensor");
    equal(NativeLibrary.consume(out), 10.0, "1 + 2 + 3 + 4");
    equal(NativeLibrary.nl_deleter_calls(), calls + 1, "its deleter ran when the export's did");
  }

  @Test
  void readOnly() {
    ByteBuffer mem = ByteBuffer.allocateDirect(16).order(ByteOrder.nativeOrder());
    mem.putDouble(0, 3).putDouble(8, 4);
    try (Buffer b = Buffer.wrap(mem.asReadOnlyBuffer(), "float64", 2)) {
      check(b.isReadOnly(), "read-only");
      check(b.asByteBuffer().isReadOnly(), "a read-only view");
      DlbridgeException e = refused(Status.ERR_READ_ONLY, b::asWritableByteBuffer);
      check(e.detail().contains("read-only"), e.detail());
      refused(Status.ERR_READ_ONLY, () -> b.exportLegacy(Buffer.Copy.NEVER));
      try (ManagedTensor copy = b.exportLegacy()) { // a copy, the consumer's own
        check(NativeLibrary.nl_store_f64(NativeLibrary.dltensor(copy), 0, 99) == 0, "write the copy");
        equal(NativeLibrary.dltensor(copy).getPointer(0).getDouble(0), 99.0, "the copy changed");
      }
      equal(mem.getDouble(0), 3.0, "the read-only memory did not");
    }
  }

  @Test
  void copyPolicies() {
    try (Buffer b = Buffer.allocate("int32", 3)) {
      long address = b.address();
      try (ManagedTensor never = b.exportVersioned(Buffer.Copy.NEVER, false);
          ManagedTensor always = b.exportVersioned(Buffer.Copy.ALWAYS, false);
          ManagedTensor ro = b.exportVersioned(Buffer.Copy.IF_NEEDED, true)) {
        equal(never.pointer().getLong(32), address, "NEVER shares the memory");
        check(always.pointer().getLong(32) != address, "ALWAYS copies");
        equal(always.pointer().getLong(24) & 2, 2L, "IS_COPIED");
        equal(ro.pointer().getLong(24) & 1, 1L, "READ_ONLY asked for");
        equal(ro.pointer().getLong(32), address, "and shared");
      }
    }
  }

  @Test
  void cleanerBackstop() throws Exception {
    long calls = NativeLibrary.nl_deleter_calls();
    Buffer.allocate("int32", 8).exportVersioned(); // both handles dropped unclosed
    ManagedTensor.adoptVersioned(NativeLibrary.nl_make_versioned(3, 0));
    collect(() -> Dlbridge.liveExports() == 0 && NativeLibrary.nl_deleter_calls() >= calls + 1);
    equal(Dlbridge.liveExports(), 0L, "the Cleaner ran the export's deleter");
    equal(NativeLibrary.nl_deleter_calls(), calls + 1, "and the adopted tensor's, once");
  }

  @Test
  void deleterOnAnotherThread() throws Exception {
    ByteBuffer mem = ByteBuffer.allocateDirect(8 * 3).order(ByteOrder.nativeOrder());
    ManagedTensor t;
    try (Buffer b = Buffer.wrap(mem, "float64", 3)) {
      t = b.exportLegacy();
    }
    Thread other = new Thread(t::close);
    other.start();
    other.join();
    raises(DlbridgeException.class, t::address);
  }

  @Test
  void threads() throws Exception {
    List<Thread> threads = new ArrayList<>();
    AtomicInteger errors = new AtomicInteger();
    try (Buffer b = Buffer.allocate("float32", 2, 3)) {
      for (int i = 0; i < 4; i++) {
        Thread th = new Thread(() -> {
          try {
            for (int k = 0; k < 10_000; k++) {
              try (ManagedTensor t = b.exportVersioned()) {
                if (t.address() == 0) errors.incrementAndGet();
              }
            }
          } catch (RuntimeException e) {
            errors.incrementAndGet();
          }
        });
        threads.add(th);
        th.start();
      }
      for (Thread th : threads) th.join();
    }
    equal(errors.get(), 0, "errors");
  }

  @Test
  void closeRacingCloseRunsTheDeleterOnce() throws Exception {
    long live = Dlbridge.liveExports();
    try (Buffer b = Buffer.allocate("int8", 4)) {
      for (int i = 0; i < 1000; i++) {
        ManagedTensor t = b.exportVersioned();
        Thread other = new Thread(t::close);
        other.start();
        t.close();
        other.join();
        equal(Dlbridge.liveExports(), live, "after round " + i);
      }
    }
  }

  @Test
  void badHandles() {
    Buffer b = Buffer.allocate("float32", 4);
    b.close();
    b.close(); // twice: harmless
    DlbridgeException closed = refused(Status.ERR_INVALID_ARGUMENT, b::exportVersioned);
    check(closed.detail().contains("closed"), closed.detail());
    refused(Status.ERR_INVALID_ARGUMENT, b::shape);
    refused(Status.ERR_INVALID_ARGUMENT, b::asByteBuffer);
    try (Buffer d = Buffer.allocate("float32", 4)) {
      ManagedTensor before = d.exportVersioned();
      ByteBuffer viewBefore = d.asWritableByteBuffer();
      d.delete();
      check(d.isDeleted(), "deleted");
      DlbridgeException e = refused(Status.ERR_DELETED, d::exportVersioned);
      check(e.getMessage().startsWith("DLB_ERR_DELETED: ") && e.detail().contains("deleted"), e.getMessage());
      refused(Status.ERR_DELETED, d::asByteBuffer);
      viewBefore.putFloat(0, 2.5f); // made before the delete: its memory is still held
      equal(viewBefore.getFloat(0), 2.5f, "the earlier view");
      NativeLibrary.consume(before); // made before the delete: still valid
    }
    ManagedTensor t = Buffer.allocate("float64", 2).exportVersioned();
    Buffer first = Buffer.importTensor(t);
    refused(Status.ERR_INVALID_ARGUMENT, () -> Buffer.importTensor(t)); // imported twice
    refused(Status.ERR_INVALID_ARGUMENT, t::transfer);
    first.close();
    ManagedTensor handed = Buffer.allocate("float64", 2).exportLegacy();
    NativeLibrary.consume(handed);
    handed.close(); // handed on: the consumer ran the deleter; this does nothing
  }

  @Test
  void badArguments() {
    DlbridgeException e = refused(Status.ERR_UNSUPPORTED_DTYPE, () -> Buffer.allocate("float33", 2));
    check(e.detail().contains("float33"), "names the string: " + e.detail());
    e = refused(Status.ERR_MALFORMED, () -> Buffer.allocate("float32", 2, -3));
    check(e.detail().contains("-3"), "names the extent: " + e.detail());
    int kept = Buffer.keptByteBuffers();
    refused(Status.ERR_MALFORMED, () -> Buffer.wrap(ByteBuffer.allocateDirect(64), "int8", -1));
    refused(Status.ERR_UNSUPPORTED_DTYPE, () -> Buffer.wrap(ByteBuffer.allocateDirect(64), "complex7", 2));
    raises(IllegalArgumentException.class, () -> Buffer.wrap(ByteBuffer.allocate(64), "int8", 64));
    IllegalArgumentException small = raises(IllegalArgumentException.class,
        () -> Buffer.wrap(ByteBuffer.allocateDirect(64), "float64", 9));
    check(small.getMessage().contains("72 bytes"), small.getMessage());
    check(Buffer.keptByteBuffers() <= kept, "refused wraps keep nothing");
    refused(Status.ERR_MALFORMED, () -> Buffer.openTicket(new byte[] {1, 2, 3}));
    try (Buffer plain = Buffer.allocate("int64", 2)) {
      refused(Status.ERR_NOT_ZERO_COPY, plain::issueTicket);
    }
  }

  @Test
  void malformedImport() {
    HandMade m = HandMade.legacy(new long[] {-1}, null, 1);
    DlbridgeException e = refused(Status.ERR_MALFORMED, () -> Buffer.importTensor(m.tensor));
    check(e.detail().contains("-1"), e.detail());
    equal(m.deletes(), 0, "a refused import runs no deleter");
    m.tensor.close(); // still the caller's
    equal(m.deletes(), 1, "close ran it, once");
    m.tensor.close();
    equal(m.deletes(), 1, "once");
  }

  @Test
  void hostViewRuleIsTheLibrarys() {
    // A strided tensor (every other element) and one on a device the CPU
    // cannot read: imported, then refused a view by dlb_buffer_host_view.
    HandMade strided = HandMade.legacy(new long[] {4}, new long[] {2}, 1);
    try (Buffer b = Buffer.importTensor(strided.tensor)) {
      DlbridgeException e = refused(Status.ERR_UNSUPPORTED_LAYOUT, b::asByteBuffer);
      check(!e.detail().isEmpty(), e.detail());
      try (ManagedTensor copy = b.exportVersioned(Buffer.Copy.ALWAYS, false)) {
        equal(NativeLibrary.sum(copy), 0.0, "a copy still reads it");
      }
    }
    equal(strided.deletes(), 1, "the hand-made tensor's deleter ran once");
    HandMade device = HandMade.legacy(new long[] {4}, null, 2); // kDLCUDA
    try (Buffer b = Buffer.importTensor(device.tensor)) {
      refused(Status.ERR_UNSUPPORTED_DEVICE, b::asByteBuffer);
    }
    equal(device.deletes(), 1, "once");
  }

  @AfterAll
  static void nothingLeft() throws Exception {
    collect(() -> Dlbridge.liveExports() == 0 && Buffer.keptByteBuffers() == 0 && NativeLibrary.nl_live() == 0);
    equal(Dlbridge.liveExports(), 0L, "live exports");
    equal(Buffer.keptByteBuffers(), 0, "ByteBuffers kept for the library");
    equal(NativeLibrary.nl_live(), 0L, "the native library's tensors");
  }
}

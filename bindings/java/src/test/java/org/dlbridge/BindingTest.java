package org.dlbridge;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.DoubleBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The Java binding's tests: a plain main (no test framework to install),
 * each test a method, run in order; exit status 1 when any fails. System
 * properties: dlbridge.library (libdlbridge.so), native.library
 * (tests/lang's libnative_library.so), dlbridge.pythonpath (the build's
 * Python package) and dlbridge.python (default /usr/bin/python3).
 */
public final class BindingTest {
  private interface Body {
    void run() throws Exception;
  }

  private static int failures;

  public static void main(String[] args) throws Exception {
    test("allocate, view, export to a native consumer", BindingTest::allocateViewExport);
    test("a direct ByteBuffer wrapped, zero-copy both ways", BindingTest::wrapZeroCopy);
    test("a wrapped ByteBuffer stays alive while an export lives", BindingTest::wrappedKeptAlive);
    test("tensors of a native library imported, deleter once", BindingTest::importNative);
    test("an imported tensor exported on to the native library", BindingTest::reexportImported);
    test("read-only memory", BindingTest::readOnly);
    test("the Cleaner as the backstop of forgotten handles", BindingTest::cleanerBackstop);
    test("a deleter run on another thread", BindingTest::deleterOnAnotherThread);
    test("bad input: closed, deleted, imported twice", BindingTest::badHandles);
    test("bad input: dtype names, extents, memory, tickets", BindingTest::badArguments);
    test("bad input: a malformed tensor stays its owner's", BindingTest::malformedImport);
    test("a ticket to a Python process, which writes back", BindingTest::ticketToPython);
    test("a ticket from a Python process, written here", BindingTest::ticketFromPython);
    test("nothing left: live exports, kept ByteBuffers, native tensors", BindingTest::nothingLeft);
    System.out.println(failures == 0 ? "java binding: all passed" : "java binding: " + failures + " failed");
    System.exit(failures == 0 ? 0 : 1);
  }

  private static void test(String name, Body body) {
    try {
      body.run();
      System.out.println("ok   " + name);
    } catch (Throwable e) {
      failures++;
      System.out.println("FAIL " + name);
      e.printStackTrace(System.out);
    }
  }

  static void check(boolean condition, String what) {
    if (!condition) throw new AssertionError(what);
  }

  static void equal(Object got, Object want, String what) {
    if (!java.util.Objects.deepEquals(got, want)) {
      throw new AssertionError(what + ": got " + show(got) + ", want " + show(want));
    }
  }

  private static String show(Object o) {
    if (o instanceof long[]) return Arrays.toString((long[]) o);
    if (o instanceof double[]) return Arrays.toString((double[]) o);
    return String.valueOf(o);
  }

  static <T extends Throwable> T raises(Class<T> type, Body body) {
    try {
      body.run();
    } catch (Throwable e) {
      if (type.isInstance(e)) return type.cast(e);
      throw new AssertionError("expected " + type.getSimpleName() + ", got " + e, e);
    }
    throw new AssertionError("expected " + type.getSimpleName() + ", nothing was thrown");
  }

  static DlbridgeException refused(String statusName, Body body) {
    DlbridgeException e = raises(DlbridgeException.class, body);
    equal(e.statusName(), statusName, "status of " + e.getMessage());
    check(!e.detail().isEmpty(), "a message");
    return e;
  }

  private static double[] doubles(ByteBuffer b) {
    DoubleBuffer d = b.asDoubleBuffer();
    double[] out = new double[d.remaining()];
    d.get(out);
    return out;
  }

  /** Collects until the Cleaner has run what it should, or 10 s passed. */
  static void collect(java.util.function.BooleanSupplier done) throws InterruptedException {
    for (int i = 0; i < 500 && !done.getAsBoolean(); i++) {
      System.gc();
      Thread.sleep(20);
    }
  }

  static void allocateViewExport() {
    long live = Dlbridge.liveExports();
    try (Buffer b = Buffer.allocate("float64", 2, 3)) {
      equal(b.shape(), new long[] {2, 3}, "shape");
      equal(b.strides(), new long[] {3, 1}, "strides");
      equal(b.dtype(), "float64", "dtype");
      equal(b.nbytes(), 48L, "nbytes");
      ByteBuffer view = b.asByteBuffer();
      equal(view.order(), ByteOrder.nativeOrder(), "byte order");
      equal(view.capacity(), 48, "view size");
      for (int i = 0; i < 6; i++) view.putDouble(8 * i, i + 0.5);
      ManagedTensor t = b.exportVersioned();
      equal(Dlbridge.liveExports(), live + 1, "one live export");
      equal(NativeLibrary.sum(t), 18.0, "the native library reads what Java wrote");
      check(NativeLibrary.nl_store_f64(NativeLibrary.dltensor(t), 5, -1.0) == 0, "nl_store_f64");
      equal(view.getDouble(40), -1.0, "Java sees the native library's write");
      equal(NativeLibrary.consume(t), 11.5, "consumed");
      equal(Dlbridge.liveExports(), live, "the consumer ran the deleter");
      t.close(); // handed on: does nothing
      equal(Dlbridge.liveExports(), live, "still no export");
    }
  }

  static void wrapZeroCopy() {
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

  static void wrappedKeptAlive() throws Exception {
    collect(() -> Buffer.keptByteBuffers() == 0); // the views of earlier tests
    int kept = Buffer.keptByteBuffers();
    ManagedTensor t;
    {
      ByteBuffer mem = ByteBuffer.allocateDirect(8 * 1000).order(ByteOrder.nativeOrder());
      for (int i = 0; i < 1000; i++) mem.putDouble(8 * i, 1.0);
      try (Buffer b = Buffer.wrap(mem, "float64", 1000)) {
        t = b.exportVersioned();
      }
    }
    // No Java reference to the ByteBuffer or the handle is left: only the export.
    equal(Buffer.keptByteBuffers(), kept + 1, "the ByteBuffer is kept for the export");
    for (int i = 0; i < 5; i++) {
      System.gc();
      byte[] churn = new byte[1 << 20];
      churn[0] = 1;
    }
    equal(NativeLibrary.sum(t), 1000.0, "the memory is intact after collections");
    NativeLibrary.consume(t);
    equal(Buffer.keptByteBuffers(), kept, "released with the last export");
  }

  static void importNative() throws Exception {
    long calls = NativeLibrary.nl_deleter_calls();
    try (Buffer b = Buffer.importTensor(ManagedTensor.adoptVersioned(NativeLibrary.nl_make_versioned(5, 10.0)))) {
      equal(b.shape(), new long[] {5}, "shape");
      equal(b.dtype(), "float64", "dtype");
      equal(NativeLibrary.nl_live(), 1L, "alive while the buffer is");
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
    collect(() -> NativeLibrary.nl_deleter_calls() == calls + 2);
    equal(NativeLibrary.nl_deleter_calls(), calls + 2, "released with the view");
    // A tensor adopted and closed without import: its deleter, once.
    ManagedTensor.adoptVersioned(NativeLibrary.nl_make_versioned(2, 0)).close();
    equal(NativeLibrary.nl_deleter_calls(), calls + 3, "close runs the deleter");
  }

  static void reexportImported() {
    long calls = NativeLibrary.nl_deleter_calls();
    long live = Dlbridge.liveExports();
    ManagedTensor out;
    try (Buffer b = Buffer.importTensor(ManagedTensor.adoptLegacy(NativeLibrary.nl_make_legacy(4, 1.0)))) {
      out = b.exportVersioned();
    }
    equal(NativeLibrary.nl_deleter_calls(), calls, "the export holds the library's tensor");
    equal(NativeLibrary.consume(out), 10.0, "1 + 2 + 3 + 4");
    equal(NativeLibrary.nl_deleter_calls(), calls + 1, "its deleter ran when the export's did");
    equal(Dlbridge.liveExports(), live, "no export left");
  }

  static void readOnly() {
    ByteBuffer mem = ByteBuffer.allocateDirect(16).order(ByteOrder.nativeOrder());
    mem.putDouble(0, 3).putDouble(8, 4);
    try (Buffer b = Buffer.wrap(mem.asReadOnlyBuffer(), "float64", 2)) {
      check(b.isReadOnly(), "read-only");
      check(b.asByteBuffer().isReadOnly(), "a read-only view");
      refused("DLB_ERR_READ_ONLY", () -> b.exportLegacy(Buffer.Copy.NEVER));
      try (ManagedTensor copy = b.exportLegacy()) { // a copy, the consumer's own
        check(NativeLibrary.nl_store_f64(NativeLibrary.dltensor(copy), 0, 99) == 0, "write the copy");
        equal(NativeLibrary.dltensor(copy).getPointer(0).getDouble(0), 99.0, "the copy changed");
      }
      equal(mem.getDouble(0), 3.0, "the read-only memory did not");
    }
  }

  static void cleanerBackstop() throws Exception {
    long live = Dlbridge.liveExports();
    long calls = NativeLibrary.nl_deleter_calls();
    long nlLive = NativeLibrary.nl_live();
    Buffer.allocate("int32", 8).exportVersioned(); // both handles dropped unclosed
    ManagedTensor.adoptVersioned(NativeLibrary.nl_make_versioned(3, 0));
    equal(Dlbridge.liveExports(), live + 1, "one export");
    collect(() -> Dlbridge.liveExports() == live && NativeLibrary.nl_live() == nlLive);
    equal(Dlbridge.liveExports(), live, "the Cleaner ran the export's deleter");
    equal(NativeLibrary.nl_live(), nlLive, "and the adopted tensor's");
    equal(NativeLibrary.nl_deleter_calls(), calls + 1, "once");
  }

  static void deleterOnAnotherThread() throws Exception {
    collect(() -> Buffer.keptByteBuffers() == 0);
    int kept = Buffer.keptByteBuffers();
    ByteBuffer mem = ByteBuffer.allocateDirect(8 * 3).order(ByteOrder.nativeOrder());
    ManagedTensor t;
    try (Buffer b = Buffer.wrap(mem, "float64", 3)) {
      t = b.exportLegacy();
    }
    Thread other = new Thread(t::close);
    other.start();
    other.join();
    equal(Buffer.keptByteBuffers(), kept, "the release callback ran on that thread");
  }

  static void badHandles() {
    Buffer b = Buffer.allocate("float32", 4);
    b.close();
    b.close(); // twice: harmless
    raises(IllegalStateException.class, b::exportVersioned);
    raises(IllegalStateException.class, b::shape);
    try (Buffer d = Buffer.allocate("float32", 4)) {
      ManagedTensor before = d.exportVersioned();
      d.delete();
      check(d.isDeleted(), "deleted");
      DlbridgeException e = refused("DLB_ERR_DELETED", d::exportVersioned);
      check(e.getMessage().startsWith("DLB_ERR_DELETED: ") && e.detail().contains("deleted"), e.getMessage());
      refused("DLB_ERR_DELETED", d::asByteBuffer);
      NativeLibrary.consume(before); // made before the delete: still valid
    }
    ManagedTensor t = Buffer.allocate("float64", 2).exportVersioned();
    Buffer first = Buffer.importTensor(t);
    raises(IllegalStateException.class, () -> Buffer.importTensor(t)); // imported twice
    raises(IllegalStateException.class, t::transfer);
    first.close();
    ManagedTensor handed = Buffer.allocate("float64", 2).exportLegacy();
    NativeLibrary.consume(handed);
    handed.close(); // handed on: the consumer ran the deleter; this does nothing
  }

  static void badArguments() {
    DlbridgeException e = refused("DLB_ERR_UNSUPPORTED_DTYPE", () -> Buffer.allocate("float33", 2));
    check(e.detail().contains("float33"), "names the string: " + e.detail());
    e = refused("DLB_ERR_MALFORMED", () -> Buffer.allocate("float32", 2, -3));
    check(e.detail().contains("-3"), "names the extent: " + e.detail());
    int kept = Buffer.keptByteBuffers();
    refused("DLB_ERR_MALFORMED", () -> Buffer.wrap(ByteBuffer.allocateDirect(64), "int8", -1));
    refused("DLB_ERR_UNSUPPORTED_DTYPE", () -> Buffer.wrap(ByteBuffer.allocateDirect(64), "complex7", 2));
    raises(IllegalArgumentException.class, () -> Buffer.wrap(ByteBuffer.allocate(64), "int8", 64));
    IllegalArgumentException small = raises(IllegalArgumentException.class,
        () -> Buffer.wrap(ByteBuffer.allocateDirect(64), "float64", 9));
    check(small.getMessage().contains("72 bytes"), small.getMessage());
    equal(Buffer.keptByteBuffers(), kept, "refused wraps keep nothing");
    refused("DLB_ERR_MALFORMED", () -> Buffer.openTicket(new byte[] {1, 2, 3}));
    try (Buffer plain = Buffer.allocate("int64", 2)) {
      refused("DLB_ERR_NOT_ZERO_COPY", plain::issueTicket);
    }
  }

  /** The deleter of the malformed tensor below: counts its calls. */
  interface Deleter extends com.sun.jna.Callback {
    void invoke(com.sun.jna.Pointer tensor);
  }

  static int malformedDeletes;
  static final Deleter COUNT_DELETES = t -> malformedDeletes++;

  static void malformedImport() {
    // A legacy DLManagedTensor (DLPack's layout: the DLTensor, manager_ctx,
    // deleter) of one float64 element whose extent is -1.
    com.sun.jna.Memory data = new com.sun.jna.Memory(8);
    com.sun.jna.Memory shape = new com.sun.jna.Memory(8);
    shape.setLong(0, -1);
    com.sun.jna.Memory m = new com.sun.jna.Memory(64);
    m.clear();
    m.setPointer(0, data);
    m.setInt(8, 1); // kDLCPU
    m.setInt(16, 1); // ndim
    m.setByte(20, (byte) 2); // kDLFloat
    m.setByte(21, (byte) 64);
    m.setShort(22, (short) 1);
    m.setPointer(24, shape);
    m.setPointer(56, com.sun.jna.CallbackReference.getFunctionPointer(COUNT_DELETES));
    ManagedTensor t = ManagedTensor.adoptLegacy(m);
    DlbridgeException e = refused("DLB_ERR_MALFORMED", () -> Buffer.importTensor(t));
    check(e.detail().contains("-1"), e.detail());
    equal(malformedDeletes, 0, "a refused import runs no deleter");
    t.close(); // still the caller's
    equal(malformedDeletes, 1, "close ran it, once");
    t.close();
    equal(malformedDeletes, 1, "once");
  }

  private static Process python(String code, String... args) throws Exception {
    List<String> cmd = new ArrayList<>(List.of(System.getProperty("dlbridge.python", "/usr/bin/python3"), "-c", code));
    cmd.addAll(Arrays.asList(args));
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT);
    pb.environment().put("PYTHONPATH", System.getProperty("dlbridge.pythonpath"));
    pb.environment().put("PYTHONDONTWRITEBYTECODE", "1");
    return pb.start();
  }

  static String hex(byte[] bytes) {
    StringBuilder s = new StringBuilder();
    for (byte b : bytes) s.append(String.format("%02x", b));
    return s.toString();
  }

  static byte[] unhex(String s) {
    byte[] out = new byte[s.length() / 2];
    for (int i = 0; i < out.length; i++) out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
    return out;
  }

  // The receiver: opens the ticket as unpickling a multiprocessing pickle
  // does (dlb_share_ticket_open), checks it maps the memory without a copy
  // (numpy's DLPack view is at the mapping's address), reads it through
  // ctypes at that address and writes into it.
  static final String RECEIVER = String.join("\n",
      "import ctypes, sys, numpy as np, dlbridge",
      "t = dlbridge._share._rebuild(bytes.fromhex(sys.argv[1]))",
      "assert t.shape == (4,), t.shape",
      "assert np.from_dlpack(t).ctypes.data == t.data_ptr",
      "a = np.ctypeslib.as_array((ctypes.c_double * 4).from_address(t.data_ptr))",
      "assert a.tolist() == [1.0, 2.0, 3.0, 4.0], a",
      "a *= -1",
      "print('ok')");

  static void ticketToPython() throws Exception {
    try (Buffer b = Buffer.allocateShared("float64", 4)) {
      b.asByteBuffer().asDoubleBuffer().put(new double[] {1, 2, 3, 4});
      Process p = python(RECEIVER, hex(b.issueTicket()));
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
      check(p.waitFor(60, TimeUnit.SECONDS), "python finished");
      equal(p.exitValue(), 0, "python's exit status (output: " + out + ")");
      equal(out, "ok", "python's verdict");
      equal(doubles(b.asByteBuffer()), new double[] {-1, -2, -3, -4}, "Java sees Python's write");
    }
  }

  // The producer: a shared tensor 0..7, the ticket its multiprocessing
  // reducer pickles, on stdout; after "done", the values it sees now.
  static final String PRODUCER = String.join("\n",
      "import sys, numpy as np, dlbridge",
      "t = dlbridge.share(np.arange(8, dtype=np.float64))",
      "rebuild, (ticket,) = dlbridge._share._reduce(t)",
      "print(ticket.hex(), flush=True)",
      "sys.stdin.readline()",
      "print(' '.join(str(x) for x in np.from_dlpack(t).tolist()), flush=True)");

  static void ticketFromPython() throws Exception {
    Process p = python(PRODUCER);
    BufferedReader in = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
    String ticket = in.readLine();
    check(ticket != null, "python printed a ticket");
    try (Buffer b = Buffer.openTicket(unhex(ticket.trim()))) {
      equal(b.shape(), new long[] {8}, "shape");
      equal(b.dtype(), "float64", "dtype");
      DoubleBuffer d = b.asByteBuffer().asDoubleBuffer();
      double[] seen = new double[8];
      d.get(0, seen);
      equal(seen, new double[] {0, 1, 2, 3, 4, 5, 6, 7}, "Python's values");
      for (int i = 0; i < 8; i++) d.put(i, 10.0 * i);
    }
    try (Writer w = new OutputStreamWriter(p.getOutputStream(), StandardCharsets.UTF_8)) {
      w.write("done\n");
    }
    String after = in.readLine();
    check(p.waitFor(60, TimeUnit.SECONDS), "python finished");
    equal(p.exitValue(), 0, "python's exit status");
    equal(after, "0.0 10.0 20.0 30.0 40.0 50.0 60.0 70.0", "Python sees Java's writes");
  }

  static void nothingLeft() throws Exception {
    collect(() -> Dlbridge.liveExports() == 0 && Buffer.keptByteBuffers() == 0 && NativeLibrary.nl_live() == 0);
    equal(Dlbridge.liveExports(), 0L, "live exports");
    equal(Buffer.keptByteBuffers(), 0, "ByteBuffers kept for the library");
    equal(NativeLibrary.nl_live(), 0L, "the native library's tensors");
  }
}

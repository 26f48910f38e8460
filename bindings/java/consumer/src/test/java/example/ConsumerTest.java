package example;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import org.dlbridge.Buffer;
import org.dlbridge.Dlbridge;
import org.dlbridge.DlbridgeException;
import org.dlbridge.ManagedTensor;
import org.dlbridge.Status;
import org.junit.jupiter.api.Test;

/** What a user of the installed artifact writes: no property, no library path. */
class ConsumerTest {
  @Test
  void theLibraryComesFromTheJar() {
    assertEquals("0.1.0", Dlbridge.version());
    String path = Dlbridge.libraryPath();
    assertTrue(path != null && path.startsWith(System.getProperty("java.io.tmpdir")),
        "extracted from the jar: " + path);
    String want = Runtime.version().feature() >= 22 ? "FFM" : "JNA";
    assertEquals(want, Dlbridge.implementation(), "the multi-release jar's classes for Java "
        + Runtime.version().feature());
  }

  @Test
  void valuesRoundTrip() {
    ByteBuffer mem = ByteBuffer.allocateDirect(4 * 6).order(ByteOrder.nativeOrder());
    for (int i = 0; i < 6; i++) mem.putFloat(4 * i, i * 1.5f);
    try (Buffer b = Buffer.wrap(mem, "float32", 2, 3);
        ManagedTensor t = b.exportVersioned();
        Buffer back = Buffer.importTensor(t)) {
      assertArrayEquals(new long[] {2, 3}, back.shape());
      assertEquals("float32", back.dtype());
      assertEquals(b.address(), back.address(), "zero-copy both ways");
      FloatBuffer f = back.asByteBuffer().asFloatBuffer();
      float[] got = new float[6];
      f.get(got);
      assertArrayEquals(new float[] {0, 1.5f, 3, 4.5f, 6, 7.5f}, got);
      back.asWritableByteBuffer().putFloat(4 * 5, -1f);
      assertEquals(-1f, mem.getFloat(4 * 5), "a write lands in the wrapped memory");
    }
  }

  @Test
  void errorsCarryTheirStatus() {
    DlbridgeException e = assertThrows(DlbridgeException.class, () -> Buffer.allocate("float33", 2));
    assertEquals(Status.ERR_UNSUPPORTED_DTYPE, e.status());
    assertEquals("DLB_ERR_UNSUPPORTED_DTYPE", e.statusName());
    assertTrue(e.detail().contains("float33"), e.detail());
    try (Buffer b = Buffer.allocate("int32", 4)) {
      b.delete();
      assertEquals(Status.ERR_DELETED, assertThrows(DlbridgeException.class, b::exportVersioned).status());
    }
  }

  @Test
  void nothingLeftAfterCollection() throws InterruptedException {
    for (int i = 0; i < 100; i++) {
      Buffer.allocate("float64", 16).exportVersioned(); // both dropped unclosed
    }
    for (int i = 0; i < 500 && Dlbridge.liveExports() != 0; i++) {
      System.gc();
      Thread.sleep(20);
    }
    assertEquals(0L, Dlbridge.liveExports(), "the Cleaner ran every deleter");
  }
}

package org.dlbridge;

import java.util.Arrays;
import java.util.function.BooleanSupplier;

/** Assertions the tests share, with messages that show both values. */
final class Checks {
  private Checks() {}

  interface Body {
    void run() throws Exception;
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

  /** Expects a DlbridgeException of {@code status}, with a message, the library's name for it. */
  static DlbridgeException refused(Status status, Body body) {
    DlbridgeException e = raises(DlbridgeException.class, body);
    equal(e.status(), status, "status of " + e.getMessage());
    equal(e.code(), status.code(), "code");
    equal(e.statusName(), "DLB_" + status.name(), "status name");
    check(!e.detail().isEmpty(), "a message");
    return e;
  }

  /** Collects until the Cleaner has run what it should, or 10 s passed. */
  static void collect(BooleanSupplier done) throws InterruptedException {
    for (int i = 0; i < 500 && !done.getAsBoolean(); i++) {
      System.gc();
      Thread.sleep(20);
    }
  }
}

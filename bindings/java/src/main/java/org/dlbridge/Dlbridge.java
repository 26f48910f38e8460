package org.dlbridge;

import java.lang.ref.Cleaner;

/** Facts of the loaded library. */
public final class Dlbridge {
  private Dlbridge() {}

  /**
   * The backstop of every handle of this package: a handle that becomes
   * unreachable without {@code close()} has its reference (or its deleter)
   * dropped on this cleaner's thread. It is a safety net, not the way:
   * close handles (try-with-resources), since nothing says when the
   * collector runs.
   */
  static final Cleaner CLEANER = Cleaner.create();

  /** The library's version, "MAJOR.MINOR.PATCH". */
  public static String version() {
    return Lib.dlb_version_string();
  }

  /**
   * Managed tensors the library exported whose deleter has not run yet, in
   * this process: 0 once every export was consumed or closed.
   */
  public static long liveExports() {
    return Lib.dlb_live_exports();
  }
}

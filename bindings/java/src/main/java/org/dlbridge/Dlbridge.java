package org.dlbridge;

import java.lang.ref.Cleaner;

/** Facts of the loaded library. */
public final class Dlbridge {
  private Dlbridge() {}

  /**
   * The backstop of {@link Buffer} handles and views: a handle that becomes
   * unreachable without {@code close()} has its reference dropped on this
   * cleaner's thread ({@link ManagedTensor}s have a cheaper one of their
   * own, {@code Backstop}). It is a safety net, not the way: close handles
   * (try-with-resources), since nothing says when the collector runs.
   */
  static final Cleaner CLEANER = Cleaner.create();

  /**
   * The library's version.
   *
   * @return "MAJOR.MINOR.PATCH"
   */
  public static String version() {
    return Lib.versionString();
  }

  /**
   * Managed tensors the library exported whose deleter has not run yet, in
   * this process.
   *
   * @return the count: 0 once every export was consumed or closed
   */
  public static long liveExports() {
    return Lib.liveExports();
  }

  /**
   * How this binding calls the library: {@code "FFM"} (the Foreign Function
   * &amp; Memory API, Java 22 and newer, from the multi-release jar) or
   * {@code "JNA"}.
   *
   * @return the implementation's name
   */
  public static String implementation() {
    return Lib.implementation();
  }

  /**
   * The file the library was loaded from: the one named by
   * {@code -Ddlbridge.library} or {@code DLBRIDGE_LIBRARY}, or the jar's copy
   * extracted to a temporary file.
   *
   * @return the path, or null when it was found on the system's library path
   */
  public static String libraryPath() {
    return Lib.PATH;
  }
}

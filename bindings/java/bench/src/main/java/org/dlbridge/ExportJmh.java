package org.dlbridge;

import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * One export + deleter of a 2x3x4x5 float32 buffer, the case of
 * bindings/bench/export_c.c: {@code idiom} as a user writes it
 * (try-with-resources on the ManagedTensor: the export call, the handle and
 * its Cleaner registration, close() running the deleter through a second
 * call); {@code raw} the two native calls alone (the binding's internal
 * entry points, in this package); {@code call} one call without arguments
 * ({@code dlb_live_exports}). Which FFI runs them (FFM on Java 22+, JNA
 * before) is the multi-release jar's choice.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class ExportJmh {
  private Buffer buffer;
  private long handle;

  @Setup(Level.Trial)
  public void setUp() {
    buffer = Buffer.allocate("float32", 2, 3, 4, 5);
    handle = buffer.ptr();
  }

  @TearDown(Level.Trial)
  public void tearDown() {
    buffer.close();
    if (Dlbridge.liveExports() != 0) throw new IllegalStateException("exports left: " + Dlbridge.liveExports());
  }

  @Benchmark
  public void idiom() {
    try (ManagedTensor t = buffer.exportVersioned()) {
      // nothing: the export and its deleter are what is timed
    }
  }

  @Benchmark
  public void raw() {
    Lib.managedFree(Lib.export(handle, true, -1, 0), true);
  }

  @Benchmark
  public long call() {
    return Lib.liveExports();
  }
}

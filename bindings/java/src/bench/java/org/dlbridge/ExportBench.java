package org.dlbridge;

import java.util.Arrays;

/**
 * One export + deleter from Java, for bindings/bench/export-ratio: the
 * idiom ({@code try (ManagedTensor t = b.exportVersioned()) {}}: a JNA call,
 * a handle registered with the Cleaner, the deleter run by close()), with
 * "raw" the two JNA calls alone, with "call" one JNA call without arguments
 * ({@code dlb_live_exports}). Rounds of N after warm-up rounds (for the
 * JIT); prints the median, min and max nanoseconds per export + deleter.
 */
public final class ExportBench {
  public static void main(String[] args) {
    String mode = args.length > 0 ? args[0] : "idiom";
    long n = args.length > 1 ? Long.parseLong(args[1]) : 1_000_000;
    final int rounds = 7;
    final int warmup = 3;
    try (Buffer b = Buffer.allocate("float32", 2, 3, 4, 5)) {
      long h = b.ptr();
      double[] per = new double[rounds];
      for (int r = -warmup; r < rounds; r++) {
        long t0 = System.nanoTime();
        if (mode.equals("call")) {
          for (long i = 0; i < n; i++) Lib.liveExports();
        } else if (mode.equals("raw")) {
          for (long i = 0; i < n; i++) {
            Lib.managedFree(Lib.export(h, true, -1, 0), true);
          }
        } else {
          for (long i = 0; i < n; i++) {
            try (ManagedTensor t = b.exportVersioned()) {
              // nothing: the export and its deleter are what is timed
            }
          }
        }
        if (r >= 0) per[r] = (System.nanoTime() - t0) / (double) n;
      }
      Arrays.sort(per);
      System.out.printf("ns %.1f %.1f %.1f%n", per[rounds / 2], per[0], per[rounds - 1]);
    }
    System.exit(Dlbridge.liveExports() == 0 ? 0 : 1);
  }
}

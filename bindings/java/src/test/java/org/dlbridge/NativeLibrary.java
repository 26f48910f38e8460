package org.dlbridge;

import com.sun.jna.Native;
import com.sun.jna.Pointer;

/**
 * tests/lang/native_library.c through JNA: a native library that takes
 * DLPack tensors and makes its own, knowing nothing of dlbridge. Its path is
 * the system property {@code native.library}.
 */
final class NativeLibrary {
  private NativeLibrary() {}

  static {
    Native.register(NativeLibrary.class, com.sun.jna.NativeLibrary.getInstance(System.getProperty("native.library")));
  }

  static native int nl_sum(Pointer dltensor, double[] out);
  static native int nl_consume_versioned(Pointer tensor, double[] out);
  static native int nl_consume_legacy(Pointer tensor, double[] out);
  static native int nl_store_f64(Pointer dltensor, long i, double value);
  static native Pointer nl_make_versioned(long n, double start);
  static native Pointer nl_make_legacy(long n, double start);
  static native long nl_deleter_calls();
  static native long nl_live();

  /** The DLTensor inside the managed struct. */
  static Pointer dltensor(ManagedTensor t) {
    return new Pointer(t.dltensorAddress());
  }

  static double sum(ManagedTensor t) {
    double[] out = new double[1];
    if (nl_sum(dltensor(t), out) != 0) throw new AssertionError("nl_sum refused the tensor");
    return out[0];
  }

  /** Hands the tensor to the library, which sums it and runs its deleter. */
  static double consume(ManagedTensor t) {
    double[] out = new double[1];
    Pointer p = t.transfer();
    int rc = t.isVersioned() ? nl_consume_versioned(p, out) : nl_consume_legacy(p, out);
    if (rc != 0) {
      (t.isVersioned() ? ManagedTensor.adoptVersioned(p) : ManagedTensor.adoptLegacy(p)).close();
      throw new AssertionError("the native library refused the tensor");
    }
    return out[0];
  }
}

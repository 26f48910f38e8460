package org.dlbridge;

import com.sun.jna.Callback;
import com.sun.jna.CallbackReference;
import com.sun.jna.Memory;
import com.sun.jna.Pointer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A legacy DLManagedTensor of float64 built by hand in native memory, laid
 * out by Abi's offsets (which AbiTest checks against the header), with a
 * deleter that counts its calls: for tensors a real producer would not
 * make (negative extents, strides, another device).
 */
final class HandMade {
  /** The deleter: counts its calls. */
  interface Deleter extends Callback {
    void invoke(Pointer tensor);
  }

  private static final List<Object> KEEP = new ArrayList<>();

  final ManagedTensor tensor;
  private final AtomicInteger deletes = new AtomicInteger();

  private HandMade(long[] shape, long[] strides, int deviceType) {
    long span = 1;
    for (int i = 0; i < shape.length; i++) {
      if (shape[i] > 0) span += (shape[i] - 1) * (strides != null ? strides[i] : 1);
    }
    Memory data = new Memory(8 * Math.max(1, span));
    data.clear();
    Memory extents = new Memory(8L * shape.length);
    extents.write(0, shape, 0, shape.length);
    Memory steps = null;
    if (strides != null) {
      steps = new Memory(8L * strides.length);
      steps.write(0, strides, 0, strides.length);
    }
    Memory m = new Memory(Abi.LEGACY_SIZE);
    m.clear();
    m.setPointer(Abi.DLTENSOR_DATA, data);
    m.setInt(Abi.DLTENSOR_DEVICE, deviceType);
    m.setInt(Abi.DLTENSOR_NDIM, shape.length);
    m.setByte(Abi.DLTENSOR_DTYPE, (byte) 2); // kDLFloat
    m.setByte(Abi.DLTENSOR_DTYPE + Abi.DLDATATYPE_BITS, (byte) 64);
    m.setShort(Abi.DLTENSOR_DTYPE + Abi.DLDATATYPE_LANES, (short) 1);
    m.setPointer(Abi.DLTENSOR_SHAPE, extents);
    m.setPointer(Abi.DLTENSOR_STRIDES, steps);
    Deleter deleter = t -> deletes.incrementAndGet();
    m.setPointer(Abi.LEGACY_DELETER, CallbackReference.getFunctionPointer(deleter));
    synchronized (KEEP) {
      KEEP.add(List.of(data, extents, m, deleter, steps != null ? steps : data));
    }
    tensor = ManagedTensor.adoptLegacy(m);
  }

  static HandMade legacy(long[] shape, long[] strides, int deviceType) {
    return new HandMade(shape, strides, deviceType);
  }

  int deletes() {
    return deletes.get();
  }
}

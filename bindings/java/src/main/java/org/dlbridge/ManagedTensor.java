package org.dlbridge;

import com.sun.jna.Pointer;

/**
 * An owned DLPack managed tensor: a {@code DLManagedTensorVersioned*} or a
 * legacy {@code DLManagedTensor*}, made by {@link Buffer#exportVersioned}
 * or {@link Buffer#exportLegacy}, or one a native library handed over
 * ({@link #adoptVersioned}, {@link #adoptLegacy}). Whoever owns it runs its
 * deleter exactly once: {@link #close()} does, unless the tensor was handed
 * on ({@link #transfer()} to a native consumer, {@link Buffer#importTensor}
 * to a buffer). A tensor dropped without either has its deleter run on a
 * daemon thread once the collector finds it unreachable (a phantom
 * reference, as a {@link java.lang.ref.Cleaner} would), as a backstop. Not
 * for concurrent use.
 */
public final class ManagedTensor implements AutoCloseable {
  /** The tensor and its backstop; holds no reference to the ManagedTensor. */
  private static final class Owner extends Backstop.Ref {
    final long tensor;
    final boolean versioned;

    Owner(ManagedTensor referent, long tensor, boolean versioned) {
      super(referent);
      this.tensor = tensor;
      this.versioned = versioned;
    }

    @Override
    void release() {
      Lib.managedFree(tensor, versioned);
    }
  }

  private final Owner owner;
  private boolean owned = true; // not for concurrent use: disarm() is what decides, atomically

  ManagedTensor(long tensor, boolean versioned) {
    owner = new Owner(this, tensor, versioned);
  }

  private static long nonNull(long tensor) {
    if (tensor == 0) throw new NullPointerException("tensor");
    return tensor;
  }

  /**
   * Takes ownership of a {@code DLManagedTensorVersioned*} a native library
   * produced: its deleter now runs when this is closed or imported.
   *
   * @param tensor the struct's address, not null
   * @return the owner
   */
  public static ManagedTensor adoptVersioned(Pointer tensor) {
    return new ManagedTensor(nonNull(Pointer.nativeValue(tensor)), true);
  }

  /**
   * The same, from a bare address.
   *
   * @param tensor the struct's address, not 0
   * @return the owner
   */
  public static ManagedTensor adoptVersioned(long tensor) {
    return new ManagedTensor(nonNull(tensor), true);
  }

  /**
   * The same for a legacy {@code DLManagedTensor*}.
   *
   * @param tensor the struct's address, not null
   * @return the owner
   */
  public static ManagedTensor adoptLegacy(Pointer tensor) {
    return new ManagedTensor(nonNull(Pointer.nativeValue(tensor)), false);
  }

  /**
   * The same for a legacy {@code DLManagedTensor*} at a bare address.
   *
   * @param tensor the struct's address, not 0
   * @return the owner
   */
  public static ManagedTensor adoptLegacy(long tensor) {
    return new ManagedTensor(nonNull(tensor), false);
  }

  /**
   * Which struct this is.
   *
   * @return true for a {@code DLManagedTensorVersioned}, false for a legacy one
   */
  public boolean isVersioned() {
    return owner.versioned;
  }

  /**
   * The struct's address, to lend to a native function that reads the
   * tensor (it stays owned here).
   *
   * @return the address
   * @throws DlbridgeException ERR_INVALID_ARGUMENT when it was closed or
   *     handed on
   */
  public long address() {
    if (!owned) {
      throw new DlbridgeException(Status.ERR_INVALID_ARGUMENT.code(), Lib.statusName(Status.ERR_INVALID_ARGUMENT.code()),
          "the managed tensor was closed or handed on");
    }
    return owner.tensor;
  }

  /**
   * The struct's address as a JNA pointer; see {@link #address()}.
   *
   * @return the pointer
   * @throws DlbridgeException ERR_INVALID_ARGUMENT when it was closed or
   *     handed on
   */
  public Pointer pointer() {
    return new Pointer(address());
  }

  /**
   * The address of the tensor's {@code DLTensor} inside the struct, for a
   * native function that takes a {@code DLTensor*}.
   *
   * @return the address
   * @throws DlbridgeException ERR_INVALID_ARGUMENT when it was closed or
   *     handed on
   */
  public long dltensorAddress() {
    return address() + (owner.versioned ? Abi.VERSIONED_DL_TENSOR : Abi.LEGACY_DL_TENSOR);
  }

  /**
   * Hands the tensor on: returns its address and gives up ownership, for a
   * native consumer that will run the deleter itself. {@link #close()} then
   * does nothing.
   *
   * @return the struct's address
   * @throws DlbridgeException ERR_INVALID_ARGUMENT when it was closed or
   *     handed on already
   */
  public Pointer transfer() {
    long p = address();
    disown();
    return new Pointer(p);
  }

  /** Ownership moved elsewhere: the backstop must not run the deleter. */
  void disown() {
    owned = false;
    if (owner.disarm()) owner.clear();
  }

  /** Runs the deleter, if this still owns the tensor. Calling it again does nothing. */
  @Override
  public void close() {
    owned = false;
    if (owner.disarm()) {
      owner.clear();
      owner.release();
    }
  }
}

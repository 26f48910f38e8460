package org.dlbridge;

import com.sun.jna.Pointer;
import java.lang.ref.Cleaner;

/**
 * An owned DLPack managed tensor: a {@code DLManagedTensorVersioned*} or a
 * legacy {@code DLManagedTensor*}, made by {@link Buffer#exportVersioned}
 * or {@link Buffer#exportLegacy}, or one a native library handed over
 * ({@link #adoptVersioned}, {@link #adoptLegacy}). Whoever owns it runs its
 * deleter exactly once: {@link #close()} does, unless the tensor was handed
 * on ({@link #transfer()} to a native consumer, {@link Buffer#importTensor}
 * to a buffer). A tensor dropped without either has its deleter run by a
 * {@link java.lang.ref.Cleaner}, as a backstop. Not for concurrent use.
 */
public final class ManagedTensor implements AutoCloseable {
  /** The cleaning action; holds no reference to the ManagedTensor. */
  private static final class Owner implements Runnable {
    private final Pointer tensor;
    private final boolean versioned;
    private volatile boolean owned = true;

    Owner(Pointer tensor, boolean versioned) {
      this.tensor = tensor;
      this.versioned = versioned;
    }

    @Override
    public void run() {
      if (!owned) return;
      owned = false;
      if (versioned) {
        Lib.dlb_managed_free_versioned(tensor);
      } else {
        Lib.dlb_managed_free_legacy(tensor);
      }
    }
  }

  private final Owner owner;
  private final Cleaner.Cleanable cleanable;

  ManagedTensor(Pointer tensor, boolean versioned) {
    owner = new Owner(tensor, versioned);
    cleanable = Dlbridge.CLEANER.register(this, owner);
  }

  /**
   * Takes ownership of a {@code DLManagedTensorVersioned*} a native library
   * produced: its deleter now runs when this is closed or imported.
   */
  public static ManagedTensor adoptVersioned(Pointer tensor) {
    if (tensor == null) throw new NullPointerException("tensor");
    return new ManagedTensor(tensor, true);
  }

  /** The same for a legacy {@code DLManagedTensor*}. */
  public static ManagedTensor adoptLegacy(Pointer tensor) {
    if (tensor == null) throw new NullPointerException("tensor");
    return new ManagedTensor(tensor, false);
  }

  /** True for a {@code DLManagedTensorVersioned}, false for a legacy one. */
  public boolean isVersioned() {
    return owner.versioned;
  }

  /**
   * The struct's address, to lend to a native function that reads the
   * tensor (it stays owned here).
   * @throws IllegalStateException when it was closed or handed on.
   */
  public Pointer pointer() {
    if (!owner.owned) throw new IllegalStateException("the managed tensor was closed or handed on");
    return owner.tensor;
  }

  /**
   * Hands the tensor on: returns its address and gives up ownership, for a
   * native consumer that will run the deleter itself. {@link #close()} then
   * does nothing.
   * @throws IllegalStateException when it was closed or handed on already.
   */
  public Pointer transfer() {
    Pointer p = pointer();
    owner.owned = false;
    cleanable.clean(); // nothing left to do: unregisters the backstop
    return p;
  }

  /** Ownership moved to a buffer: the backstop must not run the deleter. */
  void disown() {
    owner.owned = false;
    cleanable.clean();
  }

  /** Runs the deleter, if this still owns the tensor. Calling it again does nothing. */
  @Override
  public void close() {
    cleanable.clean();
  }
}

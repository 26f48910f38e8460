package org.dlbridge;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.lang.ref.PhantomReference;
import java.lang.ref.Reference;
import java.lang.ref.ReferenceQueue;

/**
 * The backstop of {@link ManagedTensor}: a phantom reference per tensor
 * whose release runs exactly once, by whoever disarms it first:
 * {@code close()} (or a hand-over), or this class's daemon thread once the
 * collector found the tensor unreachable. What a
 * {@link java.lang.ref.Cleaner} does, for less, since every export makes
 * one (a Cleaner registration cost more than the export itself): one
 * object per registration instead of two, one lock per registration (in
 * one of a few stripes) instead of two, and a compare-and-set to disarm.
 * The references are kept reachable in their stripe's list; disarmed ones
 * are swept from it when the list has doubled since the last sweep.
 */
final class Backstop {
  private Backstop() {}

  /** A tracked object: its release runs once, after a successful {@link #disarm()}. */
  abstract static class Ref extends PhantomReference<Object> {
    private static final VarHandle STATE;

    static {
      try {
        STATE = MethodHandles.lookup().findVarHandle(Ref.class, "state", int.class);
      } catch (ReflectiveOperationException e) {
        throw new ExceptionInInitializerError(e);
      }
    }

    private volatile int state; // 0 armed, 1 disarmed
    private Ref next; // in its stripe's list, under the stripe's lock

    Ref(Object referent) {
      super(referent, QUEUE);
      STRIPES[(int) (Thread.currentThread().getId() & (STRIPES.length - 1))].add(this);
    }

    /** True for the one caller that disarmed it, who then must {@link #release()}. */
    final boolean disarm() {
      return STATE.compareAndSet(this, 0, 1);
    }

    final boolean armed() {
      return (int) STATE.getVolatile(this) == 0;
    }

    /** Runs once, after a successful {@link #disarm()}. */
    abstract void release();
  }

  /** One list of references, with its own lock. */
  private static final class Stripe {
    private Ref head;
    private int size;
    private int sweepAt = 1024;

    synchronized void add(Ref r) {
      r.next = head;
      head = r;
      if (++size >= sweepAt) sweep();
    }

    /** Drops the disarmed references; the next sweep waits until the list doubles. */
    private void sweep() {
      Ref kept = null;
      int n = 0;
      for (Ref r = head; r != null; ) {
        Ref next = r.next;
        if (r.armed()) {
          r.next = kept;
          kept = r;
          n++;
        } else {
          r.next = null;
        }
        r = next;
      }
      head = kept;
      size = n;
      sweepAt = 2 * n + 1024;
    }
  }

  private static final ReferenceQueue<Object> QUEUE = new ReferenceQueue<>();
  private static final Stripe[] STRIPES = new Stripe[8];

  static {
    for (int i = 0; i < STRIPES.length; i++) STRIPES[i] = new Stripe();
    Thread t = new Thread(Backstop::drain, "dlbridge-backstop");
    t.setDaemon(true);
    t.start();
  }

  private static void drain() {
    while (true) {
      try {
        Reference<?> r = QUEUE.remove();
        if (r instanceof Ref && ((Ref) r).disarm()) ((Ref) r).release();
      } catch (InterruptedException e) {
        // keep draining: the thread lives as long as the process
      } catch (Throwable e) {
        // a release must not end the thread that runs all of them
      }
    }
  }
}

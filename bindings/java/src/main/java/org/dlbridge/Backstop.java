package org.dlbridge;

import java.lang.ref.PhantomReference;
import java.lang.ref.Reference;
import java.lang.ref.ReferenceQueue;

/**
 * The backstop of {@link ManagedTensor}: a phantom reference per tensor,
 * kept in one of a few locked lists, whose release runs exactly once, by
 * whoever unlinks it first: {@code close()} (or a hand-over), or this
 * class's daemon thread once the collector found the tensor unreachable.
 * It does what a {@link java.lang.ref.Cleaner} does with one object per
 * registration instead of two and a lock per stripe instead of one for
 * all, since every export makes one (the Cleaner registration cost more
 * than the export itself).
 */
final class Backstop {
  private Backstop() {}

  /** A tracked object: its release runs once, after it was unlinked. */
  abstract static class Ref extends PhantomReference<Object> {
    private Ref prev;
    private Ref next;
    private final Stripe stripe;

    Ref(Object referent) {
      super(referent, QUEUE);
      stripe = STRIPES[(int) (Thread.currentThread().getId() & (STRIPES.length - 1))];
      stripe.link(this);
    }

    /** A stripe's head: in no list, never enqueued. */
    private Ref() {
      super(null, null);
      stripe = null;
    }

    /** Unlinks this; true for the one caller that did, who then must {@link #release()}. */
    final boolean unlink() {
      return stripe.unlink(this);
    }

    /** Runs once, after a successful {@link #unlink()}. */
    abstract void release();
  }

  /** The head of a stripe's list. */
  private static final class Head extends Ref {
    @Override
    void release() {}
  }

  /** One list; its head is a sentinel. */
  private static final class Stripe {
    private final Ref head = new Head();

    synchronized void link(Ref r) {
      r.prev = head;
      r.next = head.next;
      if (head.next != null) head.next.prev = r;
      head.next = r;
    }

    synchronized boolean unlink(Ref r) {
      if (r.prev == null) return false;
      r.prev.next = r.next;
      if (r.next != null) r.next.prev = r.prev;
      r.prev = null;
      r.next = null;
      return true;
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
        if (r instanceof Ref && ((Ref) r).unlink()) ((Ref) r).release();
      } catch (InterruptedException e) {
        // keep draining: the thread lives as long as the process
      } catch (Throwable e) {
        // a release must not end the thread that runs all of them
      }
    }
  }
}

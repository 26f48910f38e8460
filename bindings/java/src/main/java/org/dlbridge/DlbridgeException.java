package org.dlbridge;

/**
 * A refusal of libdlbridge: its {@link Status}, the name of the C constant
 * as the library's {@code dlb_status_name} gives it, and the library's
 * message, which says which value was wrong. Unchecked: every call can
 * refuse, and the caller decides where to handle it.
 */
public final class DlbridgeException extends RuntimeException {
  private static final long serialVersionUID = 2L;

  /** The status number. */
  private final int code;
  /** The library's name of the status. */
  private final String statusName;
  /** The library's message. */
  private final String detail;

  DlbridgeException(int code, String statusName, String detail) {
    super(statusName + ": " + detail);
    this.code = code;
    this.statusName = statusName;
    this.detail = detail;
  }

  /**
   * The status.
   *
   * @return the status constant; {@link Status#UNKNOWN} for a number this
   *     binding does not know ({@link #code()} still has it)
   */
  public Status status() {
    return Status.of(code);
  }

  /**
   * The status number.
   *
   * @return the {@code DLB_ERR_*} value the library returned
   */
  public int code() {
    return code;
  }

  /**
   * The status constant's name, from the library.
   *
   * @return the name, e.g. {@code "DLB_ERR_DELETED"}
   */
  public String statusName() {
    return statusName;
  }

  /**
   * The library's message alone, without the status name.
   *
   * @return the message, e.g. {@code "shape[1] is -3"}
   */
  public String detail() {
    return detail;
  }
}

package org.dlbridge;

/**
 * A refusal of libdlbridge: its status (the number and the name of the C
 * constant, as {@code dlb_status_name} gives it) and the library's message,
 * which says which value was wrong. Unchecked, as JNA's own errors are: every
 * call can refuse, and the caller decides where to handle it.
 */
public final class DlbridgeException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final int status;
  private final String statusName;
  private final String detail;

  DlbridgeException(int status, String statusName, String detail) {
    super(statusName + ": " + detail);
    this.status = status;
    this.statusName = statusName;
    this.detail = detail;
  }

  /** The status number ({@code DLB_ERR_*}'s value). */
  public int status() {
    return status;
  }

  /** The status constant's name, e.g. {@code "DLB_ERR_DELETED"}. */
  public String statusName() {
    return statusName;
  }

  /** The library's message alone, without the status name. */
  public String detail() {
    return detail;
  }
}

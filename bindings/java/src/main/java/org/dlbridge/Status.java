package org.dlbridge;

/**
 * The library's status codes ({@code dlb_status}), one constant per C
 * constant: the Java name is the C name without its {@code DLB_} prefix
 * ({@code ERR_DELETED} is {@code DLB_ERR_DELETED}), the number is the one
 * the C header fixes. The test suite checks every name against the loaded
 * library's {@code dlb_status_name}.
 */
public enum Status {
  /** Success. */
  OK(0),
  /** An argument is missing or out of its range (also: a closed handle). */
  ERR_INVALID_ARGUMENT(1),
  /** An allocation inside the library failed. */
  ERR_OUT_OF_MEMORY(2),
  /** The buffer was deleted (donated), or a ticket was opened already. */
  ERR_DELETED(3),
  /** Zero-copy access is impossible and no copy was allowed. */
  ERR_NOT_ZERO_COPY(4),
  /** An unknown dtype, or bits and lanes not legal for its code. */
  ERR_UNSUPPORTED_DTYPE(5),
  /** An unknown device, or one the memory cannot be moved to or read from. */
  ERR_UNSUPPORTED_DEVICE(6),
  /** A layout the call cannot take (strided where compact is needed, ...). */
  ERR_UNSUPPORTED_LAYOUT(7),
  /** Writable access was asked of read-only memory. */
  ERR_READ_ONLY(8),
  /** A DLPack major version the library does not speak. */
  ERR_VERSION(9),
  /** A count or size does not fit in 64 bits. */
  ERR_OVERFLOW(10),
  /** A tensor or argument breaks the DLPack rules (negative extent, ...). */
  ERR_MALFORMED(11),
  /** The data is not aligned as required. */
  ERR_ALIGNMENT(12),
  /** A backend callback failed. */
  ERR_BACKEND(13),
  /** A bug in dlbridge. */
  ERR_INTERNAL(14),
  /** A number this version of the binding does not know (a newer library). */
  UNKNOWN(-1);

  private static final Status[] BY_CODE;

  static {
    Status[] all = values();
    BY_CODE = new Status[all.length - 1];
    for (Status s : all) {
      if (s.code >= 0) BY_CODE[s.code] = s;
    }
  }

  private final int code;

  Status(int code) {
    this.code = code;
  }

  /**
   * The C constant's number.
   *
   * @return the number; -1 for {@link #UNKNOWN}
   */
  public int code() {
    return code;
  }

  /**
   * The constant for a status number.
   *
   * @param code a {@code dlb_status} value
   * @return its constant, or {@link #UNKNOWN} for a number not listed here
   */
  public static Status of(int code) {
    return code >= 0 && code < BY_CODE.length ? BY_CODE[code] : UNKNOWN;
  }
}

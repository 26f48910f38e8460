package org.dlbridge;

import static org.dlbridge.Checks.equal;

import org.junit.jupiter.api.Test;

/** The Status enum against the loaded library's dlb_status_name table. */
class StatusTest {
  @Test
  void everyCodeNamedAsTheLibraryNamesIt() {
    for (int code = 0; code < Abi.STATUS_COUNT; code++) {
      Status s = Status.of(code);
      equal(s.code(), code, "code of " + s);
      equal("DLB_" + s.name(), Lib.statusName(code), "the name of status " + code);
    }
    equal(Status.values().length, Abi.STATUS_COUNT + 1, "one constant per code, and UNKNOWN");
  }

  @Test
  void unknownCodes() {
    equal(Lib.statusName(Abi.STATUS_COUNT), "DLB_UNKNOWN_STATUS", "the library's name past the last code");
    equal(Status.of(Abi.STATUS_COUNT), Status.UNKNOWN, "past the last code");
    equal(Status.of(-5), Status.UNKNOWN, "negative");
    equal(Status.UNKNOWN.code(), -1, "UNKNOWN's number");
  }
}

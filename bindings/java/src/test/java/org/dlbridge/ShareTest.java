package org.dlbridge;

import static org.dlbridge.Checks.check;
import static org.dlbridge.Checks.equal;
import static org.dlbridge.Checks.refused;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.DoubleBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Tickets between this JVM and a Python process of the build's package
 * (system properties dlbridge.pythonpath and dlbridge.python), both ways;
 * a ticket opens once.
 */
class ShareTest {
  private static double[] doubles(java.nio.ByteBuffer b) {
    DoubleBuffer d = b.asDoubleBuffer();
    double[] out = new double[d.remaining()];
    d.get(out);
    return out;
  }

  private static Process python(String code, String... args) throws Exception {
    List<String> cmd = new ArrayList<>(List.of(System.getProperty("dlbridge.python", "/usr/bin/python3"), "-c", code));
    cmd.addAll(Arrays.asList(args));
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT);
    pb.environment().put("PYTHONPATH", System.getProperty("dlbridge.pythonpath"));
    pb.environment().put("PYTHONDONTWRITEBYTECODE", "1");
    return pb.start();
  }

  static String hex(byte[] bytes) {
    StringBuilder s = new StringBuilder();
    for (byte b : bytes) s.append(String.format("%02x", b));
    return s.toString();
  }

  static byte[] unhex(String s) {
    byte[] out = new byte[s.length() / 2];
    for (int i = 0; i < out.length; i++) out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
    return out;
  }

  // The receiver: opens the ticket as unpickling a multiprocessing pickle
  // does (dlb_share_ticket_open), checks it maps the memory without a copy
  // (numpy's DLPack view is at the mapping's address), reads it through
  // ctypes at that address and writes into it.
  static final String RECEIVER = String.join("\n",
      "import ctypes, sys, numpy as np, dlbridge",
      "t = dlbridge._share._rebuild(bytes.fromhex(sys.argv[1]))",
      "assert t.shape == (4,), t.shape",
      "assert np.from_dlpack(t).ctypes.data == t.data_ptr",
      "a = np.ctypeslib.as_array((ctypes.c_double * 4).from_address(t.data_ptr))",
      "assert a.tolist() == [1.0, 2.0, 3.0, 4.0], a",
      "a *= -1",
      "print('ok')");

  @Test
  void ticketToPython() throws Exception {
    try (Buffer b = Buffer.allocateShared("float64", 4)) {
      b.asByteBuffer().asDoubleBuffer().put(new double[] {1, 2, 3, 4});
      Process p = python(RECEIVER, hex(b.issueTicket()));
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
      check(p.waitFor(60, TimeUnit.SECONDS), "python finished");
      equal(p.exitValue(), 0, "python's exit status (output: " + out + ")");
      equal(out, "ok", "python's verdict");
      equal(doubles(b.asByteBuffer()), new double[] {-1, -2, -3, -4}, "Java sees Python's write");
    }
  }

  // The producer: a shared tensor 0..7, the ticket its multiprocessing
  // reducer pickles, on stdout; after "done", the values it sees now.
  static final String PRODUCER = String.join("\n",
      "import sys, numpy as np, dlbridge",
      "t = dlbridge.share(np.arange(8, dtype=np.float64))",
      "rebuild, (ticket,) = dlbridge._share._reduce(t)",
      "print(ticket.hex(), flush=True)",
      "sys.stdin.readline()",
      "print(' '.join(str(x) for x in np.from_dlpack(t).tolist()), flush=True)");

  @Test
  void ticketFromPython() throws Exception {
    Process p = python(PRODUCER);
    BufferedReader in = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
    String ticket = in.readLine();
    check(ticket != null, "python printed a ticket");
    try (Buffer b = Buffer.openTicket(unhex(ticket.trim()))) {
      equal(b.shape(), new long[] {8}, "shape");
      equal(b.dtype(), "float64", "dtype");
      DoubleBuffer d = b.asByteBuffer().asDoubleBuffer();
      double[] seen = new double[8];
      d.get(0, seen);
      equal(seen, new double[] {0, 1, 2, 3, 4, 5, 6, 7}, "Python's values");
      for (int i = 0; i < 8; i++) d.put(i, 10.0 * i);
    }
    try (Writer w = new OutputStreamWriter(p.getOutputStream(), StandardCharsets.UTF_8)) {
      w.write("done\n");
    }
    String after = in.readLine();
    check(p.waitFor(60, TimeUnit.SECONDS), "python finished");
    equal(p.exitValue(), 0, "python's exit status");
    equal(after, "0.0 10.0 20.0 30.0 40.0 50.0 60.0 70.0", "Python sees Java's writes");
  }

  @Test
  void aTicketOpensOnce() throws Exception {
    Process p = python(PRODUCER);
    BufferedReader in = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
    byte[] ticket = unhex(in.readLine().trim());
    try (Buffer b = Buffer.openTicket(ticket)) {
      equal(b.shape(), new long[] {8}, "shape");
      DlbridgeException e = refused(Status.ERR_DELETED, () -> Buffer.openTicket(ticket));
      check(e.detail().contains(Long.toString(p.pid())), "names the issuer's pid: " + e.detail());
    }
    try (Writer w = new OutputStreamWriter(p.getOutputStream(), StandardCharsets.UTF_8)) {
      w.write("done\n");
    }
    in.readLine();
    check(p.waitFor(60, TimeUnit.SECONDS), "python finished");
  }
}

package org.dlbridge;

import static org.dlbridge.Checks.check;
import static org.dlbridge.Checks.equal;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * A library that cannot be loaded (here: a file that is no ELF object,
 * named by -Ddlbridge.library in a child JVM of the same class path) fails
 * the first call with an UnsatisfiedLinkError that names the file and the
 * dynamic loader's reason, under either implementation.
 */
class LoadFailureTest {
  /** The child: the first call, and what it threw. */
  public static void main(String[] args) {
    try {
      System.out.println("loaded " + Dlbridge.version());
    } catch (Throwable e) {
      Throwable t = e;
      while (t.getCause() != null && !(t instanceof UnsatisfiedLinkError)) t = t.getCause();
      System.out.println(t.getClass().getSimpleName() + ": " + t.getMessage());
    }
  }

  @Test
  void aBrokenLibraryIsNamedWithTheLoadersReason() throws Exception {
    Path dir = Files.createDirectories(Path.of(System.getProperty("dlbridge.scratch",
        System.getProperty("java.io.tmpdir"))));
    Path bogus = dir.resolve("not-a-library.so");
    Files.write(bogus, "not an ELF file\n".repeat(20).getBytes(StandardCharsets.UTF_8));
    Path java = Path.of(System.getProperty("java.home"), "bin", "java");
    Process p = new ProcessBuilder(List.of(java.toString(), "--enable-native-access=ALL-UNNAMED",
        "-cp", System.getProperty("java.class.path"), "-Ddlbridge.library=" + bogus, LoadFailureTest.class.getName()))
        .redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    check(p.waitFor(60, TimeUnit.SECONDS), "the child finished");
    equal(p.exitValue(), 0, "the child's exit status (output: " + out + ")");
    check(out.contains("UnsatisfiedLinkError: "), out);
    check(out.contains(bogus.toString()), "names the file: " + out);
    check(out.contains("ELF"), "says why (the loader's message): " + out);
  }
}

package org.dlbridge;

import static org.dlbridge.Checks.check;
import static org.dlbridge.Checks.equal;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Every constant, size and offset of {@link Abi} against the C headers: a
 * C program (src/test/c/abi_facts.c) compiled here against
 * {@code dlbridge.include} prints what the compiler says, and each line
 * must equal the binding's entry of the same name, both ways.
 */
class AbiTest {
  private static String run(Path dir, String... cmd) throws Exception {
    Process p = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    check(p.waitFor(120, TimeUnit.SECONDS), String.join(" ", cmd) + " finished");
    equal(p.exitValue(), 0, String.join(" ", cmd) + " (output: " + out + ")");
    return out;
  }

  @Test
  void constantsSizesAndOffsetsMatchTheHeaders() throws Exception {
    String include = System.getProperty("dlbridge.include");
    check(include != null && new File(include, "dlbridge/dlbridge.h").isFile(),
        "-Ddlbridge.include names the headers' folder: " + include);
    Path dir = Files.createDirectories(Path.of(System.getProperty("dlbridge.scratch",
        System.getProperty("java.io.tmpdir")), "abi"));
    Path source = Path.of("src/test/c/abi_facts.c").toAbsolutePath();
    String cc = System.getenv().getOrDefault("CC", "cc");
    run(dir, cc, "-std=c99", "-Wall", "-Werror", "-I" + include, source.toString(), "-o", "abi_facts");
    Map<String, Long> header = new LinkedHashMap<>();
    for (String line : run(dir, dir.resolve("abi_facts").toString()).split("\n")) {
      if (line.isBlank()) continue;
      int space = line.lastIndexOf(' ');
      header.put(line.substring(0, space), Long.parseLong(line.substring(space + 1)));
    }
    Map<String, Long> java = Abi.facts();
    equal(java.keySet(), header.keySet(), "the entries the Java side and the C program list");
    for (Map.Entry<String, Long> e : header.entrySet()) {
      equal(java.get(e.getKey()), e.getValue(), e.getKey());
    }
  }

  @Test
  void copyPoliciesAreTheHeadersNumbers() {
    equal(Buffer.Copy.IF_NEEDED.code, Abi.COPY_IF_NEEDED, "IF_NEEDED");
    equal(Buffer.Copy.NEVER.code, Abi.COPY_NEVER, "NEVER");
    equal(Buffer.Copy.ALWAYS.code, Abi.COPY_ALWAYS, "ALWAYS");
  }
}

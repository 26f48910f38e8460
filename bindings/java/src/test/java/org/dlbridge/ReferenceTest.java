package org.dlbridge;

import static org.dlbridge.Checks.check;

import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/**
 * docs/reference/java-api.md names every public class, method and Status
 * constant of the package (a method the page does not name fails).
 */
class ReferenceTest {
  @Test
  void thePageNamesEveryPublicMethod() throws Exception {
    Path page = Path.of(System.getProperty("dlbridge.reference", "../../docs/reference/java-api.md"));
    check(Files.isRegularFile(page), "the reference page: " + page.toAbsolutePath());
    String text = new String(Files.readAllBytes(page), StandardCharsets.UTF_8);
    Class<?>[] classes = {Buffer.class, Buffer.Copy.class, ManagedTensor.class, Dlbridge.class,
        DlbridgeException.class, Status.class};
    for (Class<?> c : classes) {
      String name = c.getCanonicalName().substring(c.getPackageName().length() + 1); // Buffer.Copy
      check(text.contains("`" + name), "the page names " + name);
      for (Method m : c.getDeclaredMethods()) {
        if (!Modifier.isPublic(m.getModifiers()) || m.isSynthetic()) continue;
        if (c.isEnum() && (m.getName().equals("values") || m.getName().equals("valueOf"))) continue;
        if (c == DlbridgeException.class && m.getDeclaringClass() != c) continue;
        check(text.contains(m.getName() + "("), "the page names " + c.getSimpleName() + "." + m.getName());
      }
      if (c.isEnum()) {
        for (Object constant : c.getEnumConstants()) {
          check(text.contains("`" + constant + "`"), "the page names " + c.getSimpleName() + "." + constant);
        }
      }
    }
  }
}

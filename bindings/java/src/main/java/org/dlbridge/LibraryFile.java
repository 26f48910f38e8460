package org.dlbridge;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

/**
 * Where libdlbridge is, one rule for both implementations: the file named
 * by the system property {@code dlbridge.library}; else by the environment
 * variable {@code DLBRIDGE_LIBRARY}; else the copy inside the jar, at JNA's
 * resource path for this platform ({@code linux-x86-64/libdlbridge.so}),
 * extracted to a temporary file; else none, and the system's library path
 * is searched for {@code libdlbridge.so}.
 */
final class LibraryFile {
  private LibraryFile() {}

  /** JNA's name of this platform's resource folder, e.g. "linux-x86-64". */
  static String platformFolder() {
    String os = System.getProperty("os.name", "").toLowerCase(java.util.Locale.ROOT);
    String arch = System.getProperty("os.arch", "").toLowerCase(java.util.Locale.ROOT);
    if (arch.equals("amd64") || arch.equals("x86_64")) arch = "x86-64";
    return (os.startsWith("linux") ? "linux" : os.replace(' ', '_')) + "-" + arch;
  }

  /**
   * The library's path, or null to search the system's library path.
   *
   * @throws UncheckedIOException when the jar's copy cannot be extracted
   */
  static String locate() {
    String path = System.getProperty("dlbridge.library");
    if (path == null || path.isEmpty()) path = System.getenv("DLBRIDGE_LIBRARY");
    if (path != null && !path.isEmpty()) return path;
    String resource = platformFolder() + "/" + System.mapLibraryName("dlbridge");
    try (InputStream in = LibraryFile.class.getClassLoader().getResourceAsStream(resource)) {
      if (in == null) return null;
      Path file = Files.createTempFile("dlbridge", ".so");
      file.toFile().deleteOnExit();
      Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
      return file.toString();
    } catch (IOException e) {
      throw new UncheckedIOException("cannot extract " + resource + " from the dlbridge jar", e);
    }
  }
}

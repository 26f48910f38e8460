#!/usr/bin/env bash
# Builds the Java binding with javac alone (no Maven registry here):
# <out>/dlbridge.jar from src/main, and with --tests the test classes in
# <out>/test-classes. JNA comes from Debian's libjna-java, or $JNA_JAR.
#
#   bash bindings/java/build.sh <out-dir> [--tests]
set -euo pipefail

out=${1:?usage: build.sh <out-dir> [--tests]}
here=$(cd "$(dirname "$0")" && pwd)
jna=${JNA_JAR:-/usr/share/java/jna.jar}
[ -f "$jna" ] || { echo "build.sh: $jna is missing (apt-get install libjna-java, or set JNA_JAR)" >&2; exit 1; }
command -v javac >/dev/null || { echo "build.sh: javac is missing (apt-get install openjdk-17-jdk-headless)" >&2; exit 1; }

mkdir -p "$out"
rm -rf "$out/classes" "$out/test-classes"
javac -Xlint:all -Werror --release 17 -cp "$jna" -d "$out/classes" $(find "$here/src/main/java" -name '*.java')
jar cf "$out/dlbridge.jar" -C "$out/classes" .
if [ "${2:-}" = --tests ]; then
  javac -Xlint:all -Werror --release 17 -cp "$jna:$out/classes" -d "$out/test-classes" \
    $(find "$here/src/test/java" -name '*.java')
fi

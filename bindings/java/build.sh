#!/usr/bin/env bash
# Builds the Java binding's JNA classes with javac alone, without Maven:
# <out>/dlbridge.jar from src/main/java (no FFM classes, no library inside:
# run it with -Ddlbridge.library=...). JNA comes from Debian's libjna-java,
# or $JNA_JAR. The artifact users get is the Maven build (pom.xml); this
# stays for scripts/doc-examples and bindings/bench/export-ratio.
#
#   bash bindings/java/build.sh <out-dir>
set -euo pipefail

out=${1:?usage: build.sh <out-dir>}
here=$(cd "$(dirname "$0")" && pwd)
jna=${JNA_JAR:-/usr/share/java/jna.jar}
[ -f "$jna" ] || { echo "build.sh: $jna is missing (apt-get install libjna-java, or set JNA_JAR)" >&2; exit 1; }
command -v javac >/dev/null || { echo "build.sh: javac is missing (apt-get install openjdk-17-jdk-headless)" >&2; exit 1; }

mkdir -p "$out"
rm -rf "$out/classes"
javac -Xlint:all -Werror --release 17 -cp "$jna" -d "$out/classes" $(find "$here/src/main/java" -name '*.java')
jar cf "$out/dlbridge.jar" -C "$out/classes" .

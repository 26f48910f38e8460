#!/usr/bin/env bash
# Stage: the Java binding (bindings/java, JNA): built with javac into
# <build-dir>/bindings/java, its tests (a plain java main) against the
# build's libdlbridge, tests/lang's native library and a Python process (the
# build's package, /usr/bin/python3); the guide's examples run in the docs
# stage (scripts/doc-examples). A missing JDK or JNA (openjdk-17-jdk-headless, libjna-java:
# scripts/install-deps) is a skip, which fails under CI=true.
# timeout: 240
#
#   bash scripts/test.d/58-java.sh <build-dir>
set -euo pipefail

build=${1:?usage: 58-java.sh <build-dir>}
[ -d "$build" ] || { echo "58-java: no build directory '$build'" >&2; exit 2; }
[ -f bindings/java/build.sh ] || { echo "58-java: run from the repository root" >&2; exit 2; }
build=$(cd "$build" && pwd)
lib=$build/src/libdlbridge.so
native=$build/tests/lang/libnative_library.so
for f in "$lib" "$native" "$build/python/dlbridge/__init__.py"; do
  [ -e "$f" ] || { echo "58-java: $f is missing (a build with tests and the Python package)" >&2; exit 1; }
done
jna=${JNA_JAR:-/usr/share/java/jna.jar}
for tool in java javac jar; do
  command -v "$tool" >/dev/null || { echo "58-java: skipped: $tool is not installed (openjdk-17-jdk-headless)"; exit 77; }
done
[ -f "$jna" ] || { echo "58-java: skipped: $jna is missing (libjna-java)"; exit 77; }

out=$build/bindings/java
echo "== 58-java: build ($(javac -version 2>&1), $(basename "$(readlink -f "$jna")"))"
bash bindings/java/build.sh "$out" --tests

props=(-Ddlbridge.library="$lib")
echo "== 58-java: tests"
java -cp "$jna:$out/dlbridge.jar:$out/test-classes" "${props[@]}" -Dnative.library="$native" \
  -Ddlbridge.pythonpath="$build/python" -Ddlbridge.python="${DLB_TEST_PYTHON:-/usr/bin/python3}" \
  org.dlbridge.BindingTest

echo "== 58-java: OK"

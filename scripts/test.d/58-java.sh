#!/usr/bin/env bash
# Stage: the Java binding as Maven users get it. bindings/java is built,
# tested and installed with `mvn install` against the fresh build's
# libdlbridge (packed into the jar): Surefire runs the tests on the classes
# (JNA), Failsafe on the packaged multi-release jar (FFM, JDK 22+), with
# tests/lang's native library and a Python process of the build's package;
# the Javadoc is built with doclint, warnings failing. Then the consumer
# project (bindings/java/consumer), copied to a fresh folder, depends on the
# installed artifact and runs its tests with JDK 22+ (FFM) and JDK 17 (JNA),
# with no library path or property. Maven's repository is kept outside the
# work tree (scripts/java-env: /var/cache/dlbridge/m2); once a run has
# filled it for these poms, Maven runs offline (-o). A missing JDK or Maven
# (openjdk-17-jdk-headless, maven: scripts/install-deps; the Temurin JDK the
# machines carry) is a skip, which fails under CI=true.
# timeout: 420
#
#   bash scripts/test.d/58-java.sh <build-dir>
set -euo pipefail

build=${1:?usage: 58-java.sh <build-dir>}
[ -d "$build" ] || { echo "58-java: no build directory '$build'" >&2; exit 2; }
[ -f bindings/java/pom.xml ] || { echo "58-java: run from the repository root" >&2; exit 2; }
root=$(pwd)
build=$(cd "$build" && pwd)
for f in "$build/src/libdlbridge.so" "$build/tests/lang/libnative_library.so" "$build/python/dlbridge/__init__.py"; do
  [ -e "$f" ] || { echo "58-java: $f is missing (a build with tests and the Python package)" >&2; exit 1; }
done
eval "$(bash scripts/java-env)"
command -v mvn >/dev/null || { echo "58-java: skipped: mvn is not installed (maven)"; exit 77; }
[ -n "$DLB_JDK17" ] || { echo "58-java: skipped: no JDK 17 to 21 (openjdk-17-jdk-headless)"; exit 77; }
[ -n "$DLB_JDK22" ] || { echo "58-java: skipped: no JDK 22 or newer (the FFM side) in /usr/lib/jvm or /opt"; exit 77; }

# Offline once this repository holds everything these poms need.
stamp=$DLB_M2/.dlbridge-java-$(cat bindings/java/pom.xml bindings/java/consumer/pom.xml | sha256sum | cut -c1-16)
offline=()
[ -f "$stamp" ] && offline=(-o)
mvn_() { JAVA_HOME=$1 mvn -B -ntp "${offline[@]}" -Dmaven.repo.local="$DLB_M2" "${@:2}"; }
# The installed artifact below is this run's: no copy of an earlier run.
rm -rf "$DLB_M2/org/dlbridge/dlbridge"

# docs/java.md's install line (`<!-- install: maven -->`), run as written in
# the repository root: the build named by DLBRIDGE_BUILD, Maven's repository
# and the tests' Python given to Maven's JVM (MAVEN_OPTS), JDK 22+.
line=$(bash scripts/install-doc-block maven docs/java.md)
echo "== 58-java: $line (JDK $("$DLB_JDK22/bin/java" -version 2>&1 | head -n 1); Maven repository $DLB_M2)"
JAVA_HOME=$DLB_JDK22 DLBRIDGE_BUILD=$build \
  MAVEN_OPTS="-Dmaven.repo.local=$DLB_M2 -Ddlbridge.python=${DLB_TEST_PYTHON:-/usr/bin/python3}" \
  bash -euo pipefail -c "$line"
jar=$root/bindings/java/target/dlbridge-0.1.0.jar
# Listed once, then searched: `unzip | grep -q` under pipefail fails when
# grep stops reading before unzip has written everything (SIGPIPE).
listing=$(unzip -l "$jar")
manifest=$(unzip -p "$jar" META-INF/MANIFEST.MF)
grep -q ' linux-x86-64/libdlbridge.so$' <<<"$listing" || { echo "58-java: the jar has no linux-x86-64/libdlbridge.so" >&2; exit 1; }
grep -q ' META-INF/versions/22/org/dlbridge/Lib.class$' <<<"$listing" || { echo "58-java: the jar has no FFM classes" >&2; exit 1; }
grep -q '^Automatic-Module-Name: org.dlbridge' <<<"$manifest" || { echo "58-java: no Automatic-Module-Name" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for jdk in "$DLB_JDK22" "$DLB_JDK17"; do
  echo "== 58-java: the consumer project on the installed artifact ($("$jdk/bin/java" -version 2>&1 | head -n 1))"
  rm -rf "$work/consumer" && cp -r bindings/java/consumer "$work/consumer"
  (cd "$work/consumer" && env -u DLBRIDGE_LIBRARY -u LD_LIBRARY_PATH bash -c "$(declare -f mvn_); offline=(${offline[*]}); DLB_M2=$DLB_M2; mvn_ '$jdk' verify")
done
touch "$stamp"
cd "$root"
echo "== 58-java: OK"
